"""One object on a store, by its URL: whether there is one (:func:`object_info`: one HEAD, not a listing)
and when the store last wrote it, by the store's own clock (:func:`modified` from its info, :func:`age`).

It sits on :mod:`kolectra.core.storage` (the store's filesystem, its failures as one line); the same
question of many URLs at once is :mod:`kolectra.core.object_infos`'s. The artifact store asks it of a
manifest or report (``pipeline/stages.py``, ``pipeline/hub.py``, ``pipeline/store/roots.py``,
``pipeline/scores.py``), of a lease (``pipeline/store/lease.py``: whether it expired) and of a manifest
or a build's request (``pipeline/store/catalog.py``'s ``written_at``: when last written).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json

from kolectra.core.storage import ROOT_SCHEMES, filesystem, names_no_object, scheme, translated


def object_info(location: str) -> dict | None:
    """The info of the object stored at exactly ``location``, or None where there is none (nothing,
    or only a folder: keys below it). On S3 one HEAD (fsspec's ``info`` lists the prefix too when
    the HEAD finds nothing); the key is taken as it is, ``*``, ``?`` and ``[`` included."""
    fs, path = filesystem(location)
    bucket, _, key = path.partition("/")
    if names_no_object(location, bucket, key):
        return None
    with translated(location):
        try:
            if scheme(location) in ("s3", "s3a"):
                return s3_head_info(fs.call_s3("head_object", Bucket=bucket, Key=key), path)
            found = fs.info(path)
        except FileNotFoundError:
            return None
    return found if found.get("type") != "directory" else None


def s3_head_info(head: dict, path: str) -> dict:
    """An S3 ``head_object`` answer as fsspec's info of the object at ``path``."""
    return {**head, "name": path, "size": head.get("ContentLength"), "type": "file"}


def modified(found: dict) -> float | None:
    """An object's last-modified time (seconds since the epoch, the store's clock) from its info."""
    for key in ("LastModified", "updated", "mtime", "last_modified"):
        value = found.get(key)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if isinstance(value, _dt.datetime):
            return (value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)).timestamp()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def age(location: str, found: dict | None = None) -> float | None:
    """Seconds since the object at ``location`` was last written, by the store's own clock (so a
    reader whose clock is off reads it right), or None when the store tells no times.

    S3: one HEAD, its ``Date`` header minus ``Last-Modified``; GCS: one metadata GET, its ``Date``
    minus ``updated``. Nothing is written (GCS takes about one write a second to one object name).
    Another store: a small object written beside it (``.clock``) gives the store's time now."""
    fs, path = filesystem(location)
    bucket, _, key = path.partition("/")
    with translated(location):
        if scheme(location) not in ROOT_SCHEMES:
            then = modified(found if found is not None else fs.info(path))
            clock = path.rsplit("/", 1)[0] + "/.clock"
            fs.pipe_file(clock, b"")
            now = modified(fs.info(clock))
            return None if then is None or now is None else now - then
        try:
            if scheme(location) in ("s3", "s3a"):
                head = fs.call_s3("head_object", Bucket=bucket, Key=key)
                date, then = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date"), head.get("LastModified")
            else:  # gcsfs: the (headers, body) of the object's metadata
                headers, body = fs.call("GET", "b/{}/o/{}", bucket, key)
                date, then = headers.get("Date"), modified(json.loads(body))
        except FileNotFoundError:
            return None
    if not date or then is None:
        return None
    from email.utils import parsedate_to_datetime  # noqa: PLC0415

    return parsedate_to_datetime(date).timestamp() - (then.timestamp() if isinstance(then, _dt.datetime) else then)
