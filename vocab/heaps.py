"""How many word types a corpus split holds, estimated before the word count from a sample of its
shards (Heaps' law), for the local runner's memory check.

Stage: corpus -> **vocab** -> examples. Beam's local runner holds the count's shuffle in the
launcher, about 0.6 kB for each distinct word type (docs/scale.md, "Vocabulary at 34 GB"). A line
in gzipped bytes, fitted on reviews (9,300 types a MB at 94 MB), said 0.4 GB for 11.7 MB of web-like
text of distinct words (85,000 types a MB) that took 0.8 GB. So the check also reads the first
:data:`SAMPLE_BYTES` of the shards, counts the word types at half the sample's words and at all of
them, and extrapolates with the exponent those two give (Heaps' law, types = K x words^beta; beta
clipped to [0.5, 1]: a sample's exponent is at least the corpus's, so the estimate errs high). The
sample's types are the count's own (:func:`vocab.words.doc_words`: text and morpheme cuts).
"""

from __future__ import annotations

import gzip
import json
import math
import zlib

from kolectra.corpus import inputs
from kolectra.vocab import words

SAMPLE_BYTES = 4 << 20  # decompressed shard bytes read (about 1 MB gzipped: 0.4-0.5 CPU s)
SAMPLE_FILES = 64  # at most: a corpus of many small shards on a store costs a request each
BETA_RANGE = (0.5, 1.0)


def estimate_types(paths: list[str], total_bytes: float, sample_bytes: int = SAMPLE_BYTES) -> int:
    """The word types of the shards ``paths`` (``total_bytes`` of them as listed): exact when the
    sample reaches their end, else extrapolated from the sample by Heaps' law."""
    types, n_words, listed_read, half = _sample(paths, sample_bytes)
    if listed_read < 0 or listed_read >= total_bytes or not n_words:  # < 0: a shard could not be read
        return types
    return extrapolate(types, n_words, total_bytes / max(listed_read, 1), half)


def _sample(paths: list[str], sample_bytes: int) -> tuple[int, int, int, tuple[int, int]]:
    """(types, words, listed bytes read or -1 where a shard could not be read, (types, words) at
    half the sample) of the first ``sample_bytes`` decompressed bytes of ``paths``. Lines that are
    not documents are skipped here: the count itself names them."""
    splitter = words.WordSplitter()
    seen: set = set()
    n_words = read = listed = 0
    half = (0, 0)
    for path in paths[:SAMPLE_FILES]:
        try:
            raw = inputs.open_input(path)
            with raw, (gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw) as f:
                for line in f:
                    read += len(line)
                    try:
                        found, _ = words.doc_words(json.loads(line), splitter)
                    except Exception:  # noqa: BLE001, S112 - any unreadable line: the count reports it
                        continue
                    n_words += len(found)
                    seen.update(found)
                    if not half[1] and read >= sample_bytes // 2:
                        half = (len(seen), n_words)
                    if read >= sample_bytes:
                        return len(seen), n_words, listed + raw.tell(), half
                listed += raw.tell()
        except (OSError, EOFError, zlib.error, inputs.InputError):
            return len(seen), n_words, -1, half  # a damaged or vanished shard: the count names it
    return len(seen), n_words, listed, half


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
