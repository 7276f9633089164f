"""A corpus split's word table, counted shard by shard, in processes beside this one where that pays.

Stage: corpus -> **vocab** -> examples. Counting (:func:`vocab.words.count_words`: parse each
document, split it with the runtime pre-tokeniser, attach its stored morpheme cuts) is one Python
thread, and on a large corpus the longest part of a build. A corpus artifact comes in shards, so
each shard is counted into a table of its own and the tables are added up in shard order. With
more CPUs and enough data, runs of shards are counted in processes of their own
(:class:`vocab.beside.Beside`), a few runs ahead of this process, which counts every ``cpus``-th
run itself and adds up as it goes (:func:`count_split`).

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

from kolectra.corpus import shards
from kolectra.vocab import words
from kolectra.vocab.beside import Beside

# A process for every run of shards this large (gzipped), at least: counting reads about 2.7 MB of it a
# second, and a process takes about 0.4 s to start and to send its tables back (docs/vocab.md).
BESIDE_MIN_BYTES = 4 << 20

SUMMED = ("documents", "words", "words_unaligned", "table_prunes", "word_types_pruned", "words_pruned")


def count_shards(paths: list[Path], max_word_types: int | None) -> list[tuple[Counter, dict]]:
    """Each shard's own table and counters, in order: the unit of work, here or beside."""
    return list(_shard_tables(paths, max_word_types))


def _shard_tables(paths: list[Path], max_word_types: int | None, desc: str | None = None,
                  total: int | None = None) -> Iterator[tuple[Counter, dict]]:
    """:func:`count_shards` one shard at a time; with ``desc``, one progress bar over their documents."""
    with words.doc_bar(desc, total) if desc else contextlib.nullcontext() as bar:
        for path in paths:
            yield words.count_words(words.checked(shards.iter_shard(path), str(path), bar), max_word_types)


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


def runs(paths: list[Path], most: int) -> list[list[Path]]:
    """The shards cut into contiguous runs of about equal bytes: at most ``most`` runs, and no more
    than one per :data:`BESIDE_MIN_BYTES` of them."""
    sizes = [p.stat().st_size for p in paths]
    total = sum(sizes)
    n = max(1, min(most, len(paths), total // BESIDE_MIN_BYTES))
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
    """(word table, counters, processes used) for ``split`` of the corpus.

    The shards are cut into runs of at least :data:`BESIDE_MIN_BYTES` (:func:`runs`), which are
    dealt round to ``cpus`` lanes: this process counts the runs of lane 0, and each other run gets a
    process of its own, started when this process is at most ``cpus - 1`` runs behind it. So at
    most ``cpus`` runs are being counted at once, and no process ever holds more than one run's
    tables: memory stays bounded however many shards the corpus has.
    """
    paths = shards.shard_paths(corpus_dir, split)
    units = runs(paths, len(paths))
    lanes = max(1, cpus)
    mine = [u for k, u in enumerate(units) if k % lanes == 0]
    total = shards.document_count(corpus_dir, split) if len(mine) == len(units) else None  # the share counted here
    with contextlib.ExitStack() as stack:
        beside: dict[int, Beside] = {}
        dealt = [0]  # the runs before this one have their process (or are this process's)

        def start_up_to(last: int) -> None:
            for j in range(dealt[0], min(last + 1, len(units))):
                if j % lanes:
                    beside[j] = Beside(f"counting {len(units[j])} shard(s) from {units[j][0].name}", count_shards,
                                       units[j], max_word_types)
                    stack.callback(beside[j].stop)  # the stage failed or was interrupted: no counter outlives it
            dealt[0] = max(dealt[0], last + 1)

        def in_order() -> Iterator[tuple[Counter, dict]]:
            here = _shard_tables([p for u in mine for p in u], max_word_types, desc, total)
            for k, unit in enumerate(units):
                start_up_to(k + lanes - 1)
                if k % lanes == 0:
                    for _ in unit:
                        yield next(here)
                else:
                    tables, _ = beside.pop(k).result()
                    while tables:  # hand each table on alone, so the added ones can be freed
                        yield tables.pop(0)
            next(here, None)  # ends this process's progress bar

        table, counts = add_up(in_order(), max_word_types)
    return table, counts, min(lanes, len(units)) if units else 1
