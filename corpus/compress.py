"""Decompressing byte streams for the corpus reader, chosen by file extension.

Beam's own ``CompressedFile`` returns a short read on a truncated .gz and carries on, silently
losing the rest of the file; Python's ``gzip`` raises ``EOFError`` instead, and the stream reader
below (zstd, bzip2) checks that the last stream ended and that only streams follow one another
(handing out the streams before any garbage first). An empty file with a codec's extension is
damaged too (:class:`NotEmpty`). So the reader sees every damaged input and dead-letters it with
its name (``damaged_file``) rather than shrinking the corpus silently. Raw bytes come through
``corpus/input_reads.py``'s ``open_input`` (a local regular file, or a store URL), hashed on the way
(:func:`open_hashed`).
"""

from __future__ import annotations

import bz2
import gzip
from typing import IO, Any, Callable, Generator, Iterator

from kolectra.core import storage
from kolectra.corpus import suffixes
from kolectra.corpus.input_reads import HashingReader, open_input
from kolectra.corpus.inputs import is_remote

SUFFIXES = suffixes.COMPRESSED


def codec_of(path: str) -> str | None:
    name = suffixes.file_name(path)
    for suffix, codec in SUFFIXES.items():
        if name.endswith(suffix):
            return codec
    return None


# What one decompressor call may give, whatever the input: a piece of the stream is at most about
# this much, so a worker holds that (and a line), never a stream's whole output. A bzip2 call is
# asked for at most PIECE_BYTES (its max_length); zstd's decompressobj takes no limit, so it is fed
# ZSTD_STEP bytes at a time: a zstd block gives at most 128 KiB for 4 bytes (an RLE block), so 128
# bytes give at most 4 MiB. Fed a whole 64 KiB chunk, a few kB of .zst (a crashed writer's
# zero-filled tail) expanded to hundreds of MB at once, and what was left of it was copied at every
# read (measured: docs/corpus.md, "Compression").
PIECE_BYTES = 1 << 20
ZSTD_STEP = 128


class StreamReader:
    """Minimal ``read(n)`` over concatenated compressed streams (zstd frames, bzip2 streams, as
    pzstd and pbzip2 write them); raises ``EOFError`` on a stream cut off, and the codec's error
    on garbage after a stream (Python's ``bz2`` module drops that garbage silently, and with it
    every later stream whose header was damaged). What was decompressed before the damage comes
    out first. Memory: a piece of at most about :data:`PIECE_BYTES` at a time."""

    def __init__(self, raw: IO[bytes], new: Callable[[], Any], codec: str, chunk_bytes: int = 1 << 16):
        self._new, self._codec = new, codec
        self._raw = raw
        self._chunk = chunk_bytes
        self._pieces = self._decompressed()
        self._piece = b""  # the piece being read, from self._at on
        self._at = 0
        self._error: Exception | None = None  # raised again by any later read

    def _decompressed(self) -> Iterator[bytes]:
        """The decompressed bytes, in pieces of bounded size (some empty)."""
        dobj, started = self._new(), False  # started: bytes fed into the current stream
        while data := self._raw.read(self._chunk):
            while data:
                started = True
                data = yield from self._feed(dobj, data)  # what follows the stream's end, if it ended
                if dobj.eof:  # the next stream, if any, starts there
                    dobj, started = self._new(), False
        if started and not dobj.eof:
            raise EOFError(f"{self._codec} stream ended inside a frame (truncated file)")

    def _feed(self, dobj, data: bytes) -> Generator[bytes, None, bytes]:
        """``dobj``'s output for ``data``, in bounded pieces, until its stream ends; returns the bytes
        after that end (none if it did not end)."""
        if self._codec == "bz2":
            yield dobj.decompress(data, PIECE_BYTES)
            while not dobj.eof and not dobj.needs_input:
                yield dobj.decompress(b"", PIECE_BYTES)
            return dobj.unused_data if dobj.eof else b""
        for i in range(0, len(data), ZSTD_STEP):
            yield dobj.decompress(data[i:i + ZSTD_STEP])
            if dobj.eof:
                return dobj.unused_data + data[i + ZSTD_STEP:]
        return b""

    def read(self, n: int = -1) -> bytes:
        parts, size = [], 0
        while n < 0 or size < n:
            part = self.read1(-1 if n < 0 else n - size)
            if not part:
                break
            parts.append(part)
            size += len(part)
        return b"".join(parts)

    def read1(self, n: int = -1) -> bytes:
        """What is left of the current piece (up to ``n``), or of the next that holds a byte."""
        while self._at == len(self._piece):
            if self._error is not None:
                raise self._error
            try:
                piece = next(self._pieces, None)
            except Exception as e:  # ZstdError, OSError, EOFError: the damage, after what came before it
                self._error = e
                raise
            if piece is None:
                return b""
            self._piece, self._at = piece, 0
        end = len(self._piece) if n < 0 else min(len(self._piece), self._at + n)
        out = self._piece[self._at:end] if self._at or end < len(self._piece) else self._piece
        self._at = end
        return out

    def close(self) -> None:
        self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _zstd() -> Any:
    import zstandard  # noqa: PLC0415 - optional dependency; only needed for .zst inputs

    return zstandard.ZstdDecompressor().decompressobj()


def _open_raw(path: str) -> IO[bytes]:
    """The file's bytes as stored: a store URL through kolectra's storage layer (fsspec: the same
    credentials as the artifact store), a local path only if it is still a regular file (a FIFO
    would hang the worker: :func:`kolectra.corpus.input_reads.open_input`)."""
    return open_input(path)


def open_decompressed(path: str) -> IO[bytes]:
    """A binary stream of the file's content, decompressed by its extension."""
    return decompress(_open_raw(path), path)


def open_sample(path: str, block_size: int | None = None) -> IO[bytes]:
    """``path`` decompressed, for a check before a job that reads its start alone: a bucket's object without
    fsspec's read-ahead (s3fs fetched 50 MB with the first read, a small file whole), ``block_size`` bytes a
    request where given (a gzip stream is read 8 kB at a time: uncached, a GET each), else each read its own.
    An http(s) URL keeps its cache (5 MB): uncached, a server that takes no Range header fails the second read."""
    if is_remote(path) and storage.scheme(path) not in ("http", "https"):
        options = {"block_size": block_size} if block_size else {"cache_type": "none"}
        return decompress(storage.open_file(path, **options), path)
    return open_decompressed(path)


def open_hashed(path: str) -> tuple[HashingReader, IO[bytes]]:
    """``(raw, stream)``: the file's raw bytes, hashed and counted as they are read, and the
    decompressed stream over them (``raw.drain()`` hashes what the decompressor left)."""
    raw = HashingReader(_open_raw(path), path)
    return raw, decompress(raw, path)


def decompress(raw, path: str) -> IO[bytes]:
    """``raw`` decompressed by the extension of ``path``."""
    codec = codec_of(path)
    if codec is None:
        return raw
    raw = NotEmpty(raw, codec)
    if codec == "gzip":
        return Gzip(raw)
    if codec == "bz2":
        return StreamReader(raw, bz2.BZ2Decompressor, "bz2")
    return StreamReader(raw, _zstd, "zstd")


class Gzip(gzip.GzipFile):
    """A gzip stream that closes the file under it, as bz2's and zstd's readers here do: ``GzipFile`` leaves
    a ``fileobj`` it was given open, so every ``with open_decompressed(x.gz)`` (the field and text-share
    checks before a corpus job, the job's reads) and every corpus shard the vocab and examples jobs read
    (:func:`kolectra.corpus.examples_beam.read_lines`) left the file open until collected (``ResourceWarning:
    unclosed file``; a descriptor a file while the process ran)."""

    def __init__(self, raw: IO[bytes]):
        super().__init__(fileobj=raw, mode="rb")
        self._under = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._under.close()


class NotEmpty:
    """``raw`` that raises ``EOFError`` if it holds no byte at all. An empty file with a codec's
    extension is a file cut off before its header was written (``gzip -t``, ``bzip2 -t`` and
    ``zstd -t`` all fail on one); Python's gzip and the zstd reader would read it as empty text."""

    def __init__(self, raw: IO[bytes], codec: str):
        self._raw, self._codec, self._seen = raw, codec, False

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        if not self._seen and not data and n != 0:
            raise EOFError(f"the file is empty (0 bytes): not even a {self._codec} header")
        self._seen = True
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._raw.close()
