"""MinHash-LSH near-duplicate helpers (corpus/neardup.py); the Beam step runs in test_corpus_pipeline."""

import numpy as np
import pytest

from kolectra.corpus import neardup

A = "주인공이 왜 그랬는지 이해가 안 된다 했는데 결말 보고 납득함. 배우들 연기는 좋았다"
B = A + " ㅎㅎ"
C = "스토리가 너무 뻔해서 지루했다 다시는 안 봄"


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
def test_bands_rows_put_the_s_curve_near_the_threshold(threshold):
    bands, rows = neardup.bands_rows(threshold)
    assert bands * rows <= neardup.NUM_PERM
    assert abs((1 / bands) ** (1 / rows) - threshold) < 0.05


def test_signature_agreement_estimates_jaccard():
    perms = neardup.permutations(seed=0)
    sig = {k: neardup.signature(t, perms) for k, t in (("a", A), ("b", B), ("c", C))}
    assert neardup.jaccard(A, B) > 0.85 and neardup.jaccard(A, C) < 0.1
    assert abs((sig["a"] == sig["b"]).mean() - neardup.jaccard(A, B)) < 0.1
    assert (sig["a"] == sig["c"]).mean() < 0.1
    np.testing.assert_array_equal(sig["a"], neardup.signature(A, neardup.permutations(seed=0)))  # stable


def test_band_keys_collide_only_for_similar_texts():
    perms = neardup.permutations(seed=0)
    bands, rows = neardup.bands_rows(0.8)
    keys = {k: set(neardup.band_keys(neardup.signature(t, perms), bands, rows)) for k, t in (("a", A), ("b", B), ("c", C))}
    assert len(keys["a"]) == bands
    assert keys["a"] & keys["b"]
    assert not keys["a"] & keys["c"]


def test_union_find_keeps_the_smallest_key_per_cluster_in_any_edge_order():
    edges = [(("b", 1), ("c", 1)), (("a", 5), ("b", 1)), (("x", 1), ("y", 1)), (("c", 1), ("d", 1))]
    expected = {("b", 1): ("a", 5), ("c", 1): ("a", 5), ("d", 1): ("a", 5), ("y", 1): ("x", 1)}
    rng = np.random.default_rng(0)
    for _ in range(5):
        order = [edges[i] for i in rng.permutation(len(edges))]
        flipped = [(b, a) if rng.random() < 0.5 else (a, b) for a, b in order]
        assert neardup.cluster_drops(flipped) == expected


def test_candidates_are_verified_by_estimated_jaccard():
    perms = neardup.permutations(seed=0)
    members = [(k, neardup.sig_bytes(neardup.signature(t, perms))) for k, t in ((1, A), (2, B), (3, C))]
    assert neardup.verified_edges(members, 0.8) == [(1, 2)]  # (1, 3), (2, 3) are candidates, not edges
    big = [(i, members[0][1]) for i in range(neardup.MAX_BUCKET_PAIRS + 10)]
    assert len(neardup.candidate_pairs(big)) == len(big) - 1  # star, not quadratic


def _planted(seed: int = 0, bases: int = 200, copies: int = 60):
    """Random Korean-syllable documents (30 words) plus, per chosen base, a *near duplicate* (one
    word replaced and one appended: Jaccard ~0.8) and a *related* document (10 words replaced:
    Jaccard ~0.3, same topic, not a duplicate). Truth is what was planted."""
    rng = np.random.default_rng(seed)
    syllables = [chr(c) for c in range(0xAC00, 0xAC00 + 2000)]

    def word():
        return "".join(rng.choice(syllables, size=rng.integers(2, 5)))

    def edit(words, n):
        words = list(words)
        for pos in rng.choice(len(words), size=n, replace=False):
            words[pos] = word()
        return words

    docs = {("base", i): " ".join(word() for _ in range(30)) for i in range(bases)}
    planted = set()
    for j in range(copies):
        words = docs[("base", j)].split()
        docs[("near", j)] = " ".join(edit(words, 1) + [word()])
        docs[("related", j)] = " ".join(edit(words, 10))
        planted.add(("near", j))
    return docs, planted


def test_near_dup_precision_and_recall_on_a_planted_set():
    threshold = 0.7
    docs, planted = _planted()
    for j in range(60):  # the planted set is what it claims to be
        assert neardup.jaccard(docs[("base", j)], docs[("near", j)]) >= 0.75
        assert neardup.jaccard(docs[("base", j)], docs[("related", j)]) <= 0.5
    predicted = neardup.find_near_duplicates(docs, threshold, seed=0)
    hits = len(set(predicted) & planted)
    precision, recall = hits / max(len(predicted), 1), hits / len(planted)
    print(f"near-dup planted set: {len(planted)} planted, {len(predicted)} dropped, precision {precision:.3f}, recall {recall:.3f}")
    assert precision >= 0.95 and recall >= 0.9, (precision, recall)
    assert all(predicted[k] == ("base", k[1]) for k in set(predicted) & planted)  # the base survives
