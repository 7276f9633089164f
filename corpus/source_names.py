"""The short, location-independent names of a corpus job's inputs (:func:`source_namer`): each path
relative to the inputs' common directory. They go into document ids and ``rejects/``, so the output
bytes stay the same wherever the corpus lives. Part of the corpus stage's reading; re-exported by
:mod:`kolectra.corpus.reader`, whose API they were."""

from __future__ import annotations

import functools
import os
import posixpath
import re
from typing import Callable, Iterable


def source_names(files: list[str]) -> dict[str, str]:
    """Each path's source name (:func:`source_namer`), as a table."""
    name_of = source_namer(files)
    return {f: name_of(f) for f in files}


def source_namer(files: Iterable[str]) -> Callable[[str], str]:
    """Short, location-independent names: each path relative to the inputs' common directory.

    The names go into document ids and ``rejects/``; making them relative keeps the output bytes
    the same wherever the corpus lives, while still unique across the inputs. Local paths are
    made absolute first; remote ones (``gs://bucket/...``) are compared within their scheme.
    ``files`` is read once, holding only the common directory: the name of any of them is worked
    out when asked (a table of a million names held 120 MB in the launcher).
    """
    schemes: set[str] = set()
    common: str | None = None
    count = 0
    mixed = None  # absolute and relative paths in one scheme (s3:///a, s3://b): raised as commonpath did
    for f in files:
        scheme, rest = _split(f)
        schemes.add(scheme)
        count += 1
        try:  # the common path of all, one path at a time (as posixpath.commonpath of the list gives it)
            common = rest if common is None else posixpath.commonpath([common, rest]) if len(schemes) == 1 else common
        except ValueError as e:
            mixed = e
    if len(schemes) != 1:
        return _same  # mixed schemes (or none): no common directory
    if mixed is not None:
        raise mixed
    if count == 1:
        common = posixpath.dirname(common)
    return functools.partial(_relative, common)


_URL = re.compile(r"^([A-Za-z][\w+.-]*://)(.*)$")


def _split(path: str) -> tuple[str, str]:
    m = _URL.match(path)
    if m:
        return m.group(1), m.group(2)
    return "", os.path.abspath(path).replace(os.sep, "/")


def _same(path: str) -> str:
    return path


def _relative(common: str, path: str) -> str:
    rest = _split(path)[1]
    # relpath of a normal path below ``common`` is its tail: 1 us where relpath takes 20 (it makes both
    # absolute, a getcwd for a store's key); anything it would normalise ("//", "/./", "/..") goes to it
    if rest.startswith(common + "/") and "//" not in rest and "/." not in rest and not rest.endswith("/"):
        return rest[len(common) + 1:]
    return posixpath.relpath(rest, common) if common else rest
