"""A glob over an object store, answered a page of its listing at a time: what the corpus
launcher lists its ``--input`` URLs with (:func:`iter_glob`, from ``corpus/inputs.py``; :func:`glob`, the
same sorted), on :mod:`kolectra.core.storage`'s filesystem for the URL.

fsspec's ``glob`` answers with one dict of every match and drops what the listing said about each
object, so the launcher held every match and then asked for each again, a HEAD per object, one
after the other: hours before the job starts at a million files (docs/scale.md, "Input files in a
bucket", has the figures). Here each object comes out as it is listed, with its size and the
store's checksum (S3's ETag, GCS's generation: the fields a HEAD gives), and nothing is kept
behind it:

- S3 (and S3-compatible servers): ``ListObjectsV2`` a page (1,000 keys) at a time, with the
  pattern's literal start as the server-side ``Prefix``; one level at a time with ``Delimiter='/'``
  down to the pattern's depth, or the whole prefix at once under a ``**``.
- any other fsspec store (GCS included): fsspec's ``walk`` down to the pattern's depth, so a
  folder's listing at a time.

Which names match is fsspec's own rule (``fsspec.utils.glob_translate``, as ``AbstractFileSystem.glob``
applies it): ``*`` within a level, ``**`` across levels, ``?``, ``[...]``. Folders (and S3's
zero-byte folder markers, keys ending in ``/``) are never matches. The order is the store's:
callers sort (the launcher's external sort).
"""

from __future__ import annotations

import re
from typing import Iterator, NamedTuple
from urllib.parse import unquote

from kolectra.core.storage import checksum_of, filesystem, is_url, scheme, translated

MAGIC = re.compile(r"[*?\[]")
PAGE_KEYS = 1000  # keys a ListObjectsV2 page asks for (S3's own most)


def iter_glob(pattern: str) -> Iterator[tuple[str, int, str | None]]:
    """(full URL, size, the store's checksum) of every object matching ``pattern`` (a store URL with
    ``*``, ``?``, ``[...]``), as the listing gives them, a page at a time and in the store's order
    (:func:`iter_matches`): no request per match, nothing held behind it."""
    fs, path = filesystem(pattern)
    proto = scheme(pattern)
    with translated(pattern):
        for found in iter_matches(fs, proto, path):
            # fsspec's HTTP file system keeps the scheme in its paths: http://http://host/a.txt was asked for
            url = found.path if is_url(found.path) else f"{proto}://{found.path}"
            yield url, found.size, checksum_of(found.meta)


def glob(pattern: str) -> list[str]:
    """Full URLs of the objects matching ``pattern``, sorted."""
    return sorted(url for url, _, _ in iter_glob(pattern))


class Listed(NamedTuple):
    """One object a glob matched: its path inside the store (no protocol), size, raw listing entry."""

    path: str
    size: int
    meta: dict


def root_and_depth(path: str) -> tuple[str, str, int | None]:
    """(the folder above the first glob character, the literal start of the pattern, the levels
    below that folder a match can be at: None for any, under a ``**``), as fsspec's glob counts them."""
    first = MAGIC.search(path).start()
    cut = path.rfind("/", 0, first)
    root = path[:cut + 1]
    depth = None if "**" in path else path[cut + 1:].count("/") + 1
    return root, path[:first], depth


def iter_matches(fs, proto: str, path: str) -> Iterator[Listed]:
    """The objects under ``fs`` whose path matches the glob ``path`` (protocol stripped), in the
    store's order, a listing page at a time."""
    from fsspec.utils import glob_translate  # noqa: PLC0415 - fsspec: only when a store is used

    if not MAGIC.search(path):  # a plain name: that object, if there is one (as fsspec's glob)
        try:
            meta = fs.info(path)
        except FileNotFoundError:
            return
        if meta.get("type") != "directory":
            yield _listed(meta, path)
        return
    matches = re.compile(glob_translate(path)).match
    root, literal, depth = root_and_depth(path)
    if not root:  # a pattern that names no bucket: fsspec's own glob (it refuses what it cannot list)
        found = fs.glob(path, detail=True)
        listed = (_listed(m, p) for p, m in sorted(found.items()) if m.get("type") != "directory")
    elif proto in ("s3", "s3a"):
        listed = _s3_objects(fs, root, literal, depth)
    else:  # from the folder without its "/": gcsfs lists a folder marker ("raw/") as a folder inside "raw/"
        listed = (_listed(m, m["name"]) for _, _, files in fs.walk(root.rstrip("/"), maxdepth=depth, detail=True)
                  for m in files.values() if m.get("type") != "directory")
    # an index page links its files percent-encoded (리뷰.txt as %EB%A6%AC%EB%B7%B0.txt): a pattern spelt as
    # the names are matched nothing; the link is kept as the page gives it
    spelt = proto in ("http", "https")
    for found in listed:
        if matches(found.path) or (spelt and matches(unquote(found.path))):
            yield found


def _listed(meta: dict, path: str) -> Listed:
    """An fsspec listing or info entry as a match."""
    return Listed(path, int(meta.get("size") or 0), meta)


def _s3_objects(fs, root: str, literal: str, depth: int | None) -> Iterator[Listed]:
    """Every object below ``root`` (``bucket/prefix/``) down to ``depth`` levels, a page at a time;
    the first level asks only for keys starting with the pattern's ``literal`` start."""
    bucket, _, first = literal.partition("/")
    todo = [(first, depth)]
    while todo:
        prefix, levels = todo.pop()
        ask = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": PAGE_KEYS}
        if levels is not None:
            ask["Delimiter"] = "/"
        while True:
            page = fs.call_s3("list_objects_v2", **ask)
            for obj in page.get("Contents", ()):
                if not obj["Key"].endswith("/"):
                    yield Listed(f"{bucket}/{obj['Key']}", int(obj["Size"]), obj)
            if levels is not None and levels > 1:
                todo.extend((p["Prefix"], levels - 1) for p in page.get("CommonPrefixes", ()))
            if not page.get("IsTruncated"):
                break
            ask["ContinuationToken"] = page["NextContinuationToken"]
