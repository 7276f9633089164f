"""Memory of the near-dup stages' per-group steps on template spam (``corpus/neardup.py``,
``corpus/neardup_beam.py``): does a step's memory grow with its group?

A template (a cookie notice, a review form) makes band buckets and clusters of n near copies,
and n grows with the crawl. Each per-group step is given a group of n ids made as it is read (as
Dataflow, Flink and Spark page a large group in from their shuffle) and its output is consumed
without being kept; tracemalloc's peak is the step's working memory. Two forms side by side in
one run: the steps as they are (streamed passes, at most ``near_dup_chain_limit`` ids held) and
the group listed first, as the steps did before (``list``, ``set``, ``sorted`` of the group).

value: the largest streamed step's peak at the largest n, in bytes; baseline: the largest listed
step's peak at that n; ratio = value / baseline (lower is better).
``LinkSorted`` reads a coarse group of packed band records (``corpus/neardup_bands.py``): a spam
bucket lands whole in one, and the step sorts up to ``--run-records`` (``RUN_RECORDS``) records in
memory before it spills sorted runs to disk, so its peak grows with n up to that bound and stays
there.
``--quick``: n = 10,000 and 100,000 (seconds); full: up to 1,000,000 (about a minute).
Usage: ``python benchmarks/neardup_spam.py [--quick] [--chain-limit 1000] [--run-records N]``.
"""

from __future__ import annotations

import collections
import sys
import tracemalloc

from kolectra.corpus import neardup, neardup_bands, neardup_beam


class Group:
    """n ids, re-iterable, each made as it is read; smallest last (the worst order for a min)."""

    def __init__(self, n: int, tag: tuple = (), head=()):
        self.n, self.tag, self.head = n, tag, head  # tag: what goes before each id in a value

    def __iter__(self):
        yield from self.head
        for v in range(self.n, 0, -1):
            yield (*self.tag, v) if self.tag else v


def spam_chunks(n: int):
    """A coarse group holding one bucket of n ids, as ``MinHash`` sends it: packed chunks of at
    most ``FLUSH_RECORDS`` records, made as they are read."""
    bucket = 0x5A << (neardup_bands.BUCKET_BITS - 8)
    for top in range(n, 0, -neardup_bands.FLUSH_RECORDS):
        ids = list(range(top, max(top - neardup_bands.FLUSH_RECORDS, 0), -1))
        yield from (chunk for _, chunk in neardup_bands.pack([bucket] * len(ids), ids))


def streamed(n: int, chain_limit: int, run_records: int = neardup_bands.RUN_RECORDS) -> dict:
    sigs = (neardup_beam.SIG, [(0, bytes(512), 0)])  # the smallest's signature (id, signature, group)
    return {
        "LinkSorted (a coarse group)": lambda: neardup_bands.group_pairs(spam_chunks(n), chain_limit, run_records)[0],
        "SignPairs (a bucket's smallest)": lambda: neardup_beam._signed_pairs(0, Group(n, (neardup_beam.PAIR, 0), [sigs])),
        "LargeStar (a component's centre)": lambda: neardup.large_star(0, Group(n)),
        "SmallStar (a node of many smaller)": lambda: neardup.small_star(n + 1, Group(n)),
        "Marks (a component's centre)": lambda: [neardup.star_mark(0, Group(n))],
    }


def listed(n: int, chain_limit: int) -> dict:
    """The same steps as they were before: each group listed (and set, sorted) in the step."""

    def signed_pairs():  # a CoGroupByKey lists every tagged value of the key
        sigs, pairs = [bytes(512)], list(range(n, 0, -1))
        return [((0, o), s) for s in sigs for o in pairs]

    def large_star():
        nb = list(Group(n))
        m = min(min(nb), 0)
        return [(m, v) for v in sorted(set(nb)) if v > 0]

    def small_star():
        smaller = list(Group(n))
        m = min(smaller)
        return [(m, v) for v in sorted({*smaller, n + 1}) if v != m]

    def marks():
        nb = list(Group(n))
        smaller = [v for v in nb if v < 0]
        return [(None, not smaller)]

    return {
        "LinkSorted (a coarse group)": lambda: neardup.bucket_links(list(Group(n))),  # grouped by bucket
        "SignPairs (a bucket's smallest)": signed_pairs,
        "LargeStar (a component's centre)": large_star,
        "SmallStar (a node of many smaller)": small_star,
        "Marks (a component's centre)": marks,
    }


def peak_bytes(step) -> int:
    tracemalloc.start()
    try:
        collections.deque(step(), maxlen=0)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> dict:
    from common import emit, parser  # noqa: PLC0415 - the benchmarks folder's module (tests import this one)

    ap = parser(__doc__, "about a minute")
    ap.add_argument("--chain-limit", type=int, default=neardup.CHAIN_LIMIT)
    ap.add_argument("--run-records", type=int, default=neardup_bands.RUN_RECORDS)
    args = ap.parse_args(argv)
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    rows = []
    for n in sizes:
        now, before = streamed(n, args.chain_limit, args.run_records), listed(n, args.chain_limit)
        for step in now:
            row = {"n": n, "step": step, "streamed_bytes": peak_bytes(now[step]), "listed_bytes": peak_bytes(before[step])}
            rows.append(row)
            print(row, file=sys.stderr)
    last = [r for r in rows if r["n"] == sizes[-1]]
    return emit("neardup_group_step_peak", "bytes", max(r["streamed_bytes"] for r in last),
                "the steps listing their group", max(r["listed_bytes"] for r in last),
                {"sizes": sizes, "chain_limit": args.chain_limit, "run_records": args.run_records}, rows=rows)


if __name__ == "__main__":
    main()
