"""Items gathered into chunks per key before a shuffle, with a bound on what a step holds.

The corpus job's steps send their documents to a GroupByKey in chunks (``corpus/steps.py``: a
file's survivors per dedup bucket, kept ids per id bucket, analysed lines per shard), because a
large element costs Beam far less per document than one element each. A chunk goes out when it
is full; the rest wait for the end of the file or bundle. The number of keys grows with the
corpus (a dedup bucket per 4 MB of input; one shard per 192 MB of JSON), and a file or a bundle
can be gigabytes, so waiting chunks alone would make a worker's memory grow with the corpus. Here they
wait only until all of them together reach a budget, then all go out at once: a step holds at
most the budget (plus one item; the size is the item's strings as Python holds them plus a fixed
allowance for the rest), whatever the keys, the file or the bundle.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator

BUDGET = 64 << 20  # bytes of waiting items a step holds at most (the shard writer's RUN_BYTES is as large)
# bytes an item costs beside the text (and id) its step counts: ReadAndClean's tuple, 16-byte key
# and line number, its list slot and its key's share of the waiting lists (measured: docs/scale.md)
ITEM_OVERHEAD = 200


def value_size(value) -> int:
    """The bytes Python holds for a JSON value (a kept field's, ``keep_fields``): its objects and
    those inside it. Kept fields travel with each document, so a step counts them with its text: 10 kB
    of metadata a record would otherwise put a step's waiting items far over the budget."""
    size = sys.getsizeof(value)
    if isinstance(value, (list, tuple)):
        size += sum(value_size(v) for v in value)
    elif isinstance(value, dict):
        size += sum(value_size(k) + value_size(v) for k, v in value.items())
    return size


class KeyedChunks:
    """``add(key, item, size)`` -> the chunks to send now, as ``(key, [item, ...])`` pairs: the
    key's chunk once it holds ``limit`` items; every chunk, in key order, once the waiting ones
    reach ``budget``. ``drain()`` -> what is left, in key order (at the end of a file or bundle).
    Key order keeps a step's output the same however its input was cut."""

    def __init__(self, limit: int, budget: int | None = None):
        self.limit, self.budget = limit, budget or BUDGET  # read when made: a test may lower BUDGET
        self.waiting: dict = {}  # key -> [items, size]
        self.size = 0

    def add(self, key, item, size: int) -> Iterable[tuple]:
        """``size``: the bytes of the item's strings (``sys.getsizeof``); :data:`ITEM_OVERHEAD` is added."""
        entry = self.waiting.get(key)
        if entry is None:
            entry = self.waiting[key] = [[], 0]
        entry[0].append(item)
        cost = size + ITEM_OVERHEAD
        entry[1] += cost
        self.size += cost
        if len(entry[0]) >= self.limit:
            del self.waiting[key]
            self.size -= entry[1]
            return [(key, entry[0])]
        if self.size >= self.budget:
            return self.drain()
        return []

    def drain(self) -> Iterator[tuple]:
        waiting, self.waiting, self.size = self.waiting, {}, 0
        return _taken(waiting)


def _taken(waiting: dict) -> Iterator[tuple]:
    """The chunks in key order, each let go as the next is taken: a consumer that pickles a chunk
    gives each of its non-ASCII strings a cached UTF-8 copy (1.5 times Korean characters' size), so
    chunks held until the last one went out held those copies for every waiting item at once."""
    for key in sorted(waiting):
        yield key, waiting.pop(key)[0]
