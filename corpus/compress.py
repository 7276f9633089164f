"""Decompressing byte streams for the corpus reader, chosen by file extension.

Beam's own ``CompressedFile`` returns a short read on a truncated .gz and carries on, silently
losing the rest of the file; Python's ``gzip`` raises ``EOFError`` instead, and the stream reader
below (zstd, bzip2) checks that the last stream ended and that only streams follow one another
(handing out the streams before any garbage first). An empty file with a codec's extension is
damaged too (:class:`NotEmpty`). So the reader sees every damaged input and dead-letters it with
its name (``damaged_file``) rather than shrinking the corpus silently. Raw bytes come through
``corpus/inputs.py``'s ``open_input`` (a local regular file, or a store URL), hashed on the way
(:func:`open_hashed`).
"""

from __future__ import annotations

import bz2
import gzip
from typing import IO, Any, Callable

from kolectra.corpus.inputs import HashingReader, open_input

SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}


def codec_of(path: str) -> str | None:
    name = path.lower()
    for suffix, codec in SUFFIXES.items():
        if name.endswith(suffix):
            return codec
    return None


class StreamReader:
    """Minimal ``read(n)`` over concatenated compressed streams (zstd frames, bzip2 streams, as
    pzstd and pbzip2 write them); raises ``EOFError`` on a stream cut off, and the codec's error
    on garbage after a stream (Python's ``bz2`` module drops that garbage silently, and with it
    every later stream whose header was damaged). The streams before the damage come out first."""

    def __init__(self, raw: IO[bytes], new: Callable[[], Any], codec: str, chunk_bytes: int = 1 << 16):
        self._new, self._codec = new, codec
        self._raw = raw
        self._dobj = self._new()
        self._buf = b""
        self._chunk = chunk_bytes
        self._started = False  # bytes fed into the current stream
        self._error: Exception | None = None  # met after good streams of the same chunk: raised next

    def _fill(self) -> bool:
        """Decompress one raw chunk into the buffer; False at the end of the input."""
        if self._error is not None:
            raise self._error
        data = self._raw.read(self._chunk)
        if not data:
            if self._started and not self._dobj.eof:
                raise EOFError(f"{self._codec} stream ended inside a frame (truncated file)")
            return False
        while data:
            self._started = True
            try:
                self._buf += self._dobj.decompress(data)
            except Exception as e:  # ZstdError, OSError: garbage after (or inside) a stream
                if not self._buf:
                    raise
                self._error = e  # the streams before it are handed out first
                return True
            data = b""
            if self._dobj.eof:  # next stream, if any, starts in unused_data
                data = self._dobj.unused_data
                self._dobj = self._new()
                self._started = False
        return True

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self._buf) < n) and self._fill():
            pass
        return self._take(n)

    def read1(self, n: int = -1) -> bytes:
        """What one raw chunk gives (or the buffer holds): the bytes before a damaged spot come out."""
        while not self._buf and self._fill():
            pass
        return self._take(n)

    def _take(self, n: int) -> bytes:
        if n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
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
    would hang the worker: :func:`kolectra.corpus.inputs.open_input`)."""
    return open_input(path)


def open_decompressed(path: str) -> IO[bytes]:
    """A binary stream of the file's content, decompressed by its extension."""
    return decompress(_open_raw(path), path)


def open_hashed(path: str) -> tuple[HashingReader, IO[bytes]]:
    """``(raw, stream)``: the file's raw bytes, hashed and counted as they are read, and the
    decompressed stream over them (``raw.drain()`` hashes what the decompressor left)."""
    raw = HashingReader(_open_raw(path))
    return raw, decompress(raw, path)


def decompress(raw, path: str) -> IO[bytes]:
    """``raw`` decompressed by the extension of ``path``."""
    codec = codec_of(path)
    if codec is None:
        return raw
    raw = NotEmpty(raw, codec)
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if codec == "bz2":
        return StreamReader(raw, bz2.BZ2Decompressor, "bz2")
    return StreamReader(raw, _zstd, "zstd")


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
