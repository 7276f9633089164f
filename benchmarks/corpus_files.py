"""What the corpus job's per-input-file table costs the worker that writes it, as the number of
input files grows.

Each input file's row (records in, rejected, bytes, sha256) used to reach one worker as one list
(a ``ToList`` of every file's row, beside per-file tallies), which wrote them all into
``stats.json`` (before). Now the rows go, one chunk each, to the sorted writer the rejects use
(``outputs.write_sorted``: runs of up to ``RUN_BYTES`` sorted in memory, spilled and merged)
into ``stats/files.jsonl``, and ``stats.json`` gets the totals and the first ``STATS_SOURCES``
rows by name, which a ``Top.Smallest`` hands over (after). Both run here on synthetic rows of
crawl-like names, arriving in no order: the figure is the ``tracemalloc`` peak of Python
allocations while the step's input arrives and its files are written (before: the list the
``ToList`` makes and ``write_stats`` over it; after: ``write_sorted`` over the streamed rows,
``heapq.nsmallest`` as the ``Top`` combiner keeps them, and ``write_stats``), with CPU seconds.

value: after's peak at the largest count, MB; baseline: before's at the same count.

    python benchmarks/corpus_files.py [--quick]

Full: 1,000, 10,000 and 100,000 files (about 15 CPU s); ``--quick``: 1,000 and 10,000.
"""

from __future__ import annotations

import hashlib
import heapq
import random
import tempfile
import tracemalloc
from typing import Callable, Iterator

from common import cpu_seconds, emit, parser

from kolectra.corpus import outputs, sorted_files
from kolectra.corpus.config import default_config


def rows(n: int) -> Iterator[tuple[str, dict]]:
    """n input files' (source, row), in a shuffled order, made as they are consumed."""
    order = list(range(n))
    random.Random(n).shuffle(order)
    for i in order:
        s = f"crawl/2024-10/part-{i:07d}.jsonl.gz"
        yield s, {"records_in": 31_337, "rejected": 12, "bytes": 48_213_771, "sha256": hashlib.sha256(s.encode()).hexdigest()}


def tallies(n: int) -> list:
    return [(outputs.RECORDS_IN, 31_337 * n), (outputs.INPUT_FILES, n), (("rejected", "invalid_json"), 12 * n),
            (("train", "documents"), 31_325 * n)]


def before(n: int, out: str) -> None:
    """One list of every row (and a source_in and source_rejected tally each), one stats.json."""
    listed = list(rows(n))
    per_file = [(("source_in", s), r["records_in"]) for s, r in listed] + [(("source_rejected", s), r["rejected"]) for s, r in listed]
    outputs.write_stats(tallies(n) + per_file, out, default_config(), listed)


def after(n: int, out: str) -> None:
    """Rows streamed to the sorted writer; the first STATS_SOURCES by name into stats.json."""
    shown: list = []

    def lines():
        for row in rows(n):
            shown.append(row)  # the Top combiner's accumulator: kept to STATS_SOURCES below
            if len(shown) > 2 * outputs.STATS_SOURCES:
                shown[:] = heapq.nsmallest(outputs.STATS_SOURCES, shown, key=outputs.source_of)
            yield outputs.file_item(row)[1]
    outputs.write_sorted((outputs.FILES_FILE, lines()), out)
    outputs.write_stats(tallies(n), out, default_config(), heapq.nsmallest(outputs.STATS_SOURCES, shown, key=outputs.source_of))


def measured(fn: Callable[[int, str], None], n: int) -> tuple[float, float]:
    """(tracemalloc peak MB, CPU s) of fn at n files."""
    with tempfile.TemporaryDirectory(prefix="kolectra-bench-files-") as out:
        t0 = cpu_seconds()
        tracemalloc.start()
        fn(n, out)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return round(peak / 1e6, 2), round(cpu_seconds() - t0, 2)


def main(argv: list[str] | None = None) -> dict:
    args = parser(__doc__, "about 15 CPU s").parse_args(argv)
    t0 = cpu_seconds()
    table = []
    for n in (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000):
        (mb_before, cpu_before), (mb_after, cpu_after) = measured(before, n), measured(after, n)
        table.append({"files": n, "before_mb": mb_before, "after_mb": mb_after, "before_cpu_s": cpu_before, "after_cpu_s": cpu_after})
        print(table[-1])
    last = table[-1]
    return emit("corpus_files", "MB the per-file table's writer holds at the most files", last["after_mb"],
                "one list of every file's row into stats.json", last["before_mb"],
                {"run_bytes": sorted_files.RUN_BYTES, "stats_sources": outputs.STATS_SOURCES, "cpu_s": round(cpu_seconds() - t0, 1)},
                rows=table)


if __name__ == "__main__":
    main()
