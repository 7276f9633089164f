"""Deleting what ``kolectra artifacts gc`` found dead (a folder of a disk root or of the cache, a prefix of a
store root), and saying what could not be deleted whole.

Before 2026-12-02 gc deleted with errors ignored (``rmtree(ignore_errors=True)``; on S3 a bulk delete, whose
refused keys s3fs does not raise): a leftover only partly deleted (a file of another user, an immutable one, an
object a bucket policy or a retention keeps) read ``removed``, and gc exited 0. Now each such one is a
:class:`Failed`: why (the first error), the bytes that did go and those left; the caller says it and goes on.

A folder's manifest goes first (at its top, and a run's ``out/``): what is left of a build gc could not delete
whole then holds none, and nothing reads it as complete (``artifacts list``'s line on a complete copy a kill
left in ``.tmp``, the sweep's choice of what to publish).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

from kolectra.core import storage
from kolectra.pipeline.store.manifest import MANIFEST


class Failed(NamedTuple):
    """A path or URL gc could not delete whole: why (the first error), the bytes it freed and those left."""

    path: str
    why: str
    bytes: int
    left: int


def tree_bytes(d: Path) -> int:
    """The bytes of the files under ``d`` (links not followed: what lies elsewhere is not freed)."""
    total = 0
    for top, _, files in os.walk(d):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, f)).st_size
    return total


def remove_dir(d: Path) -> Failed | None:
    """Delete folder ``d`` (or the file or link there): None once it is gone, else what is left and why."""
    if d.is_symlink() or not d.is_dir():
        try:
            d.unlink(missing_ok=True)
        except OSError as e:
            return Failed(str(d), _why(e, d), 0, 0)
        return None
    before = tree_bytes(d)
    errors: list[str] = []
    for marker in (d / MANIFEST, d / "out" / MANIFEST):  # first: a build half deleted must not read as complete
        try:
            marker.unlink(missing_ok=True)
        except OSError as e:
            errors.append(_why(e, marker))
    rmtree_said(d, errors)
    if not d.exists() and not d.is_symlink():
        return None
    left = tree_bytes(d)
    return Failed(str(d), errors[0] if errors else "still there", max(before - left, 0), left)


def rmtree_said(d: Path, errors: list[str]) -> None:
    """Delete the tree ``d`` as far as it goes, each error added to ``errors`` as ``why: PATH`` (the whole path)."""
    if sys.version_info >= (3, 12):
        shutil.rmtree(d, onexc=lambda _f, p, e: errors.append(_why(e, p)))
    else:
        shutil.rmtree(d, onerror=lambda _f, p, exc: errors.append(_why(exc[1], p)))


def remove_prefix(url: str) -> Failed | None:
    """Delete every object under store prefix ``url``: None once none is left, else what is left and why.
    A bulk delete reports a refused key in its reply, which s3fs drops: what is listed after is what stayed."""
    before = _sizes(url)
    why = ""
    try:
        storage.remove(url, recursive=True)
    except (OSError, storage.StoreError) as e:  # gcsfs raises the first refused delete (s3fs none)
        why = str(e).removeprefix(f"{url}: ")  # (the line names the prefix already)
    left = _sizes(url)
    if not left:
        return None
    first = storage.join(url, sorted(left)[0])
    why = why or (f"the store did not delete {len(left)} object(s), {first} first (refused: a bucket policy, a "
                  "retention or legal hold?)")
    freed = sum(n for rel, n in before.items() if rel not in left)
    return Failed(url, why, freed, sum(left.values()))


def _sizes(url: str) -> dict[str, int]:
    return {rel: int(meta.get("size") or 0) for rel, meta in storage.listing(url).items()}


def _why(e: BaseException, path: object) -> str:
    """The error and the whole path it met (rmtree's own errors name it relative to the folder it is in)."""
    return f"{e.strerror if isinstance(e, OSError) and e.strerror else e}: {path}"

