"""An artifact's raw-input records (the manifest's ``inputs``): in the manifest, or past
:data:`INPUTS_INLINE` in a file of the artifact.

A corpus request has one record per input file (path, bytes, identity, sha256: ``corpus/inputs.py``),
about 320 bytes each as the manifest's indented JSON, and every child stage reads the manifest with
one read of at most ``MAX_MANIFEST`` (64 MiB): inline, a manifest would grow with the corpus and be
refused past about 210,000 files (docs/scale.md). So:

- up to :data:`INPUTS_INLINE` records the manifest holds them all under ``inputs``, byte for byte as
  it always has;
- past it the store writes them to :data:`INPUTS_FILE` in the artifact, one JSON object a line in
  the request's order, before the directory is hashed: ``files`` lists it, so ``digest`` covers it and
  ``verify`` re-hashes it as any file. The manifest keeps the first :data:`INPUTS_HEAD` under
  ``inputs`` (what ``show`` and the lineage print), their number ``inputs_count`` and ``inputs_file``
  (the file's path, bytes and sha256, so ``fields_digest`` covers the list as it did inline).

Readers take :func:`shown` (the records the manifest holds, and how many there are in all) or
:func:`records` (every record, streamed from the file a line at a time, never held as a list).
The request id never depended on where the records are kept (``Request.id``).

A request's records may be a sequence or a :class:`RecordFile`: kept in a temporary file here,
read back a line at a time as often as asked, so that the launcher of a corpus of a million input
files holds a buffer of them, not every one (docs/scale.md, "the job's graph and the launcher");
the id, the manifest and :data:`INPUTS_FILE` are the same bytes either way.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import itertools
import json
import os
import pickle
import weakref
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator

from kolectra.core import scratch
from kolectra.pipeline.store.manifest import ArtifactError, write_whole

INPUTS_INLINE = 10_000  # records a manifest holds itself: 3 MB of it (docs/scale.md)
INPUTS_HEAD = 20  # records it keeps past that, for `kolectra artifacts show` and the lineage
INPUTS_FILE = "inputs.jsonl"  # the store's file, beside the stage's (a stage may not write one)


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # one encoder, not one a line
_BLOCK = 1 << 16  # bytes of lines handed to the artifact's file (and hashed) at a time
BATCH = 1024  # records a RecordFile pickles together: what it holds while read (about 0.5 MB)


def spills(inputs: Collection[dict]) -> bool:
    """Whether a request's records go to :data:`INPUTS_FILE` rather than into the manifest."""
    return len(inputs) > INPUTS_INLINE


def line(record: dict) -> bytes:
    return (_ENCODE(record) + "\n").encode()


def head(inputs: Iterable[dict], n: int) -> list[dict]:
    """The first ``n`` records (a :class:`RecordFile`'s read stops there and its file is closed)."""
    it = iter(inputs)
    try:
        return list(itertools.islice(it, n))
    finally:
        getattr(it, "close", bool)()


def write(inputs: Collection[dict], directory: Path) -> dict:
    """Write the records to ``directory / INPUTS_FILE`` (a line each, flushed to disk, renamed into
    place) and return its file entry: path, bytes and sha256 (of the bytes written, not read back)."""
    return {"path": INPUTS_FILE, **write_whole(Path(directory) / INPUTS_FILE, _blocks(map(line, inputs)))}


def fields(inputs: Collection[dict], files: list[dict]) -> dict:
    """The manifest's input fields: every record, or past :data:`INPUTS_INLINE` the first
    :data:`INPUTS_HEAD`, their count and :data:`INPUTS_FILE`'s entry in ``files``."""
    if not spills(inputs):
        return {"inputs": list(inputs)}
    entry = next((e for e in files if e["path"] == INPUTS_FILE), None)
    if entry is None:
        raise ArtifactError(f"{len(inputs):,} input records and no {INPUTS_FILE} among the files to seal")
    return {"inputs": head(inputs, INPUTS_HEAD), "inputs_count": len(inputs),
            "inputs_file": {k: entry[k] for k in ("path", "bytes", "sha256")}}


def _blocks(lines: Iterable[bytes]) -> Iterator[bytes]:
    """``lines`` joined into blocks of about :data:`_BLOCK` bytes (the same bytes, fewer calls)."""
    block, size = [], 0
    for data in lines:
        block.append(data)
        size += len(data)
        if size >= _BLOCK:
            yield b"".join(block)
            block, size = [], 0
    if block:
        yield b"".join(block)


class RecordFile:
    """A request's records kept in a temporary file of this machine, read back :data:`BATCH` at a
    time each time it is iterated: what a corpus launcher holds of its records is a batch, not one
    dict a file (with the listing, about 660 bytes a file: 0.7 GB at a million files). Sized and
    iterable as the tuple it replaces, so ``Request`` takes either.

    The file is this process's own (``mkstemp``: 0600), so it holds pickled lists of records,
    gzipped (level 1: a temporary folder may be memory, tmpfs): read back at about 1 us a record,
    where parsing JSON lines took 5-12. :meth:`rewrite` replaces the records (the sha256s the job
    read, filled in after it) with ones made from the old, read while the new are written. The
    file is removed by :meth:`close` (or ``with``), else when the object is collected or the
    process exits."""

    def __init__(self, records: Iterable[dict], folder: str | None = None):
        fd, self.path = scratch.mkstemp("records", suffix=".pickle.gz", dir=folder)
        os.close(fd)
        self._removal = weakref.finalize(self, _remove, self.path)
        try:
            self._count = self._write(self.path, records)
        except BaseException:  # the listing refused an input, a Ctrl-C: nothing left behind
            self._removal()
            raise

    @staticmethod
    def _write(path: str, records: Iterable[dict]) -> int:
        count, it = 0, iter(records)
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as out:
            while batch := list(itertools.islice(it, BATCH)):
                pickle.dump(batch, out, protocol=pickle.HIGHEST_PROTOCOL)
                count += len(batch)
        return count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[dict]:
        with gzip.open(self.path, "rb") as f:
            while True:
                try:
                    batch = pickle.load(f)
                except EOFError:
                    return
                yield from batch

    def rewrite(self, records: Iterable[dict]) -> None:
        """Replace the records with ``records`` (which may read these: written to another file,
        then renamed over this one); the count must stay the same."""
        part = self.path + ".part"
        try:
            count = self._write(part, records)
            if count != self._count:
                raise ValueError(f"{count:,} records where there were {self._count:,}")
            os.replace(part, self.path)
        finally:
            _remove(part)

    def close(self) -> None:
        self._removal()

    def __enter__(self) -> RecordFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def shown(manifest: dict) -> tuple[list[dict], int]:
    """The records the manifest holds (all of them, or the first :data:`INPUTS_HEAD`) and how many
    the artifact has in all."""
    inline = manifest.get("inputs", [])
    return inline, manifest.get("inputs_count", len(inline))


def records(path: Any, manifest: dict) -> Iterator[dict]:
    """Every input record of the artifact at ``path`` (a directory or a store prefix), in order: the
    manifest's, or :data:`INPUTS_FILE`'s read a line at a time. The file is hashed as it is read: one
    that no longer matches the manifest (its sha256 or its count) ends the read with ArtifactError."""
    spec = manifest.get("inputs_file")
    if spec is None:
        yield from manifest.get("inputs", [])
        return
    where, h, count = path / spec["path"], hashlib.sha256(), 0
    with where.open("rb") as f:
        for count, data in enumerate(f, 1):
            h.update(data)
            try:
                record = json.loads(data)
            except (json.JSONDecodeError, UnicodeDecodeError):
                record = None
            if not (isinstance(record, dict) and isinstance(record.get("path"), str)):
                raise ArtifactError(f"{where}: line {count} is not an input record")
            yield record
    if h.hexdigest() != spec["sha256"] or count != manifest["inputs_count"]:
        raise ArtifactError(f"{where}: changed since it was published ({count:,} records read, sha256 "
                            f"{h.hexdigest()[:12]}; the manifest says {manifest['inputs_count']:,}, {spec['sha256'][:12]})")
