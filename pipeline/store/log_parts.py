"""A growing file of a run kept in a store as parts: each checkpoint uploads only what was appended.

An object store cannot append to an object, and a pretraining run's ``metrics.jsonl`` grows by a line
every ``log_every`` steps. Uploaded whole at every checkpoint (as it was), a run sent O(lines) bytes a
save and O(lines x saves) in all: 4.4 MB a save at 1 M steps (``log_every`` 100). The store's copy of
a run keeps it instead as parts, ``RUN/parts/<name>/<start>-<end>-<sha256>`` (16-digit byte offsets):
bytes ``[start, end)`` of the file and their sha256. A checkpoint uploads one part, the whole lines
written since the last one (taking in some of the newest parts: below), before the checkpoint's
files (a kill in between leaves the log ahead of the newest checkpoint, which the trainer trims back
to it on resume, never behind it).

Read back (:func:`fetch`, ``--resume`` on a machine without the run) by concatenating the chain of
parts from byte 0 into the one local file every reader knows (health check, resume's trim, the
published artifact, its manifest, ``verify``, ``kolectra report``: none of them sees a part); each
part is checked against its name, and a gap, a missing part or one that does not match ends the chain
there (the log is then shorter, as a log cut by a kill is).

Parts are merged like a binary counter, so that their number stays logarithmic in the saves (one more
a save, never merged, was 1,000 GETs for a resume after 1,000 saves): a save's part takes in the
store's newest parts from the oldest one whose size is at most that of everything after it, the new
lines included (:func:`merge_from`). Then each part is larger than all the parts after it together,
so the sizes at least double from the newest back: at most ``1 + log2(file / newest part)`` parts
(saves of equal size: one per 1-bit of the save count, at most 10 up to 1,023 saves), and a byte is
sent again only when its part at least doubles, so at most ``log2(file / its first part)`` times (a
save sends ~6 times its new lines on average over 1,000 saves; the whole file at the 512th;
pretraining.md). The merged part is written before the parts it replaces are deleted, and those
deletes wait until the checkpoint's manifest is up (:meth:`Mirror.prune`): killed in between, the
store holds both; the chain takes the longer part at an offset (no line twice), and the resumed
run's first save keeps, at each offset, the longest part that its trimmed file still starts with,
so the replaced parts serve it if the merged one went past the checkpoint it resumed from.

A build's first upload compares the local file (trimmed back to the checkpoint it resumed from) with
the store's parts, reading each part's range of the local file once; the parts from the first offset
where none matches on are removed once the new part is up (a shorter part inside the kept ones waits
for :meth:`Mirror.prune`), and everything after the matching ones goes up (merged as above).
Only :data:`GROWING` names are kept this way, and only keys of the part form are read or removed (the
keys under a run are data: whoever may write the bucket wrote them).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
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


def parse(name: str) -> Part | None:
    """The part a key names (relative to ``RUN/parts/<name>/``), or None: not a part."""
    if (m := _PART.fullmatch(name)) and int(m[2]) > int(m[1]):
        return int(m[1]), int(m[2]), m[3]
    return None


def chain(names) -> list[Part]:
    """The parts among ``names`` (keys under ``RUN/parts/<name>/``) that follow one another from byte
    0; other keys are not parts and are ignored. Of two parts at one offset the longer one is taken."""
    starting: dict[int, list[Part]] = {}
    for part in filter(None, map(parse, names)):
        starting.setdefault(part[0], []).append(part)
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


def merge_from(sizes: list[int], new: int) -> int:
    """The index of the oldest part (of the chain's ``sizes``, oldest first) that a part of ``new``
    more bytes takes in: the first whose size is at most that of all after it, the new bytes included;
    ``len(sizes)`` for none. Kept so, each part is larger than all after it together."""
    first, after = len(sizes), new
    for i in range(len(sizes) - 1, -1, -1):
        if sizes[i] <= after:
            first = i
        after += sizes[i]
    return first


class Mirror:
    """The store's copy (``run_url``) of one growing file of a build's local run (``local``)."""

    def __init__(self, run_url: str, local: Path):
        self.url, self.local = storage.join(run_url, PARTS, local.name), local
        self.parts: list[Part] | None = None  # the store's parts from byte 0, once compared with the file
        self.replaced: list[Part] = []  # parts merged into a newer one, deleted by prune()
        self.stale: list[str] = []  # parts the local file does not start with, deleted once its part is up

    def sync(self) -> int:
        """Upload the whole lines written since the last call (the first: since what the store holds
        of the file), as one part with the newest parts that :func:`merge_from` takes in. The bytes
        uploaded."""
        if not self.local.is_file():
            return 0
        if self.parts is None:
            self.parts = self._compare()
        start = self.parts[-1][1] if self.parts else 0
        end = start
        with self.local.open("rb") as f:  # whole lines only: the last may be being written
            f.seek(start)
            at = start
            while chunk := f.read(_CHUNK):
                if (nl := chunk.rfind(b"\n")) >= 0:
                    end = at + nl + 1
                at += len(chunk)
        if end == start:
            self._drop_stale()
            return 0
        self._drop_stale(lambda p: p is None or p[0] >= end)  # the chain would join them after the new part
        first = merge_from([e - s for s, e, _ in self.parts], end - start)
        begin = self.parts[first][0] if first < len(self.parts) else start
        # through a local copy of the range: storage.upload streams it (one PUT, or a multipart upload
        # that leaves no object if cut short), so a merge of the whole log is never held in memory
        h = hashlib.sha256()
        with tempfile.NamedTemporaryFile(dir=self.local.parent.parent, prefix=f".{self.local.name}-") as tmp:
            with self.local.open("rb") as f:
                f.seek(begin)
                left = end - begin
                while left and (chunk := f.read(min(left, _CHUNK))):
                    h.update(chunk)
                    tmp.write(chunk)
                    left -= len(chunk)
            tmp.flush()
            part = (begin, end, h.hexdigest())
            storage.upload(tmp.name, storage.join(self.url, part_name(part)))
        self._drop_stale()  # after: the store's checkpoint may need their lines until this part holds them
        self.replaced += self.parts[first:]
        self.parts[first:] = [part]
        return end - begin

    def prune(self) -> None:
        """Delete the parts merged into newer ones (after the checkpoint that needs the newer ones is
        complete: a kill before leaves both, and a resume from the checkpoint before still finds its
        lines in the replaced parts). A part already gone (a gc, another machine's prune) is no error:
        :func:`storage.remove` takes gcsfs's FileNotFoundError as it takes S3's silence."""
        kept = {part_name(p) for p in self.parts or ()}
        for part in self.replaced:
            if (name := part_name(part)) not in kept:
                storage.remove(storage.join(self.url, name))
        self.replaced = []

    def _compare(self) -> list[Part]:
        """The store's parts that the local file starts with, from byte 0, at each offset the longest
        that matches. A shorter one inside them (replaced by a merge whose checkpoint may not be
        complete in the store: the store's checkpoint may need it) waits for :meth:`prune`; the
        others (past the file, or not its bytes) are removed by :meth:`sync` once its part is up
        (a merged part past a checkpoint older than the store's may hold lines that checkpoint needs)."""
        names = list(storage.listing(self.url))
        starting: dict[int, list[Part]] = {}
        for part in filter(None, map(parse, names)):
            starting.setdefault(part[0], []).append(part)
        size = self.local.stat().st_size
        same: list[Part] = []
        at = 0
        with self.local.open("rb") as f:
            while found := next((p for p in sorted(starting.get(at, ()), key=lambda p: (-p[1], p[2]))
                                 if p[1] <= size and self._matches(f, p)), None):
                same.append(found)
                at = found[1]
        kept, longest = {part_name(p) for p in same}, {s: e for s, e, _ in same}
        for name in names:
            if _PART.fullmatch(name) and name not in kept:
                if (p := parse(name)) and p[1] <= at and p[1] < longest.get(p[0], at + 1):
                    self.replaced.append(p)  # never in the chain (a longer kept part at its offset, or none)
                else:
                    self.stale.append(name)
        return same

    def _drop_stale(self, which=lambda part: True) -> None:
        """Remove the stale parts (:meth:`_compare`) that ``which`` picks (given the part, or None)."""
        for name in [n for n in self.stale if which(parse(n))]:
            storage.remove(storage.join(self.url, name))  # one already gone: no error, as in prune()
            self.stale.remove(name)

    @staticmethod
    def _matches(f, part: Part) -> bool:
        start, end, digest = part
        h, left = hashlib.sha256(), end - start
        f.seek(start)
        while left and (chunk := f.read(min(left, _CHUNK))):
            h.update(chunk)
            left -= len(chunk)
        return not left and h.hexdigest() == digest
