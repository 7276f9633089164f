"""A corpus split's word table, counted shard by shard, in processes beside this one where that pays.

Stage: corpus -> **vocab** -> examples. Counting (:func:`vocab.words.count_words`: parse each
document, split it with the runtime pre-tokeniser, attach its stored morpheme cuts) is one Python
thread, and on a large corpus the longest part of a build. A corpus artifact comes in shards, so
each shard is counted into a table of its own and the tables are added up in shard order. With
more CPUs and enough data, contiguous runs of shards are counted in processes of their own
(:class:`vocab.beside.Beside`) while this process counts the first run and adds up as it goes.

The table does not depend on where a shard was counted: it is always one table per shard, added in
shard order. While no table outgrows ``max_word_types`` it equals what one stream over all
documents gives, in insertion order too (adding a shard appends its new words in the order the
shard first saw them). Past that bound, a shard's own table is pruned as it streams, and the
running total after adding a shard (:func:`vocab.words.prune`).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

from kolectra.core import bars
from kolectra.corpus import shards
from kolectra.vocab import words
from kolectra.vocab.beside import Beside

# No more runs than one per this much gzipped corpus: counting reads about 2.7 MB of it a second, and a
# process takes about 0.4 s to start and to send its tables back (docs/vocab.md).
BESIDE_MIN_BYTES = 4 << 20

SUMMED = ("documents", "words", "words_unaligned", "table_prunes", "word_types_pruned", "words_pruned")


def count_shards(paths: list[Path], max_word_types: int | None) -> list[tuple[Counter, dict]]:
    """Each shard's own table and counters, in order: the unit of work, here or beside."""
    return list(_shard_tables(paths, max_word_types))


def _shard_tables(paths: list[Path], max_word_types: int | None, desc: str | None = None,
                  total: int | None = None) -> Iterator[tuple[Counter, dict]]:
    """:func:`count_shards` one shard at a time; with ``desc``, one progress bar over their documents."""
    bar = bars.Bar(desc, total, "doc", every=max(1, total // 10) if total else 100_000,
                   min_seconds=bars.QUIET_SECONDS) if desc else None
    with bar or contextlib.nullcontext():
        for path in paths:
            docs = words.checked(shards.iter_shard(path), str(path))
            yield words.count_words(docs if bar is None else _advancing(docs, bar), max_word_types)


def _advancing(docs: Iterable[dict], bar: bars.Bar) -> Iterator[dict]:
    for doc in docs:
        bar.advance()
        yield doc


def add_up(tables: Iterable[tuple[Counter, dict]], max_word_types: int | None) -> tuple[Counter, dict]:
    """The shards' tables added in order (each dropped once added), pruned past ``max_word_types``."""
    total: Counter = Counter()
    counts = dict.fromkeys(SUMMED, 0)
    for table, shard_counts in tables:
        total.update(table)
        del table
        for k in SUMMED:
            counts[k] += shard_counts[k]
        if max_word_types and len(total) > max_word_types:
            types, occurrences = words.prune(total, max_word_types * 3 // 4)
            counts["table_prunes"] += 1
            counts["word_types_pruned"] += types
            counts["words_pruned"] += occurrences
    return total, {**counts, "word_types": len(total)}


def runs(paths: list[Path], cpus: int) -> list[list[Path]]:
    """The shards cut into contiguous runs of about equal bytes, one per process: at most ``cpus``
    runs, and no more than one per :data:`BESIDE_MIN_BYTES` of them."""
    sizes = [p.stat().st_size for p in paths]
    total = sum(sizes)
    n = max(1, min(cpus, len(paths), total // BESIDE_MIN_BYTES))
    before = [0]  # bytes before shard i
    for size in sizes:
        before.append(before[-1] + size)
    cuts = [0]
    for k in range(1, n):  # the k-th cut: nearest to k/n of the bytes, leaving a shard for each run
        cuts.append(min(range(cuts[-1] + 1, len(paths) - (n - k) + 1), key=lambda i: abs(before[i] - total * k / n)))
    cuts.append(len(paths))
    return [paths[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def count_split(corpus_dir: Path, split: str, max_word_types: int | None, cpus: int,
                desc: str | None = None) -> tuple[Counter, dict, int]:
    """(word table, counters, processes used) for ``split`` of the corpus."""
    first, *later = runs(shards.shard_paths(corpus_dir, split), cpus) or [[]]
    total = None if later else shards.document_count(corpus_dir, split)  # this process's share of the documents
    with contextlib.ExitStack() as stack:
        beside = [Beside(f"counting {len(r)} shard(s) from {r[0].name}", count_shards, r, max_word_types)
                  for r in later]
        for b in beside:
            stack.callback(b.stop)  # the stage failed or was interrupted: no counter outlives it

        def in_order() -> Iterator[tuple[Counter, dict]]:
            yield from _shard_tables(first, max_word_types, desc, total)
            for b in beside:
                tables, _ = b.result()
                while tables:  # hand each table on alone, so the added ones can be freed
                    yield tables.pop(0)

        table, counts = add_up(in_order(), max_word_types)
    return table, counts, 1 + len(beside)
