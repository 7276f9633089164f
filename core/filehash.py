"""A file's sha256, read from disk at most once per process while the file stays the same.

:func:`sha256` hashes a file and remembers the digest under the file's stamp (device, inode, size,
modification and change time) taken before its bytes were read, when the stamp was the same after
they were read; asked again for a file that still has that stamp, it answers without reading. The
artifact store checks every file of a parent this way before a stage reads it
(:mod:`kolectra.pipeline.store.manifest`), and the pretraining loader pins its shards the same way
(:mod:`kolectra.model.shard_guard`): one run hashes its examples once, not once per check (three on
a local root before). :func:`hashed` counts what was read, for tests and measurements.

Why a stamp may stand for the bytes: Linux moves a file's change time when a write begins, and no
program can set it back (the reasoning :mod:`kolectra.model.shard_guard` rests on), so a file with
the stamp it had when its bytes were read still has those bytes. One gap: a write in the same
timestamp granule as the file's last change leaves the change time where it was. A digest is
therefore remembered only for a file whose last change was over :data:`SETTLED_NS` before its
bytes were read: every later write lands in a later granule (the coarsest local timestamps: whole
seconds on ext3 or ext4 with 128-byte inodes, two on FAT; a clock tick elsewhere). A file changed
more recently is read every time, as every file was before. Limits, as shard_guard's: a network
file system may answer a stat from its attribute cache (NFS's ``actimeo``), and a clock stepped
back can repeat a change time.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import NamedTuple

SETTLED_NS = 2_000_000_000


class Stamp(NamedTuple):
    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int


def stamp_of(st: os.stat_result) -> Stamp:
    return Stamp(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_known: dict[tuple[int, int], tuple[Stamp, str]] = {}  # (dev, ino) -> (stamp when read, sha256)
_hashed = {"files": 0, "bytes": 0}


def stamped_sha256(path: Path | str) -> tuple[Stamp, str]:
    """(the file's stamp before its bytes were read, their sha256): read now, or remembered from a
    read in this process when the file still has that stamp."""
    settled = time.time_ns() - SETTLED_NS  # before the stamp: a write after it lands in a later granule
    with open(path, "rb") as f:
        before = stamp_of(os.fstat(f.fileno()))
        known = _known.get(before[:2])
        if known is not None and known[0] == before:
            return known
        digest = hashlib.file_digest(f, "sha256").hexdigest()
        _hashed["files"] += 1
        _hashed["bytes"] += f.tell()
        if stamp_of(os.fstat(f.fileno())) == before and before.ctime_ns < settled:
            _known[before[:2]] = (before, digest)
        else:
            _known.pop(before[:2], None)
    return before, digest


def sha256(path: Path | str) -> str:
    """sha256 of the file's bytes (read at most once while it keeps its stamp)."""
    return stamped_sha256(path)[1]


def hashed() -> dict[str, int]:
    """Files and bytes this process has read to hash them so far."""
    return dict(_hashed)
