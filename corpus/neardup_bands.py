"""Near-dup's band records in packed chunks, and a bucket walk over them (``corpus/neardup_beam.py``'s
``MinHash`` -> ``GroupBands`` -> ``LinkSorted``).

Each document sends one record per band (its 7-byte bucket and its compact id). Sent one element
each and grouped by bucket, nearly every group is a single record, and each record costs a shuffle
its own key and framing: Beam's local runner holds a group as a dict entry, the key's bytes, a list
and the value's bytes, 173 bytes a record, 21.9 MB per MB of review text (measured with the
runner's coders on 40,000 reviews; the job's whole near-dup slope was about 25 MB per MB). So the
records go as fixed-width 16-byte pairs (bucket, id), packed per *coarse key* (the bucket's top
:data:`COARSE_BITS` bits) and grouped by that: 16 bytes a record in any runner. The step that reads
a coarse group sorts its records by (bucket, id), spilling sorted runs of :data:`RUN_RECORDS` to
disk past that and merging them (memory bounded by a setting, not by the group: a bucket of template
spam lands whole in one coarse group), and walks the buckets in order with
:func:`neardup.bucket_candidates`' rule: the same candidate pairs as grouping by bucket.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from kolectra.core import scratch
from kolectra.corpus import neardup

RECORD = np.dtype([("bucket", "<u8"), ("id", "<u8")])  # a bucket (56 bits) and a compact id
COARSE_BITS = 12  # 4,096 coarse keys: a few MB a group at 34 GB of text, tens of records a chunk at a file's bundle
BUCKET_BITS = 8 * neardup.BUCKET_BYTES
FLUSH_RECORDS = 1 << 16  # records a packing step holds before it sends them (about 8 MB of Python ints)
RUN_RECORDS = 1 << 21  # records a linking step sorts in memory (32 MB, about 80 with the sort's copies)
BLOCK = 1 << 16  # records the merge of spilled runs reads back at a time, all runs together


def bucket_int(bucket: bytes) -> int:
    return int.from_bytes(bucket, "big")


def coarse_key(bucket: int) -> int:
    return bucket >> (BUCKET_BITS - COARSE_BITS)


def pack(buckets: list[int], ids: list[int]) -> Iterator[tuple[int, bytes]]:
    """Records -> (coarse key, packed records) per coarse key present, in key order."""
    recs = np.empty(len(buckets), RECORD)
    recs["bucket"], recs["id"] = buckets, ids
    keys = recs["bucket"] >> np.uint64(BUCKET_BITS - COARSE_BITS)
    order = np.argsort(keys, kind="stable")
    recs, keys = recs[order], keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    for s, e in zip(starts.tolist(), [*starts[1:].tolist(), len(recs)]):
        yield int(keys[s]), recs[s:e].tobytes()


def _sort(recs: np.ndarray) -> np.ndarray:
    return recs[np.lexsort((recs["id"], recs["bucket"]))]


class SortedRuns:
    """Packed chunks in, (bucket, id)-sorted blocks out, holding at most ``run_records`` records
    (and a block of each spilled run while merging). Runs spill into ``folder``; without one, into
    a temporary folder made at the first spill and removed by :meth:`close`: nearly every coarse
    group is sorted in memory, and a folder made and removed for each of the job's 4,096 groups
    cost about 1 CPU s and 13 s of wall time a job on a loaded disk (docs/benchmarks.md)."""

    def __init__(self, folder: Path | None = None, run_records: int | None = None):
        self.folder = None if folder is None else Path(folder)
        self.run_records = run_records or RUN_RECORDS  # read when made: tests lower it
        self.made = None  # the temporary folder made for the spilled runs, when no folder was given
        self.pending: list[np.ndarray] = []
        self.held = 0
        self.runs: list[Path] = []

    def add(self, chunk: bytes) -> None:
        recs = np.frombuffer(chunk, RECORD)
        self.pending.append(recs)
        self.held += len(recs)
        if self.held >= self.run_records:
            self._spill()

    def _take(self) -> np.ndarray:
        recs = _sort(np.concatenate(self.pending)) if self.pending else np.empty(0, RECORD)
        self.pending, self.held = [], 0
        return recs

    def _spill(self) -> None:
        if self.folder is None:
            self.made = scratch.temporary_directory("bands")
            self.folder = Path(self.made.name)
        path = self.folder / f"run-{len(self.runs):05d}.npy"
        np.save(path, self._take())
        self.runs.append(path)

    def blocks(self) -> Iterator[np.ndarray]:
        if not self.runs:
            yield self._take()
            return
        if self.pending:
            self._spill()
        step = max(256, BLOCK // len(self.runs))  # what the merge holds stays about a block, however many runs
        merged = heapq.merge(*(_records(np.load(p, mmap_mode="r"), step) for p in self.runs))
        while block := list(itertools.islice(merged, BLOCK)):
            yield np.array(block, RECORD)

    def close(self) -> None:
        """Remove the temporary folder of the spilled runs, if one was made."""
        if self.made is not None:
            self.made.cleanup()
            self.made = None


def _records(run: np.ndarray, step: int) -> Iterator[tuple[int, int]]:
    for i in range(0, len(run), step):
        part = run[i:i + step]
        yield from zip(part["bucket"].tolist(), part["id"].tolist())


class Walk:
    """Sorted blocks -> each bucket's candidate pairs, as :func:`neardup.bucket_candidates` gives
    them: :func:`neardup.bucket_links` for a bucket of up to ``chain_limit`` members, each member
    paired with the smallest above that (the smallest comes first: one pass, at most
    ``chain_limit + 1`` ids held). ``stars``: the pairs of each bucket linked as a star."""

    def __init__(self, chain_limit: int):
        self.limit = chain_limit
        self.stars: list[int] = []

    def pairs(self, blocks: Iterable[np.ndarray]) -> Iterator[tuple[int, int]]:
        current, held, smallest = None, [], None
        for block in blocks:
            if not len(block):
                continue
            buckets = block["bucket"]
            starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
            ends = np.r_[starts[1:], len(block)]
            # a bucket of one record gives nothing, unless it goes on from the last block or into the next
            edge = np.zeros(len(starts), bool)
            edge[[0, -1]] = True
            for s, e in zip(*(x[(ends - starts > 1) | edge].tolist() for x in (starts, ends))):
                bucket = int(buckets[s])
                if bucket != current:
                    yield from self._close(held, smallest)
                    current, held, smallest = bucket, [], None
                ids = block["id"][s:e]
                if smallest is None:
                    room = self.limit + 1 - len(held)
                    held.extend(ids[:room].tolist())
                    ids = ids[room:]
                    if len(held) <= self.limit:
                        continue
                    smallest = held[0]
                    self.stars.append(0)
                    ids = [*held[1:], *ids.tolist()]
                    held = []
                else:
                    ids = ids.tolist()
                for i in ids:
                    if i != smallest:
                        self.stars[-1] += 1
                        yield smallest, i
        yield from self._close(held, smallest)

    def star_pairs(self) -> list[int]:
        """The pairs of each bucket linked as a star, as the corpus stats count them: a star that gave
        fewer than ``chain_limit`` pairs (repeated ids only, a 56-bit collision) is not counted."""
        return [n for n in self.stars if n >= self.limit]

    def _close(self, held: list[int], smallest: int | None) -> Iterator[tuple[int, int]]:
        if smallest is None and len(held) > 1:
            yield from neardup.bucket_links(held)


def group_pairs(chunks: Iterable[bytes], chain_limit: int, run_records: int | None = None
                ) -> tuple[Iterator[tuple[int, int]], Walk]:
    """A coarse group's packed chunks -> (its candidate pairs, the walk: read ``stars`` after the
    pairs are consumed). Spilled runs live in a temporary folder, made at the first spill and removed
    when the pairs end."""

    walk = Walk(chain_limit)

    def pairs():
        runs = SortedRuns(None, run_records)
        try:
            for chunk in chunks:
                runs.add(chunk)
            yield from walk.pairs(runs.blocks())
        finally:
            runs.close()

    return pairs(), walk
