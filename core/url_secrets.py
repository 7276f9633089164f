"""The recorded form of an ``--input`` http(s) URL: the URL less what is a credential in it.

A signed URL (S3's ``?X-Amz-Credential=...&X-Amz-Signature=...``, GCS's ``X-Goog-...``, an Azure SAS's
``sig``, CloudFront's ``Signature``/``Policy``/``Key-Pair-Id``) or a URL with ``user:password@`` went whole
into the manifest's inputs, the identity (the corpus id), the document ids and stats' sources: a published
artifact held a key that reads the bucket, and the same object signed again was another corpus. The
recorded form drops the userinfo and those query parameters (the signing's dates and expiries with them:
they move at every signing); every other parameter (``?id=2``) is kept as written, and a URL without
any of them is recorded exactly as given (its ids as before). The URL as given is still what is read.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit

# a query parameter of these names (lower-cased) is a credential, or moves at each signing
_SECRET = {"signature", "sig", "token", "access_token", "id_token", "api_key", "apikey", "x-api-key",
           "password", "passwd", "secret", "client_secret"}
_SIGNING_PREFIXES = ("x-amz-", "x-goog-")
# dropped beside a signature: the signing's own fields (legacy GCS / CloudFront; an Azure SAS's)
_WITH_SIGNATURE = {"expires", "policy", "key-pair-id", "googleaccessid",
                   "sv", "ss", "srt", "sp", "se", "st", "spr", "sr", "si", "sdd", "skoid", "sktid", "skt", "ske",
                   "sks", "skv", "saoid", "suoid", "scid", "ses", "sduoid"}
_SIGNATURES = {"signature", "sig", "x-amz-signature", "x-goog-signature"}
_URL = re.compile(r"https?://[^\s'\"<>]+", re.IGNORECASE)


def recorded(url: str) -> str:
    """``url`` as the corpus stage records it (identity, manifest, document ids, lines it prints);
    ``url`` itself when it is no http(s) URL or holds none of the above."""
    if not url[:8].lower().startswith(("http://", "https://")):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # a malformed URL: the listing refuses it, naming it
        return url
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query.split("&") if parts.query else []
    names = [unquote_plus(q.partition("=")[0]).lower() for q in query]
    signed = any(n in _SIGNATURES for n in names)
    kept = [q for q, n in zip(query, names) if not (n in _SECRET or n.startswith(_SIGNING_PREFIXES)
                                                    or (signed and n in _WITH_SIGNATURE))]
    if netloc == parts.netloc and len(kept) == len(query):
        return url
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{'&'.join(kept)}" if kept else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))


def redacted(text: str) -> str:
    """``text`` (a message, a command line) with each http(s) URL in it in its recorded form."""
    return _URL.sub(lambda m: recorded(m.group(0)), text) if "://" in text else text
