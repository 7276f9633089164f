"""A growing file of a run kept in a store as parts: each checkpoint uploads only what was appended.

An object store cannot append to an object, and a pretraining run's ``metrics.jsonl`` grows by a line
every ``log_every`` steps. Uploaded whole at every checkpoint (as it was), a run sent O(lines) bytes a
save and O(lines x saves) in all: 4.4 MB a save at 1 M steps (``log_every`` 100). The store's copy of
a run keeps it instead as parts, ``RUN/parts/<name>/<start>-<end>-<sha256>`` (16-digit byte offsets):
bytes ``[start, end)`` of the file and their sha256. A checkpoint uploads one part, the whole lines
written since the last one, before the checkpoint's files (a kill in between leaves the log ahead of
the newest checkpoint, which the trainer trims back to it on resume, never behind it).

Read back (:func:`fetch`, ``--resume`` on a machine without the run) by concatenating the chain of
parts from byte 0 into the one local file every reader knows (health check, resume's trim, the
published artifact, its manifest, ``verify``, ``kolectra report``: none of them sees a part); each
part is checked against its name, and a gap, a missing part or one that does not match ends the chain
there (the log is then shorter, as a log cut by a kill is).

A build's first upload compares the local file (trimmed back to the checkpoint it resumed from) with
the store's parts, reading each part's range of the local file once; the parts from the first one
that differs on are removed and everything after the matching ones goes up as one part. Only
:data:`GROWING` names are kept this way, and only keys of the part form are read or removed (the
keys under a run are data: whoever may write the bucket wrote them).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path

from kolectra.core import storage
from kolectra.core.stage import progress

PARTS = "parts"  # RUN/parts/<name>/<part>
GROWING = ("metrics.jsonl",)  # the run's files that grow with the steps, mirrored a part at a time
_PART = re.compile(r"(\d{16})-(\d{16})-([0-9a-f]{64})", re.ASCII)  # ASCII digits: the names part_name gives
_CHUNK = 1 << 20

Part = tuple[int, int, str]  # start, end, sha256 of the bytes [start, end)


def part_name(part: Part) -> str:
    start, end, digest = part
    return f"{start:016d}-{end:016d}-{digest}"


def chain(names) -> list[Part]:
    """The parts among ``names`` (keys under ``RUN/parts/<name>/``) that follow one another from byte
    0; other keys are not parts and are ignored. Of two parts at one offset the longer one is taken."""
    starting: dict[int, list[Part]] = {}
    for name in names:
        if (m := _PART.fullmatch(name)) and int(m[2]) > int(m[1]):
            starting.setdefault(int(m[1]), []).append((int(m[1]), int(m[2]), m[3]))
    out: list[Part] = []
    at = 0
    while at in starting:
        out.append(max(starting[at], key=lambda p: (p[1], p[2])))
        at = out[-1][1]
    return out


def parts_in(listing, name: str) -> list[str]:
    """The keys of ``name``'s parts in a listing of the run (keys relative to the run)."""
    prefix = f"{PARTS}/{name}/"
    return [k[len(prefix) :] for k in listing if k.startswith(prefix) and "/" not in k[len(prefix) :]]


def fetch(run_url: str, listing, out_dir: Path) -> None:
    """Each :data:`GROWING` file kept as parts in the store's run (``listing``: its keys) into
    ``out_dir``, replacing what is there; a file without parts is left as it is."""
    for name in GROWING:
        parts = chain(parts_in(listing, name))
        if not parts:
            continue
        dest = out_dir / name
        tmp = dest.with_name(dest.name + ".part")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as out:
            for part in parts:
                h, n = hashlib.sha256(), 0
                with storage.open_file(storage.join(run_url, PARTS, name, part_name(part))) as src:
                    while chunk := src.read(_CHUNK):
                        h.update(chunk)
                        n += len(chunk)
                        out.write(chunk)
                if (n, h.hexdigest()) != (part[1] - part[0], part[2]):
                    progress(
                        f"checkpoint: {name}: the store's part at byte {part[0]:,} does not match its "
                        "name; the log kept ends before it"
                    )
                    out.seek(part[0])
                    out.truncate()
                    break
        os.replace(tmp, dest)


class Mirror:
    """The store's copy (``run_url``) of one growing file of a build's local run (``local``)."""

    def __init__(self, run_url: str, local: Path):
        self.url, self.local = storage.join(run_url, PARTS, local.name), local
        self.parts: list[Part] | None = None  # the store's parts from byte 0, once compared with the file

    def sync(self) -> int:
        """Upload the whole lines written since the last call (the first: since what the store holds
        of the file). The bytes uploaded."""
        if not self.local.is_file():
            return 0
        if self.parts is None:
            self.parts = self._compare()
        start = self.parts[-1][1] if self.parts else 0
        with self.local.open("rb") as f:
            f.seek(start)
            data = f.read()
        data = data[: data.rfind(b"\n") + 1]  # whole lines only: the last may be being written
        if not data:
            return 0
        part = (start, start + len(data), hashlib.sha256(data).hexdigest())
        storage.write_bytes(storage.join(self.url, part_name(part)), data)
        self.parts.append(part)
        return len(data)

    def _compare(self) -> list[Part]:
        """The store's parts that the local file starts with; the others are removed."""
        names = list(storage.listing(self.url))
        same: list[Part] = []
        with self.local.open("rb") as f:
            for start, end, digest in chain(names):
                h, left = hashlib.sha256(), end - start
                f.seek(start)
                while left and (chunk := f.read(min(left, _CHUNK))):
                    h.update(chunk)
                    left -= len(chunk)
                if left or h.hexdigest() != digest:
                    break
                same.append((start, end, digest))
        kept = {part_name(p) for p in same}
        for name in names:
            if _PART.fullmatch(name) and name not in kept:
                with contextlib.suppress(FileNotFoundError):
                    storage.remove(storage.join(self.url, name))
        return same
