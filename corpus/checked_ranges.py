"""An http(s) input's ranged reads checked for the bytes they were answered with.

fsspec's HTTPFile reads a block a ``Range`` request and takes any ``206 Partial Content`` as the block
asked for, whatever its ``Content-Range`` says: a server or cache in front of it that answers another
range (a block aligned to its own chunks, the range of another request) had those bytes spliced into the
file at the place asked, and the corpus held text no file holds, with no error (the read's size matched
its listing). :func:`check` has the file's blocks fetched by :func:`_fetch` instead: a ``206`` whose range
starts at another byte raises :class:`MisplacedRange`, which :class:`kolectra.corpus.http_reads.RangesOrWhole`
meets as it meets a server that takes no range (the file read on as one GET, the bytes before skipped),
or names in one line where that is refused. A ``200`` is the whole file, whatever ``Content-Range`` it carries
(taken for a range where it started at the byte asked, as fsspec takes it, its whole body was returned: a read
of 5 bytes gave the whole file, held in memory), and no answer gives more bytes than asked. Anything else is
answered as fsspec's own fetch answers it.

Each range is asked for uncompressed (``Accept-Encoding: identity``, as fsspec's HEAD asks for the size). aiohttp
asks for gzip by default, and a server that compresses as it sends (Apache's mod_deflate on text/plain) cuts the
range from the compressed bytes, which aiohttp then decoded as if whole: the file's second block failed ("Can not
decode content-encoding: gzip", read as a server's passing failure: "run the same command again"). A ``206``
compressed all the same is :class:`EncodedRange`, met as a misplaced range (the whole file, decoded, as one GET).
"""

from __future__ import annotations

import re

# the words of the ValueError of an answer that is the whole file (status 200) to a range from a later byte:
# fsspec's own error says them too, and http_reads tells that failure by them
NO_RANGES = "support range requests"
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", re.IGNORECASE)


class MisplacedRange(ValueError):
    """A ``206`` answer whose ``Content-Range`` starts at another byte than the range asked for."""

    def __init__(self, asked: int, said: str):
        self.asked, self.said = asked, said
        super().__init__(f"asked for the bytes from {asked:,}, the server answered 206 with Content-Range: {said}")

    def __reduce__(self):
        return type(self), (self.asked, self.said)


class EncodedRange(MisplacedRange):
    """A ``206`` answer compressed in transit (``Content-Encoding``) though asked for as ``identity``: its bytes are
    a range of the compressed file, which no decoder can take up from the middle."""

    def __init__(self, asked: int, said: str):
        ValueError.__init__(self, f"asked for the bytes from {asked:,} uncompressed, the server answered 206 "
                                  f"compressed (Content-Encoding: {said}), a range of its compressed bytes")
        self.asked, self.said = asked, said


def first_byte(content_range: str | None) -> int | None:
    """The first byte a ``Content-Range`` header (``bytes 100-199/1000``) says its answer holds, or None."""
    m = _CONTENT_RANGE.fullmatch((content_range or "").strip())
    return int(m[1]) if m else None


def check(f) -> None:
    """Have ``f`` (fsspec's HTTPFile) fetch its blocks through :func:`_fetch` (its cache calls the fetcher
    it was made with: set there)."""
    import fsspec.asyn  # noqa: PLC0415 - only when a URL is read

    cache = getattr(f, "cache", None)
    if cache is not None and getattr(cache, "fetcher", None) is not None:
        cache.fetcher = lambda start, end: fsspec.asyn.sync(f.loop, _fetch, f, start, end)


async def _fetch(f, start: int, end: int) -> bytes:
    """The bytes ``[start, end)`` of ``f``'s URL, from one ``Range`` request: a ``206`` only where it starts at
    ``start``; the whole file's answer (``200``, whatever its ``Content-Range``) for a range from its first byte;
    a ValueError naming :data:`NO_RANGES` for a later one; each cut to the range, nothing past the end."""
    kwargs = dict(f.kwargs)
    headers = {**(kwargs.pop("headers", None) or {}), "Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}
    r = await f.session.get(f.fs.encode_url(f.url), headers=headers, **kwargs)
    async with r:
        if r.status == 416:  # the range is past the end
            return b""
        r.raise_for_status()
        if r.status == 206:
            if (coded := r.headers.get("Content-Encoding", "identity").strip().lower()) not in ("", "identity"):
                raise EncodedRange(start, coded)  # before aiohttp decodes it (it would fail, or splice)
            said = r.headers.get("Content-Range")
            if said is not None and first_byte(said) != start:  # "bytes */1000" (no range) too
                raise MisplacedRange(start, said)
        elif start > 0:
            raise ValueError(f"the server answered a range from byte {start:,} with the whole file: it does not "
                             f"{NO_RANGES}")
        got, wanted = [], end - start  # a cache's larger block from the byte asked, or the whole file: cut
        while wanted > 0 and (chunk := await r.content.read(min(wanted, 1 << 20))):
            got.append(chunk)
            wanted -= len(chunk)
        return b"".join(got)
