"""The pretraining loader: memory-mapped shards, seeded epochs, rank sharding, exact resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from model.data import ExampleLoader, ExamplesError, read_index


def _write(root, n=103, L=16, shard=25, vocab=500):
    """An examples artifact whose row i starts [CLS] i+5 ... so every example is recognisable."""
    (root / "data").mkdir(parents=True)
    ids = np.zeros((n, L), np.uint16)
    ids[:, 0], ids[:, 1], ids[:, 2:6] = 2, np.arange(n) + 5, 7
    ids[:, 6] = 3
    types = np.zeros((n, L), np.uint8)
    shards = []
    for s, a in enumerate(range(0, n, shard)):
        b = min(n, a + shard)
        names = {k: f"data/shard-{s:05d}.{k}.npy" for k in ("input_ids", "token_type_ids")}
        np.save(root / names["input_ids"], ids[a:b])
        np.save(root / names["token_type_ids"], types[a:b])
        shards.append({**names, "examples": b - a})
    index = {"format": 1, "max_seq_length": L, "dtype": "uint16", "vocab_size": vocab, "pad_id": 0, "cls_id": 2,
             "sep_id": 3, "mask_id": 4, "examples": n, "shards": shards}
    (root / "index.json").write_text(json.dumps(index))
    return root


def _rows(batch):
    return (batch["input_ids"][:, 1] - 5).tolist()


def test_batches_fixed_shape_cover_epoch_without_repeats(tmp_path):
    loader = ExampleLoader(_write(tmp_path), batch_size=8, seed=1)
    assert loader.batches_per_epoch == 103 // 8
    seen = []
    for _ in range(loader.batches_per_epoch):
        b = next(loader)
        assert b["input_ids"].shape == b["token_type_ids"].shape == (8, 16)
        assert b["input_ids"].dtype == np.int64
        seen += _rows(b)
    assert len(set(seen)) == len(seen) == 96  # ragged tail (7 examples) dropped
    nxt = _rows(next(loader))
    assert loader.epoch == 1 and nxt != seen[:8]  # a new permutation for the next epoch


def test_resume_after_40_batches_and_across_epoch_boundary(tmp_path):
    root = _write(tmp_path)
    a = ExampleLoader(root, batch_size=8, seed=3)
    for _ in range(40):  # 40 batches = 3 epochs of 12 + 4
        next(a)
    state = json.loads(json.dumps(a.state_dict()))  # survives JSON
    want = [_rows(next(a)) for _ in range(15)]  # runs over the next epoch boundary
    b = ExampleLoader(root, batch_size=8, seed=3)
    b.load_state_dict(state)
    assert [_rows(next(b)) for _ in range(15)] == want


def test_order_depends_on_seed(tmp_path):
    root = _write(tmp_path)
    assert _rows(next(ExampleLoader(root, 8, seed=0))) != _rows(next(ExampleLoader(root, 8, seed=1)))


def test_two_ranks_are_disjoint_and_cover_the_single_process_order(tmp_path):
    root = _write(tmp_path)
    r0, r1 = ExampleLoader(root, 4, seed=2, rank=0, world_size=2), ExampleLoader(root, 4, seed=2, rank=1, world_size=2)
    single = ExampleLoader(root, 8, seed=2)
    for _ in range(12):
        x0, x1, s = _rows(next(r0)), _rows(next(r1)), _rows(next(single))
        assert not set(x0) & set(x1)
        assert sorted(x0 + x1) == sorted(s)


def test_resume_rejects_different_layout(tmp_path):
    root = _write(tmp_path)
    state = ExampleLoader(root, 8, seed=0).state_dict()
    with pytest.raises(ValueError, match="batch_size"):
        ExampleLoader(root, 4, seed=0).load_state_dict(state)


def test_bad_artifacts_give_clear_errors(tmp_path):
    with pytest.raises(ExamplesError, match="index.json: missing"):
        read_index(tmp_path)
    root = _write(tmp_path / "a")
    index = json.loads((root / "index.json").read_text())
    index["examples"] = 999
    (root / "index.json").write_text(json.dumps(index))
    with pytest.raises(ExamplesError, match="shards hold 103 examples"):
        read_index(root)

    root = _write(tmp_path / "b")
    np.save(root / "data/shard-00001.input_ids.npy", np.zeros((25, 8), np.uint16))
    with pytest.raises(ExamplesError, match=r"shard-00001.input_ids.npy: shape \(25, 8\)"):
        ExampleLoader(root, 8, seed=0)

    root = _write(tmp_path / "c", vocab=50)  # row ids reach 5 + 102 > 50
    loader = ExampleLoader(root, 103, seed=0)
    with pytest.raises(ExamplesError, match="outside the vocabulary of 50"):
        next(loader)

    with pytest.raises(ExamplesError, match="cannot fill one batch"):
        ExampleLoader(_write(tmp_path / "d", n=5), 8, seed=0)
