"""How many word types a corpus split holds, estimated before the word count from a sample of its
shards (Heaps' law), for the local runner's memory check.

Stage: corpus -> **vocab** -> examples. Beam's local runner holds the count's shuffle in the
launcher, about 0.6 kB for each distinct word type (docs/scale.md, "Vocabulary at 34 GB"). A line
in gzipped bytes, fitted on reviews (9,300 types a MB at 94 MB), said 0.4 GB for 11.7 MB of web-like
text of distinct words (85,000 types a MB) that took 0.8 GB. So the check also reads
:data:`SAMPLE_BYTES` of the shards, counts the word types of every other document of the sample
(half its words) and of all of them, and extrapolates with the exponent those two give (Heaps' law,
types = K x words^beta; beta clipped to [0.5, 1]: a sample's exponent is at least the corpus's, so
the estimate errs high). The sample is spread over the shards: the first lines of up to
:data:`SAMPLE_FILES` of them, evenly spaced from the first to the last, each its share of the bytes
by its size. The corpus stage writes documents in input order, so the first shard is the first
input's text: a corpus whose first input held distinct words (a table of codes, say) before reviews
was estimated from it alone, 2.1 times its types, and the line past it (linear at beta 1) refused
a local run that fits. The sample's types are the count's own (:func:`vocab.words.doc_words`:
text and morpheme cuts).
"""

from __future__ import annotations

import gzip
import json
import math
import zlib

from kolectra.corpus import input_reads, inputs
from kolectra.corpus.runners import input_bytes
from kolectra.vocab import words

SAMPLE_BYTES = 4 << 20  # decompressed shard bytes read (about 1 MB gzipped: 0.4-0.5 CPU s)
SAMPLE_FILES = 8  # shards sampled at most: on a store each costs a request (and fsspec's read-ahead)
BETA_RANGE = (0.5, 1.0)
READ_BYTES = 1 << 10  # a gzipped shard's bytes read at a time (its position: _SmallReads)


def estimate_types(paths: list[str], total_bytes: float, sample_bytes: int = SAMPLE_BYTES) -> int:
    """The word types of the shards ``paths`` (``total_bytes`` of them as listed): exact when the
    sample reads every shard to its end, else extrapolated from the sample by Heaps' law."""
    types, n_words, listed_read, half = _sample(paths, sample_bytes)
    if listed_read < 0 or listed_read >= total_bytes or not n_words:  # < 0: a shard could not be read
        return types
    return extrapolate(types, n_words, total_bytes / max(listed_read, 1), half)


def spread(paths: list[str], k: int = SAMPLE_FILES) -> list[str]:
    """Up to ``k`` of ``paths``, evenly spaced from the first to the last, in order."""
    if len(paths) <= k:
        return list(paths)
    return [paths[round(i * (len(paths) - 1) / (k - 1))] for i in range(k)]


def _sample(paths: list[str], sample_bytes: int) -> tuple[int, int, int, tuple[int, int]]:
    """(types, words, listed bytes read or -1 where a shard could not be read, (types, words) of
    every other document) of ``sample_bytes`` decompressed bytes of :func:`spread`'s shards, each
    its share by its listed size (a shard read to its end leaves the rest of its share to those
    after it). Lines that are not documents are skipped here: the count itself names them."""
    splitter = words.WordSplitter()
    seen: set = set()
    half_seen: set = set()
    n_words = half_words = read = listed = docs = 0
    picked = spread(paths)
    sizes = [max(input_bytes([p]), 1) for p in picked]
    for i, path in enumerate(picked):
        share = (sample_bytes - read) * sizes[i] / sum(sizes[i:])
        got = 0
        try:
            raw = input_reads.open_input(path)
            with raw, (gzip.GzipFile(fileobj=_SmallReads(raw), mode="rb") if path.endswith(".gz") else raw) as f:
                for line in f:
                    got += len(line)
                    try:
                        found, _ = words.doc_words(json.loads(line), splitter)
                    except Exception:  # noqa: BLE001 - any unreadable line: the count reports it
                        found = None
                    if found is not None:
                        docs += 1
                        n_words += len(found)
                        seen.update(found)
                        if docs % 2:
                            half_words += len(found)
                            half_seen.update(found)
                    if got >= share:
                        break
                listed += raw.tell() if got >= share else sizes[i]  # read to its end: all of it
        except (OSError, EOFError, zlib.error, inputs.InputError):
            return len(seen), n_words, -1, (len(half_seen), half_words)  # a damaged or vanished shard: the count names it
        read += got
    return len(seen), n_words, listed, (len(half_seen), half_words)


class _SmallReads:
    """A file read at most :data:`READ_BYTES` at a time, so its position is about the compressed bytes
    the sample used: gzip reads 128 kB ahead, which on 8 shares of 0.5 MB decompressed (about 150 kB
    gzipped each) counted up to twice the bytes read, the scale and the estimate half what they are
    (16 kB at a time: 19 % low on the test's 120 kB sample; 1 kB: 4.5 %)."""

    def __init__(self, raw):
        self.raw = raw

    def read(self, size: int = -1) -> bytes:
        return self.raw.read(READ_BYTES if size < 0 else min(size, READ_BYTES))

    def tell(self) -> int:
        return self.raw.tell()


def extrapolate(types: int, n_words: int, scale: float, half: tuple[int, int]) -> int:
    """Heaps' law from ``half`` (types, words) and (``types``, ``n_words``) to ``scale`` times the
    words; never more types than words."""
    half_types, half_words = half
    if half_types and half_words < n_words:
        beta = math.log(types / half_types) / math.log(n_words / half_words)
    else:
        beta = BETA_RANGE[1]
    beta = min(max(beta, BETA_RANGE[0]), BETA_RANGE[1])
    return int(min(types * scale ** beta, n_words * scale))
