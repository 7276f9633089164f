"""What a location names, told from its text alone: a local path or an object-store URL (``s3://``,
``gs://``, ...), its scheme, its plain local path, a path joined below it, and the store URL that a
location with one slash after its scheme (``s3:/bucket/x``, which a local path would make a folder
``s3:`` of) was meant to be.

No I/O and no fsspec: :mod:`kolectra.core.storage`, which reads and writes what these name, sits on
this module and re-exports each name (``storage.is_url`` is :func:`is_url`); the command line's checks
of ``--out``, ``--to``, ``--dest`` and ``KOLECTRA_HOME`` refuse a one-slash URL with
:func:`one_slash_problem`.
"""

from __future__ import annotations

import os
import re

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][\w+.-]*)://")


def is_url(location: str | os.PathLike) -> bool:
    """Whether ``location`` names an object store (``file://`` is a local path)."""
    m = _SCHEME.match(str(location))
    return bool(m) and m["scheme"].lower() != "file"


def scheme(url: str) -> str:
    m = _SCHEME.match(url)
    return m["scheme"].lower() if m else "file"


def local_path(location: str | os.PathLike) -> str:
    """A local location as a plain path (``file:///a/b`` -> ``/a/b``)."""
    text = str(location)
    return text[len("file://"):] if text.lower().startswith("file://") else text


def join(base: str, *parts: str) -> str:
    """``base/part/...`` for URLs (always ``/``) and for local paths."""
    if not is_url(base):
        return os.path.join(local_path(base), *parts)
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts if p)])


_ONE_SLASH = re.compile(r"^(?P<scheme>s3a?|gs|gcs|file|hdfs|https?):/(?!/)", re.IGNORECASE)


def one_slash_url(location: str | os.PathLike) -> str | None:
    """The store URL a local path given for a place to write was meant to be, or None: ``s3:/bucket/x``
    (one slash: a typo, or a tool that folded ``//``) would make a folder named ``s3:`` here, as the
    command line's ``type=Path`` did of ``s3://`` (872ffaf, 233086f). ``./s3:/x`` is a local path."""
    m = _ONE_SLASH.match(str(location))
    if m is None:
        return None
    # file:/a/b names /a/b (RFC 8089's short form): file:///a/b; file://a/b is read as the relative a/b
    return f"{m['scheme']}://{'/' if m['scheme'].lower() == 'file' else ''}{str(location)[m.end():]}"


def one_slash_problem(location: str | os.PathLike, flag: str) -> str | None:
    """The one line refusing ``location`` (:func:`one_slash_url`), naming ``flag``; None if it is not one."""
    meant = one_slash_url(location)
    if meant is None:
        return None
    folder = str(location).split("/", 1)[0]
    return (f"{flag} {location}: a local folder named '{folder}' here, not a store: did you mean {meant}? (a local "
            f"folder of that name: ./{location})")
