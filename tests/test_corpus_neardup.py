"""MinHash-LSH near-duplicate helpers (corpus/neardup.py); the Beam step runs in test_corpus_pipeline."""

import numpy as np
import pytest

from corpus import neardup

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
