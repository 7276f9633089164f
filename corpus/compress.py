"""Decompressing byte streams for the corpus reader, chosen by file extension.

Beam's own ``CompressedFile`` returns a short read on a truncated .gz and carries on, silently
losing the rest of the file; Python's ``gzip``/``bz2`` raise ``EOFError`` instead, and the zstd
wrapper below checks that the last frame ended. So the reader sees every damaged input and
dead-letters it with its name (``damaged_file``) rather than shrinking the corpus silently. Raw
bytes still come through ``FileSystems`` (local, gs://...), hashed on the way
(:func:`open_hashed`).
"""

from __future__ import annotations

import bz2
import gzip
from typing import IO

from kolectra.corpus import runners as _runners  # noqa: F401  (first: quiets Beam's import-time logging)
from apache_beam.io.filesystem import CompressionTypes  # noqa: E402
from apache_beam.io.filesystems import FileSystems

from kolectra.corpus.inputs import HashingReader

SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".zst": "zstd", ".zstd": "zstd"}


def codec_of(path: str) -> str | None:
    name = path.lower()
    for suffix, codec in SUFFIXES.items():
        if name.endswith(suffix):
            return codec
    return None


class ZstdReader:
    """Minimal ``read(n)`` over concatenated zstd frames; raises ``EOFError`` on a cut-off frame."""

    def __init__(self, raw: IO[bytes], chunk_bytes: int = 1 << 16):
        import zstandard  # optional dependency; only needed for .zst inputs

        self._new = lambda: zstandard.ZstdDecompressor().decompressobj()
        self._raw = raw
        self._dobj = self._new()
        self._buf = b""
        self._chunk = chunk_bytes
        self._started = False  # bytes fed into the current frame

    def _fill(self) -> bool:
        """Decompress one raw chunk into the buffer; False at the end of the input."""
        data = self._raw.read(self._chunk)
        if not data:
            if self._started and not self._dobj.eof:
                raise EOFError("zstd stream ended inside a frame (truncated file)")
            return False
        while data:
            self._started = True
            self._buf += self._dobj.decompress(data)
            data = b""
            if self._dobj.eof:  # next frame, if any, starts in unused_data
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


def open_decompressed(path: str) -> IO[bytes]:
    """A binary stream of the file's content, decompressed by its extension."""
    return decompress(FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED), path)


def open_hashed(path: str) -> tuple[HashingReader, IO[bytes]]:
    """``(raw, stream)``: the file's raw bytes, hashed and counted as they are read, and the
    decompressed stream over them (``raw.drain()`` hashes what the decompressor left)."""
    raw = HashingReader(FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED))
    return raw, decompress(raw, path)


def decompress(raw, path: str) -> IO[bytes]:
    """``raw`` decompressed by the extension of ``path``."""
    codec = codec_of(path)
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if codec == "bz2":
        return bz2.BZ2File(raw, mode="rb")
    if codec == "zstd":
        return ZstdReader(raw)
    return raw
