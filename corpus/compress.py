"""Decompressing byte streams for the corpus reader, chosen by file extension.

Beam's own ``CompressedFile`` returns a short read on a truncated .gz and carries on, silently
losing the rest of the file; Python's ``gzip``/``bz2`` raise ``EOFError`` instead, and the zstd
wrapper below checks that the last frame ended. So a damaged input fails the job with its name
rather than shrinking the corpus. Raw bytes still come through ``FileSystems`` (local, gs://...).
"""

from __future__ import annotations

import bz2
import gzip
from typing import IO

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

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

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            data = self._raw.read(self._chunk)
            if not data:
                if self._started and not self._dobj.eof:
                    raise EOFError("zstd stream ended inside a frame (truncated file)")
                break
            while data:
                self._started = True
                self._buf += self._dobj.decompress(data)
                data = b""
                if self._dobj.eof:  # next frame, if any, starts in unused_data
                    data = self._dobj.unused_data
                    self._dobj = self._new()
                    self._started = False
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
    raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    codec = codec_of(path)
    if codec == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if codec == "bz2":
        return bz2.BZ2File(raw, mode="rb")
    if codec == "zstd":
        return ZstdReader(raw)
    return raw
