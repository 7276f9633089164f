"""An ``http(s)://`` input read to its end where its server answers a range request with the whole file.

fsspec reads an http(s) file a block (5 MB) a request, each a ``Range`` request. A server that takes no
``Range`` header (Python's ``http.server``, many dynamic endpoints) answers each with the whole file:
fsspec keeps the first block's start and refuses any later block ("The HTTP server doesn't appear to
support range requests"), so the corpus job on such a file over 5 MB failed as an internal error, and a
piece of a large file (read from its offset: :mod:`kolectra.corpus.piece_reader`) at its first read.
:class:`RangesOrWhole` goes on from there as one GET of the whole file, skipping what was read already
(or a piece's offset): the bytes are the same, a piece's cost is the file's bytes before it.
"""

from __future__ import annotations

from typing import IO

# what fsspec's HTTPFile raises where the server answered a range request with the whole file
_NO_RANGES = "support range requests"
# the streamed GET's bounds: aiohttp's session bound (300 s for a whole request) would cut a long file off
CONNECT_SECONDS = 30.0
READ_SECONDS = 300.0  # between two reads of the answer's bytes: a server that stopped sending
_SKIP = 1 << 20  # bytes a read while skipping to where the ranged reads stopped


def ranged_or_whole(f: IO[bytes], path: str, skip_most: int | None = None) -> IO[bytes]:
    """``f`` as :class:`RangesOrWhole` where it is fsspec's HTTPFile (read in ranges), else as it is."""
    from fsspec.implementations.http import HTTPFile  # noqa: PLC0415 - only when a URL is read

    return RangesOrWhole(f, path, skip_most) if isinstance(f, HTTPFile) else f


class RangesOrWhole:
    """``f`` (fsspec's HTTPFile of ``path``) read as it is, and, from a read the server answered with the
    whole file, one GET of it streamed from the same place (``skip_most``: refused where that place is
    further in: a ValueError). Seeking is ``f``'s until then."""

    def __init__(self, f: IO[bytes], path: str, skip_most: int | None = None):
        self._f, self._path, self._skip_most = f, path, skip_most
        self._stream = None

    def read(self, n: int = -1) -> bytes:
        if self._stream is None:
            try:
                return self._f.read(n)
            except ValueError as e:
                if _NO_RANGES not in str(e) or (self._skip_most is not None and self._f.tell() > self._skip_most):
                    raise
                self._stream = self._whole(self._f.tell())
        out = self._stream.read(n)
        if n is not None and n > 0:  # a streamed read gives what has arrived: the caller asked for n
            while len(out) < n and (more := self._stream.read(n - len(out))):
                out += more
        return out

    def _whole(self, at: int):
        """The file as one streamed GET, its first ``at`` bytes read and dropped."""
        import aiohttp  # noqa: PLC0415 - fsspec's HTTP client

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_SECONDS, sock_read=READ_SECONDS)
        stream = self._f.fs.open(self._f.path, block_size=0, size=self._f.size, timeout=timeout)
        try:
            while at > 0:
                if not (skipped := stream.read(min(at, _SKIP))):
                    raise EOFError(f"{self._path}: the server's whole answer ended before byte {at:,}")
                at -= len(skipped)
        except BaseException:
            stream.close()
            raise
        return stream

    @property
    def whole(self) -> bool:
        """Whether the server answered a range with the whole file, and this reads it as one GET."""
        return self._stream is not None

    def seek(self, offset: int, whence: int = 0) -> int:
        if self._stream is not None:
            return self._stream.seek(offset, whence)  # its own place only: a stream goes one way
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell() if self._stream is not None else self._f.tell()

    def readable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return self._f.closed

    def close(self) -> None:
        try:
            if self._stream is not None:
                self._stream.close()
        finally:
            self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
