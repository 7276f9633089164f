"""A large compressed input file, decompressed once and written again as pieces that other workers
can read (``corpus/pieces.py`` plans the other kinds of file; this is its plan for gzip, bzip2 and
zstd files of lines).

A compressed stream cannot be entered in the middle, so :func:`spill` reads it once, in order,
as the whole-file read would (the same decompressor, its SHA-256 and size over the raw bytes), and
writes the decompressed lines to zstd files of about ``split_bytes`` each, cut where a line starts
(a blank line in ``blocks``: ``pieces.cuts``). Each copy is then one work item, read from its first
line (numbered as in the file) to its last. The pass costs a small share of what reading and
cleaning the file in one worker did, and the copies take part of the text's size where the job's
scratch is (a local folder, or the job's folder on the store for remote workers) until the job
ends (figures: docs/corpus.md, "Large input files").

Any error while reading (a truncated or corrupted archive) discards the copies and raises: the
file is then read whole, which dead-letters it at the spot as it always has.
"""

from __future__ import annotations

import os
from typing import Iterator

import zstandard

from kolectra.core import storage
from kolectra.corpus import compress, inputs
from kolectra.corpus.progress import WorkerCounts

READ = 4 << 20  # decompressed bytes asked for at a time
LEVEL = 1  # zstd: fast; the copies live only as long as the job
KEEP = 8 << 10  # bytes held back from the copy while a cut may still fall in them (pieces.BLANK_MAX + 2 and more)


class _Copies:
    """The copies being written: the current one, its start and first line, the finished ones."""

    def __init__(self, directory: str, stem: str):
        self.directory, self.stem = directory, stem
        if not storage.is_url(directory):
            os.makedirs(directory, exist_ok=True)
        self.done: list[tuple[int, int, int, str]] = []  # (start, end, first line, path)
        self.offset = 0  # decompressed bytes written
        self._open(0, 1)

    def _open(self, start: int, line: int) -> None:
        self.start, self.line = start, line
        self.path = storage.join(self.directory, f"{self.stem}-{len(self.done):05d}.zst")
        self.writer = zstandard.ZstdCompressor(level=LEVEL).stream_writer(storage.open_file(self.path, "wb"))

    def write(self, data) -> None:
        self.writer.write(data)
        self.offset += len(data)

    def cut(self, line: int) -> None:
        """End the current copy here; the next starts with line ``line``."""
        self._close()
        self._open(self.offset, line)

    def _close(self) -> None:
        self.writer.close()
        if self.offset > self.start:  # a cut at the very end starts nothing
            self.done.append((self.start, self.offset, self.line, self.path))
        else:
            storage.remove(self.path)

    def finish(self) -> list[tuple[int, int, int, str]]:
        self._close()
        return self.done

    def discard(self) -> None:
        try:
            self.writer.close()
        finally:
            for path in [*(p for *_, p in self.done), self.path]:
                storage.remove(path)


def spill(listed: inputs.InputFile, cuts, directory: str, stem: str,
          counts: WorkerCounts | None = None) -> tuple[dict, list[tuple[int, int, int, str]]]:
    """Read ``listed`` (compressed) once and write its lines as copies under ``directory`` named
    ``stem-NNNNN.zst``, cut where ``cuts`` (a function of the decompressed chunks, as
    ``functools.partial(pieces.cuts, every=..., blocks=...)``) says: the file's
    ``{"bytes", "sha256"}`` (and ``identity`` where the store pinned the read) and each copy's
    ``(start, end, first line, path)`` (offsets in the decompressed text). The raw bytes read go
    to ``counts`` as ``bytes`` (the read's progress: the copies' reads count none)."""
    raw, stream = compress.open_hashed(listed.where)
    read = stream.read  # whole chunks (read1 gives a decompressor's buffer at a time: 10-60 kB); a damaged file is read whole anyway
    pending = bytearray()  # decompressed bytes not yet in a copy: from copies.offset on
    copies = _Copies(directory, stem)

    def chunks() -> Iterator[bytes]:
        while True:
            # asked for more: no cut falls in what was seen but its last KEEP bytes (pieces.cuts)
            if len(pending) > KEEP:
                copies.write(pending[:-KEEP])
                del pending[:-KEEP]
            before = raw.bytes
            chunk = read(READ)
            if counts is not None:
                counts.add(bytes=raw.bytes - before)
            if not chunk:
                return
            pending.extend(chunk)
            yield chunk

    try:
        with raw, stream:
            for offset, line in cuts(chunks()):
                take = offset - copies.offset
                if take < 0:  # never (KEEP holds back more than a cut can reach back), but not silently
                    raise RuntimeError(f"a cut at {offset} falls in bytes already copied ({copies.offset})")
                copies.write(pending[:take])
                del pending[:take]
                copies.cut(line)
            copies.write(pending)
            raw.drain()
            digest = {"bytes": raw.bytes, "sha256": raw.sha256.hexdigest()}
            if (pinned := raw.pinned_identity(listed.path)) is not None:
                digest["identity"] = pinned
        return digest, copies.finish()
    except BaseException:
        copies.discard()
        raise
