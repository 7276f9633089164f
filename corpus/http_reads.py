"""An ``http(s)://`` input read to its end where its server answers a range request with the whole file.

fsspec reads an http(s) file a block (5 MB) a request, each a ``Range`` request. A server that takes no
``Range`` header (Python's ``http.server``, many dynamic endpoints) answers each with the whole file:
fsspec keeps the first block's start and refuses any later block ("The HTTP server doesn't appear to
support range requests"), so the corpus job on such a file over 5 MB failed as an internal error, and a
piece of a large file (read from its offset: :mod:`kolectra.corpus.piece_reader`) at its first read.
:class:`RangesOrWhole` goes on from there as one GET of the whole file, skipping what was read already
(or a piece's offset): the bytes are the same, a piece's cost is the file's bytes before it.

A read that fails in a way that may pass (a 503, a cut connection) is tried again from where it stopped,
and one that still fails, or will not pass (a 403 of a signed URL expired since the listing), raises
:class:`kolectra.corpus.read_failures.ReadFailed` naming what the server said (that module says why).
"""

from __future__ import annotations

import contextlib
from typing import IO

from kolectra.core import storage
from kolectra.corpus import checked_ranges, read_failures

# the streamed GET's bounds: aiohttp's session bound (300 s for a whole request) would cut a long file off
CONNECT_SECONDS = 30.0
READ_SECONDS = 300.0  # between two reads of the answer's bytes: a server that stopped sending
_SKIP = 1 << 20  # bytes a read while skipping to where the ranged reads stopped


def opened(path: str, waits: tuple[float, ...] | None = None, cache_type: str | None = None) -> IO[bytes]:
    """``path`` (a store URL) opened for reading; an http(s) URL's open (fsspec's HEAD, then a GET where that
    fails) tried again after each of ``waits`` (default :func:`read_failures.retry_waits`) where its failure may pass, then
    :class:`read_failures.ReadFailed`; another store's failure to open (a deleted object, access withdrawn)
    is one too, as its reads' are. ``cache_type``: :func:`storage.open_file`'s."""
    web = storage.scheme(path) in ("http", "https")
    waits = read_failures.retry_waits() if waits is None else waits
    attempt = 0
    while True:
        try:
            return storage.open_file(path, cache_type=cache_type)
        except Exception as e:  # noqa: BLE001 - sorted here: what may pass is tried again
            wait = read_failures.wait_before(e, attempt, waits) if web else None
            if wait is None:
                failed = read_failures.http_failure(path, e, attempt + 1) if web and read_failures.from_server(e) \
                    else read_failures.of(path, e)
                if failed is None:
                    raise
                raise failed from e
            read_failures.pause(path, e, attempt, wait, len(waits))
            attempt += 1


def ranged_or_whole(f: IO[bytes], path: str, skip_most: int | None = None,
                    waits: tuple[float, ...] | None = None) -> IO[bytes]:
    """``f`` as :class:`RangesOrWhole` where it is fsspec's HTTPFile (read in ranges), else as it is."""
    from fsspec.implementations.http import HTTPFile  # noqa: PLC0415 - only when a URL is read

    return RangesOrWhole(f, path, skip_most, waits) if isinstance(f, HTTPFile) else f


class RangesOrWhole:
    """``f`` (fsspec's HTTPFile of ``path``) read as it is, and, from a read the server answered with the
    whole file, one GET of it streamed from the same place (``skip_most``: refused where that place is byte
    ``skip_most`` or further in, so never where it is 0, as for a Parquet file, whose reader seeks back: a
    :class:`read_failures.ReadFailed` naming the server's answer). Seeking is ``f``'s until
    then. A read that fails in a way that may pass is tried again after each of ``waits`` (default
    :func:`read_failures.retry_waits`), from the byte it stopped at;
    then, or at once where it will not pass, :class:`read_failures.ReadFailed`. A range answered from another
    byte than asked (:mod:`kolectra.corpus.checked_ranges`) is read on as one GET too, or, where that is refused
    (``skip_most``), a ReadFailed."""

    def __init__(self, f: IO[bytes], path: str, skip_most: int | None = None,
                 waits: tuple[float, ...] | None = None):
        self._f, self._path, self._skip_most = f, path, skip_most
        checked_ranges.check(f)  # a 206 of other bytes than asked: never spliced in
        self._waits = read_failures.retry_waits() if waits is None else waits
        self._stream = None
        self._resume: int | None = None  # a streamed GET that failed: where the next try goes on from
        self._failures = 0  # failed tries since the last read that gave bytes

    def read(self, n: int = -1) -> bytes:
        out = b""
        while True:
            try:
                more = self._read(n - len(out) if n is not None and n > 0 else n)
            except read_failures.ReadFailed:
                raise
            except Exception as e:  # noqa: BLE001 - sorted by _failed: a failure that may pass is tried again
                self._failed(e)
                continue
            self._failures = 0
            out += more
            # a streamed read gives what has arrived: the caller asked for n
            if not more or n is None or n < 0 or len(out) >= n or not self._streaming:
                return out

    @property
    def _streaming(self) -> bool:
        return self._stream is not None or self._resume is not None

    def _read(self, n: int) -> bytes:
        if self._resume is not None:  # the GET that failed, again from where it stopped
            self._stream = self._whole(self._resume)
            self._resume = None
        if self._stream is None:
            try:
                return self._f.read(n)  # a failed range leaves f where it was: tried again, the same range
            except ValueError as e:
                misplaced = isinstance(e, checked_ranges.MisplacedRange)
                if not misplaced and checked_ranges.NO_RANGES not in str(e):
                    raise
                # ">=": a Parquet file (0) read from byte 0 (its footer, where the file is under 64 KiB) seeks back
                # next, which a stream cannot ("Cannot seek streaming HTTP file", said as the file's damage)
                if self._skip_most is not None and self._f.tell() >= self._skip_most:
                    # the server's doing, not the file's: a Parquet file's read was its damaged_file dead letter,
                    # "accept what could be read with --set max_damaged_files=1" (none of its rows)
                    said = (f"other bytes than asked ({e})" if misplaced else "the whole file (it takes no Range header)")
                    raise read_failures.ReadFailed(self._path, (
                        f"its server answers range requests with {said}, where the file is read in parts, not as one "
                        "GET (a Parquet file: its footer, at its end, then its row groups); download the file and name "
                        "the local copy in --input")) from e
                self._stream = self._whole(self._f.tell())
        return self._stream.read(n)

    def _failed(self, e: Exception) -> None:
        """After a read that failed with ``e``: wait before the next try (a streamed read: its GET opened
        again from the byte it stopped at, which it counted); or raise :class:`read_failures.ReadFailed`,
        or ``e`` itself where it is no server's failure (a bug)."""
        wait = read_failures.wait_before(e, self._failures, self._waits)
        if wait is None:
            if read_failures.from_server(e):
                raise read_failures.http_failure(self._path, e, self._failures + 1) from e
            raise e
        if self._stream is not None:
            stream, self._stream, self._resume = self._stream, None, self._stream.tell()
            with contextlib.suppress(Exception):
                stream.close()
        read_failures.pause(self._path, e, self._failures, wait, len(self._waits))
        self._failures += 1

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
        return self._streaming

    def seek(self, offset: int, whence: int = 0) -> int:
        if self._resume is not None:  # a failed GET's place, which its next try opens at
            if (offset, whence) in ((self._resume, 0), (0, 1)):
                return self._resume
            raise ValueError("Cannot seek streaming HTTP file")
        if self._stream is not None:
            return self._stream.seek(offset, whence)  # its own place only: a stream goes one way
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        if self._resume is not None:
            return self._resume
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
