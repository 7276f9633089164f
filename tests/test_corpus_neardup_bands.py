"""corpus/neardup_bands.py: band records packed per coarse key, sorted with bounded memory (spilled
runs merged) and walked bucket by bucket, give exactly the candidate pairs and star tallies of
grouping the records by bucket (:func:`neardup.bucket_candidates`)."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from kolectra.corpus import neardup, neardup_bands


def _expected(records: list[tuple[int, int]], limit: int) -> tuple[list, list]:
    by_bucket: dict = {}
    for bucket, doc_id in records:
        by_bucket.setdefault(bucket, []).append(doc_id)
    pairs, stars = [], []
    for bucket in sorted(by_bucket):
        got = list(neardup.bucket_candidates(by_bucket[bucket], limit))
        pairs += got
        if len(by_bucket[bucket]) > limit and len(got) >= limit:  # the tally's rule in neardup_beam._Link
            stars.append(len(got))
    return sorted(pairs), stars


def _walked(records: list[tuple[int, int]], limit: int, chunk: int, run_records: int | None = None):
    chunks = []
    for i in range(0, len(records), chunk):  # as several bundles would send them
        part = records[i:i + chunk]
        chunks += [c for key, c in neardup_bands.pack([b for b, _ in part], [d for _, d in part])]
    pairs, walk = neardup_bands.group_pairs(chunks, limit, run_records)
    return sorted(pairs), walk.star_pairs()


def _records(rng: random.Random, n_buckets: int, spam: dict[int, int]) -> list[tuple[int, int]]:
    records = [(rng.randrange(n_buckets), rng.randrange(1 << 40)) for _ in range(3000)]
    for bucket, members in spam.items():
        records += [(bucket, rng.randrange(1 << 40)) for _ in range(members)]
    rng.shuffle(records)
    return records


@pytest.mark.parametrize("run_records", [None, 7, 500])
@pytest.mark.parametrize("block", [3, 1 << 16])
def test_the_walk_gives_the_pairs_and_stars_of_grouping_by_bucket(monkeypatch, run_records, block):
    monkeypatch.setattr(neardup_bands, "BLOCK", block)  # buckets cut across blocks of the merged runs
    rng = random.Random(run_records or 0)
    limit = 8
    # many buckets of a few members; spam buckets at, just over and far over the chain limit
    records = _records(rng, 900, {10**15: limit, 10**15 + 1: limit + 1, 10**15 + 2: 60})
    expected = _expected(records, limit)
    assert {limit, 59} <= set(expected[1])  # the spam buckets are stars (pairs: members - 1)
    assert _walked(records, limit, chunk=257, run_records=run_records) == expected


def test_a_smallest_id_repeated_in_its_bucket_pairs_as_grouping_does():
    # an id twice in one bucket (two bands' 56-bit keys colliding): bucket_links' set, the star's filter
    for limit in (2, 3, 10):
        records = [(5, 1), (5, 1), (5, 4), (5, 3), (5, 3), (9, 2)]
        assert _walked(records, limit, chunk=2, run_records=2) == _expected(records, limit)


def test_records_go_to_their_coarse_key_at_sixteen_bytes_each():
    buckets = [0, (1 << 56) - 1, 1 << 44, 5]
    packed = dict(neardup_bands.pack(buckets, [1, 2, 3, 4]))
    assert sorted(packed) == [0, 1, (1 << neardup_bands.COARSE_BITS) - 1]
    assert len(packed[0]) == 2 * neardup_bands.RECORD.itemsize == 32
    assert neardup_bands.coarse_key(neardup_bands.bucket_int(bytes([0xFF] * 7))) == (1 << neardup_bands.COARSE_BITS) - 1


def test_a_spam_bucket_costs_the_step_its_run_bound_not_its_size(monkeypatch):
    """A bucket of n near copies lands whole in one coarse group: the step holds at most
    ``run_records`` records sorted in memory and a merge block, whatever n (spilled runs are read
    back a block at a time)."""
    monkeypatch.setattr(neardup_bands, "BLOCK", 4096)

    def peak(n: int) -> int:
        ids = list(range(n, 0, -1))  # packed a bundle at a time, as the packing step sends them
        chunks = [c for i in range(0, n, 4096) for _, c in neardup_bands.pack([7] * len(ids[i:i + 4096]), ids[i:i + 4096])]
        tracemalloc.start()
        pairs, walk = neardup_bands.group_pairs(chunks, 16, run_records=20_000)
        count = sum(1 for _ in pairs)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert count == n - 1 and walk.star_pairs() == [n - 1]
        return top

    small, large = peak(100_000), peak(400_000)
    assert large < 1.2 * small and large < 3_000_000, (small, large)


def test_a_source_rank_that_would_not_fit_a_packed_id_is_refused_with_the_file_count():
    from kolectra.corpus import neardup_beam

    step = neardup_beam._Sign(11, 9, seed=0, groups=16)
    step.start_bundle()
    doc = {"source": "f.jsonl", "line": 3}
    fits = 1 << (64 - neardup_beam.LINE_BITS)
    assert step.compact_id({"f.jsonl": [fits - 1]}, doc) == (fits - 1) << neardup_beam.LINE_BITS | 3
    step.start_bundle()
    with pytest.raises(ValueError, match="more than 16,777,216 input files"):
        step.compact_id({"f.jsonl": [fits]}, doc)


def test_a_group_sorted_in_memory_makes_no_folder_and_a_spilled_one_removes_its_own(monkeypatch, tmp_path):
    """Nearly every coarse group fits in memory: a temporary folder made and removed for each of a
    job's 4,096 groups cost about 1 CPU s and 13 s of wall time (docs/benchmarks.md). The folder is
    made at the first spill only, and removed when the pairs end, or are dropped unread."""
    from kolectra.core import scratch

    made = []
    real = scratch.temporary_directory

    def counted(kind, dir=None):
        made.append(real(kind, dir=tmp_path))
        return made[-1]

    monkeypatch.setattr(scratch, "temporary_directory", counted)
    records = [(5, i) for i in range(40)] + [(9, 1), (9, 2)]
    assert _walked(records, 10, chunk=8) == _expected(records, 10)
    assert made == []  # in memory: no folder
    assert _walked(records, 10, chunk=8, run_records=16) == _expected(records, 10)
    assert len(made) == 1 and list(tmp_path.iterdir()) == []  # spilled: one folder, removed at the end
    chunks = [c for _, c in neardup_bands.pack([5] * 40, list(range(40)))]
    pairs, _ = neardup_bands.group_pairs(chunks, 10, run_records=16)
    next(pairs)
    pairs.close()  # a step stopped midway
    assert len(made) == 2 and list(tmp_path.iterdir()) == []
