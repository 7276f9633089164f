"""MinHash-LSH near duplicates under template spam (many near copies of one text in the same
buckets): no step holds a group that grows with it, a bucket over ``near_dup_chain_limit`` is linked
as a star only (corpus/neardup.py, corpus/neardup_beam.py), and the corpus job says so. The method's
other tests: test_corpus_neardup.py."""

import collections

import numpy as np
import pytest

from benchmarks import neardup_spam
from kolectra.corpus import neardup
from tests.test_corpus_neardup import _planted, _stages


def test_no_step_holds_a_group_that_grows_with_template_spam():
    """A bucket or cluster of n near copies costs each per-group step the same memory at n = 2,000
    and n = 200,000 (listing the group, as the steps did, held about 8 MB at 200,000). LinkSorted
    sorts a coarse group's records up to a run bound, then spills: its peak, flat past that bound,
    is tested in test_corpus_neardup_bands.py."""
    small, large = neardup_spam.streamed(2_000, 16), neardup_spam.streamed(200_000, 16)
    for name in [name for name in small if not name.startswith("LinkSorted")]:
        at_small, at_large = neardup_spam.peak_bytes(small[name]), neardup_spam.peak_bytes(large[name])
        assert at_large < at_small + 16_384, (name, at_small, at_large)
        assert at_large < 64_000, (name, at_large)  # bounded by chain_limit (16 here), not by n


def test_a_group_read_twice_must_be_re_iterable():
    with pytest.raises(TypeError, match="re-iterable"):
        list(neardup.bucket_candidates(iter(range(5)), 2))
    with pytest.raises(TypeError, match="re-iterable"):
        list(neardup.large_star(0, iter(range(1, 5))))


def test_a_bucket_over_the_chain_limit_is_a_star_and_its_cluster_still_keeps_one_copy(tmp_path):
    """Template spam: 90 variants of one review (one word of 30 replaced each) crowd the same
    buckets. Over ``chain_limit`` the bucket is linked as a star only; the Beam stages still equal
    their in-memory form with the same limit, and the cluster keeps only its smallest copy."""
    rng = np.random.default_rng(7)
    syllables = [chr(c) for c in range(0xAC00, 0xAC00 + 2000)]
    template = ["".join(rng.choice(syllables, size=3)) for _ in range(30)]
    docs = {}
    for i in range(90):
        words = list(template)
        words[int(rng.integers(30))] = "".join(rng.choice(syllables, size=3))
        docs[("spam", i)] = " ".join(words)
    docs.update({("other", i): t for i, t in enumerate(_planted(seed=4, bases=20, copies=0)[0].values())})
    bands, rows = neardup.bands_rows(0.7)
    perms = neardup.permutations(0, bands * rows)
    sizes = collections.Counter(b for t in docs.values() for b in neardup.band_keys(neardup.signature(t, perms), bands, rows))
    assert sum(n > 8 for n in sizes.values()) >= 5  # the limit below is crossed, by buckets of up to 40
    staged, unconverged = neardup.find_near_duplicates_staged(docs, 0.7, seed=0, chain_limit=8)
    tallies = {}
    dropped, kept, _ = _stages(docs, 0.7, tmp_path, workers=2, chain_limit=8, tallies=tallies)  # re-read in workers
    assert (dropped, unconverged) == (staged, 0)
    over = [n for n in sizes.values() if n > 8]
    assert tallies["star_only_buckets"] == len(over) and tallies["star_only_documents"] == sum(over)  # for stats.json
    assert tallies["verified_pairs"] <= tallies["candidate_pairs"] and "unconverged_nodes" not in tallies
    assert set(dropped) == {("spam", i) for i in range(1, 90)} and set(dropped.values()) == {("spam", 0)}
    assert kept == sorted([("spam", 0)] + [k for k in docs if k[0] == "other"])


def test_the_chain_limit_is_a_setting_refused_below_two():
    from kolectra.core.config import ConfigError, override
    from kolectra.corpus.config import production_config

    assert override(production_config(), ["near_dup_chain_limit=50"]).near_dup_chain_limit == 50
    with pytest.raises(ConfigError, match="near_dup_chain_limit must be >= 2"):
        override(production_config(), ["near_dup_chain_limit=1"])


def test_the_corpus_job_reports_template_spam_linked_as_stars(tmp_path, capsys):
    """The whole corpus job with a small chain limit: stats.json's ``near_dup`` counts the buckets
    linked as stars only, and the run says so where the user looks (stderr)."""
    import dataclasses

    from kolectra.corpus import build
    from kolectra.corpus.config import default_config

    rng = np.random.default_rng(5)
    template = "이번 영화 정말 재미있게 봤습니다 배우들 연기가 좋았고 음악도 훌륭했어요 가족과 함께 보기 좋은 영화 추천합니다".split()
    lines = []
    for i in range(30):
        words = list(template)
        words[int(rng.integers(len(words)))] = f"{i}번째"
        lines.append(" ".join(words))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "spam.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = dataclasses.replace(default_config(), near_dup_threshold=0.7, near_dup_chain_limit=4, num_shards=1)
    result = build.build(cfg, [str(tmp_path / "in" / "*")], tmp_path / "out", [])
    near = result.stats["near_dup"]
    assert near["star_only_buckets"] > 0 and near["star_only_documents"] > 4 * near["star_only_buckets"]
    assert result.stats["dropped"]["near_duplicate"] >= 20
    assert "linked as stars only" in capsys.readouterr().err
