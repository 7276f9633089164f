"""The recorded form of an ``--input`` http(s) URL: the URL less what is a credential in it.

A signed URL (S3's ``?X-Amz-Credential=...&X-Amz-Signature=...`` or its older ``AWSAccessKeyId=...&Signature=...``,
GCS's ``X-Goog-...``, an Azure SAS's ``sig``, CloudFront's ``Signature``/``Policy``/``Key-Pair-Id``), an API's
key or token (``token``, ``api_key``, GitLab's ``private_token``, Google's ``key=AIza...``) or a URL with
``user:password@`` went whole into the manifest's inputs, the identity (the corpus id), the document ids
and stats' sources: a published artifact held a key that reads the bucket, and the same object signed
again was another corpus. The recorded form drops the userinfo and those query parameters (the signing's
dates and expiries with them: they move at every signing); every other parameter (``?id=2``, a ``key``
that is no Google API key) is kept as written, and a URL without any of them is recorded exactly as given
(its ids as before). The URL as given is still what is read.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit

# a query parameter of these names (lower-cased) is a credential, or moves at each signing (GitLab's
# private_token and job_token, Firebase's auth, an Alibaba OSS or Tencent COS temporary key's token)
_SECRET = {"signature", "sig", "token", "access_token", "id_token", "api_key", "apikey", "x-api-key",
           "password", "passwd", "secret", "client_secret", "private_token", "job_token", "auth", "auth_token",
           "access_key", "secret_key", "session_token", "security-token", "refresh_token", "oauth_token",
           "x-cos-security-token", "q-signature"}
_SIGNING_PREFIXES = ("x-amz-", "x-goog-", "x-oss-")  # S3's (and S3-compatible stores'), GCS's, OSS's v4
# dropped beside a signature: the signing's own fields (legacy GCS / CloudFront; S3's and OSS's v2 with
# their access key's id; an Azure SAS's; a Tencent COS signature's)
_WITH_SIGNATURE = {"expires", "policy", "key-pair-id", "googleaccessid", "awsaccesskeyid", "ossaccesskeyid",
                   "sv", "ss", "srt", "sp", "se", "st", "spr", "sr", "si", "sdd", "skoid", "sktid", "skt", "ske",
                   "sks", "skv", "saoid", "suoid", "scid", "ses", "sduoid",
                   "q-sign-algorithm", "q-ak", "q-sign-time", "q-key-time", "q-header-list", "q-url-param-list"}
_SIGNATURES = {"signature", "sig", "x-amz-signature", "x-goog-signature", "q-signature"}
# ``key`` is a Google API key only by its value (AIza and 35 more): elsewhere it may select the content
_GOOGLE_API_KEY = re.compile(r"AIza[0-9A-Za-z_-]{35}")
_URL = re.compile(r"https?://[^\s'\"<>]+", re.IGNORECASE)
# the user:password@ of a URL of any other scheme (ftp://, sftp://, smb://: refused, but named in the error)
_USERINFO = re.compile(r"(?<![\w+.-])([A-Za-z][\w+.-]*://)[^\s'\"<>/?#@]+@")


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
                                                    or (signed and n in _WITH_SIGNATURE)
                                                    or (n == "key" and _GOOGLE_API_KEY.fullmatch(
                                                        unquote_plus(q.partition("=")[2]))))]
    if netloc == parts.netloc and len(kept) == len(query):
        return url
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{'&'.join(kept)}" if kept else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))


def redacted(text: str) -> str:
    """``text`` (a message, a command line) with each http(s) URL in it in its recorded form, and any other
    URL without its ``user:password@``."""
    return _USERINFO.sub(r"\1", _URL.sub(lambda m: recorded(m.group(0)), text)) if "://" in text else text
