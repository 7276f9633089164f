"""The pretraining loader: shards read by row, seeded epochs, shards dealt to ranks, exact resume, examples
that change under a run refused."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import threading
import time

import numpy as np
import pytest

from kolectra.corpus.examples_format import arrow_bytes
from kolectra.model import shard_order
from kolectra.model.data import ExampleLoader, ExamplesError, read_index
from tests.model_support import write_examples


def _write(root, n=103, L=16, shard=25, vocab=500, legacy_npy=False):
    """An examples artifact whose row i starts [CLS] i+5 ... so every example is recognisable; a
    second sequence [CLS] 8 8 [SEP] follows in the same row (doc_ids 1 then 2)."""
    ids = np.zeros((n, L), np.uint16)
    ids[:, 0], ids[:, 1], ids[:, 2:6] = 2, np.arange(n) + 5, 7
    ids[:, 6] = 3
    ids[:, 7:11] = [2, 8, 8, 3]
    docs = np.zeros((n, L), np.uint8)
    docs[:, :7], docs[:, 7:11] = 1, 2
    write_examples(root, ids, np.zeros((n, L), np.uint8), vocab, shard, docs, legacy_npy=legacy_npy)
    return root


def _rows(batch):
    return (batch["input_ids"][:, 1] - 5).tolist()


def test_batches_fixed_shape_cover_epoch_without_repeats(tmp_path):
    loader = ExampleLoader(_write(tmp_path), batch_size=8, seed=1)
    assert loader.batches_per_epoch == 103 // 8
    seen = []
    for _ in range(loader.batches_per_epoch):
        b = next(loader)
        assert b["input_ids"].shape == b["token_type_ids"].shape == b["doc_ids"].shape == (8, 16)
        assert b["input_ids"].dtype == b["doc_ids"].dtype == np.int64
        assert (b["doc_ids"][:, :11] == [1] * 7 + [2] * 4).all() and not b["doc_ids"][:, 11:].any()
        seen += _rows(b)
    assert len(set(seen)) == len(seen) == 96  # ragged tail (7 examples) dropped
    nxt = _rows(next(loader))
    assert loader.epoch == 1 and nxt != seen[:8]  # a new permutation for the next epoch


@pytest.mark.parametrize("prefetch", [0, 4])
def test_resume_after_40_batches_and_across_epoch_boundary(tmp_path, prefetch):
    root = _write(tmp_path)
    a = ExampleLoader(root, batch_size=8, seed=3, prefetch=prefetch)
    for _ in range(40):  # 40 batches = 3 epochs of 12 + 4
        next(a)
    state = json.loads(json.dumps(a.state_dict()))  # survives JSON
    assert (state["epoch"], state["batch_in_epoch"]) == (3, 4)  # what was handed out, not what was read ahead
    want = [next(a) for _ in range(15)]  # runs over the next epoch boundary
    b = ExampleLoader(root, batch_size=8, seed=3, prefetch=4 - prefetch)  # prefetch does not change the batches
    b.load_state_dict(state)
    got = [next(b) for _ in range(15)]
    for x, y in zip(want, got):
        assert np.array_equal(x["input_ids"], y["input_ids"]) and np.array_equal(x["token_type_ids"], y["token_type_ids"])
    assert [_rows(x) for x in want[8:]] != [_rows(x) for x in want[:7]]  # a new permutation after the boundary


def test_resume_saved_exactly_at_an_epoch_boundary_and_reloaded_in_place(tmp_path):
    root = _write(tmp_path)
    a = ExampleLoader(root, batch_size=8, seed=5)
    first_epoch = [_rows(next(a)) for _ in range(12)]
    state = a.state_dict()
    assert (state["epoch"], state["batch_in_epoch"]) == (1, 0)
    want = [_rows(next(a)) for _ in range(5)]
    a.load_state_dict(state)  # the same loader, rewound: read-ahead batches are dropped
    assert [_rows(next(a)) for _ in range(5)] == want
    a.load_state_dict({**state, "epoch": 0})
    assert [_rows(next(a)) for _ in range(12)] == first_epoch


def test_resume_with_two_ranks(tmp_path):
    root = _write(tmp_path, n=400)
    ranks = [ExampleLoader(root, 4, seed=7, rank=r, world_size=2) for r in range(2)]
    for _ in range(40):  # an epoch is 400 // (2 x 4) = 50 batches
        for r in ranks:
            next(r)
    states = [json.loads(json.dumps(r.state_dict())) for r in ranks]
    want = [[_rows(next(r)) for _ in range(20)] for r in ranks]  # crosses the epoch boundary at 50
    for r in range(2):
        again = ExampleLoader(root, 4, seed=7, rank=r, world_size=2)
        again.load_state_dict(states[r])
        assert [_rows(next(again)) for _ in range(20)] == want[r]
    for x0, x1 in zip(*want):
        assert not set(x0) & set(x1)
    with pytest.raises(ValueError, match="world_size"):
        ExampleLoader(root, 4, seed=7).load_state_dict(states[0])


def test_prefetch_thread_is_bounded_and_stops(tmp_path):
    root = _write(tmp_path)
    before = {t for t in threading.enumerate() if t.name == "kolectra-prefetch"}
    loader = ExampleLoader(root, 8, seed=0, prefetch=2)
    next(loader)
    time.sleep(0.2)
    assert loader._prefetcher.queue.qsize() <= 2  # read ahead, but only so far
    loader.close()
    dropped = ExampleLoader(root, 8, seed=0, prefetch=2)
    next(dropped)
    del dropped
    gc.collect()
    deadline = time.monotonic() + 5
    while {t for t in threading.enumerate() if t.name == "kolectra-prefetch"} - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not {t for t in threading.enumerate() if t.name == "kolectra-prefetch"} - before


def test_order_depends_on_seed(tmp_path):
    root = _write(tmp_path)
    assert _rows(next(ExampleLoader(root, 8, seed=0))) != _rows(next(ExampleLoader(root, 8, seed=1)))


def _shards_of(rows, shard=25):
    return {r // shard for r in rows}


def test_ranks_read_disjoint_rows_from_their_own_shards_only(tmp_path):
    """16 shards of 25 rows, 2 ranks: each reads 8 whole shards (the deal cuts at a shard's edge
    here), opens only those (the other rank's files may be absent, as on a store root's host), and
    together they see every row once an epoch; the same seed and world size give the same batches."""
    root = _write(tmp_path, n=400)
    files = [shard_order.rank_files(read_index(root).shards, 2, r, 2) for r in range(2)]
    assert files[0] & files[1] == {"index.json"} and len(files[0]) == len(files[1]) == 9
    for f in files[1] - {"index.json"}:  # rank 1's shards: rank 0's machine never fetched them
        (root / f).rename(tmp_path / f.replace("/", "-"))
    r0 = ExampleLoader(root, 4, seed=2, rank=0, world_size=2)
    assert r0.batches_per_epoch == 50 and set(r0.files) == files[0] - {"index.json"}
    epoch0 = [x for _ in range(50) for x in _rows(next(r0))]
    for f in files[1] - {"index.json"}:
        (tmp_path / f.replace("/", "-")).rename(root / f)
    r1 = ExampleLoader(root, 4, seed=2, rank=1, world_size=2)
    epoch1 = [x for _ in range(50) for x in _rows(next(r1))]
    assert sorted(epoch0 + epoch1) == list(range(400))  # disjoint, and every row once
    assert not _shards_of(epoch0) & _shards_of(epoch1) and len(_shards_of(epoch0)) == 8
    assert _rows(next(r0)) != epoch0[:4]  # the next epoch: a new order of the same rows
    again = ExampleLoader(root, 4, seed=2, rank=0, world_size=2)
    assert [x for _ in range(50) for x in _rows(next(again))] == epoch0


def test_fewer_shards_than_ranks_share_shards_by_row_ranges_and_say_so(tmp_path):
    root = _write(tmp_path)  # 103 rows in 5 shards
    shards = read_index(root).shards
    loaders = [ExampleLoader(root, 1, seed=0, rank=r, world_size=8) for r in range(8)]
    seen = [[x for _ in range(12) for x in _rows(next(loader))] for loader in loaders]
    assert all(len(s) == 12 for s in seen) and len({x for s in seen for x in s}) == 96  # disjoint
    note = shard_order.deal_note(shards, 0, 8)
    assert "5 shard(s) are dealt to 8 ranks" in note and "--set shard_size=N" in note and "at least 8 shards" in note
    assert "fewer" not in shard_order.deal_note(shards, 0, 4)


def test_an_epoch_over_many_windows_covers_every_row_once(tmp_path, monkeypatch):
    """Blocks and windows small enough that one batch spans several windows: the epoch is still a
    permutation of the rank's rows, and any slice of it is the same rows as the whole read at once."""
    monkeypatch.setattr(shard_order, "BLOCK_ROWS", 3)
    monkeypatch.setattr(shard_order, "WINDOW_BLOCKS", 2)
    segments = shard_order.deal([25, 25, 25, 25, 3], 4, 2)[1]
    order = shard_order.RankOrder(segments, np.array([0, 25, 50, 75, 100, 103]), seed=4, rank=1)
    whole = order.positions(0, 0, order.rows)
    mine = {s0 + r for s, a, b in segments for s0 in [25 * s] for r in range(a, b)}
    assert order.rows == 52 and sorted(whole.tolist()) == sorted(mine)
    pieces = [order.positions(0, i, min(order.rows, i + 5)) for i in range(0, order.rows, 5)]
    assert np.array_equal(np.concatenate(pieces), whole)
    assert not np.array_equal(order.positions(1, 0, order.rows), whole)


def _manifest(root):
    """A manifest.json over ``root``'s files, as the store writes it (path, bytes, sha256)."""
    files = [{"path": p.relative_to(root).as_posix(), "bytes": p.stat().st_size,
              "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in sorted(root.rglob("*")) if p.is_file()]
    (root / "manifest.json").write_text(json.dumps({"files": files}))


def _rewrite_in_place(path):
    """The shard's rows in reverse order, written over the same file (same inode, same size): every
    id stays valid, so only the change itself can tell."""
    import pyarrow as pa

    batch = pa.ipc.open_file(pa.memory_map(str(path))).get_batch(0)
    cols = [np.stack(batch.column(k).to_numpy(zero_copy_only=False))[::-1] for k in
            ("input_ids", "token_type_ids", "doc_ids")]
    body = arrow_bytes(*cols)
    assert len(body) == path.stat().st_size
    time.sleep(0.01)  # past the clock tick of the file's own writing
    with open(path, "r+b") as f:
        f.write(body)


def test_a_shard_rewritten_in_place_is_not_read_and_a_changed_one_not_opened(tmp_path):
    root = _write(tmp_path / "a")
    _manifest(root)
    loader = ExampleLoader(root, 8, seed=0, prefetch=0)
    first = _rows(next(loader))
    _rewrite_in_place(root / "data/shard-00001.arrow")
    with pytest.raises(ExamplesError, match=r"shard-00001.arrow: rewritten in place while training read it "
                                            r"\(the same size.*changed under this run"):
        for _ in range(12):
            next(loader)
    with pytest.raises(ExamplesError, match="shard-00001.arrow: rewritten in place"):
        loader.check_unchanged()  # the trainer's look before the export
    assert first  # rows read before the change were the original ones
    with pytest.raises(ExamplesError, match=r"shard-00001.arrow: sha256 differs from the artifact's manifest"):
        ExampleLoader(root, 8, seed=0)  # opened after the change: the hash against the manifest
    (root / "index.json").write_text((root / "index.json").read_text() + " ")
    with pytest.raises(ExamplesError, match="index.json: sha256 differs"):
        ExampleLoader(root, 8, seed=0)

    root = _write(tmp_path / "b")  # a copy of the same bytes renamed over the name (another inode) is seen too
    loader = ExampleLoader(root, 8, seed=0, prefetch=0)
    (root / "copy").write_bytes((root / "data/shard-00002.arrow").read_bytes())
    os.replace(root / "copy", root / "data/shard-00002.arrow")
    with pytest.raises(ExamplesError, match="shard-00002.arrow: replaced while training read it"):
        loader.check_unchanged()


def test_a_shard_rewritten_mid_run_fails_the_stage_and_nothing_is_published(tmp_path, monkeypatch, capsys):
    """The reported hole: a shard rewritten in place (same size, valid ids) during pretraining was
    trained on and published with exit 0."""
    from kolectra.model import objectives
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.artifacts import Store
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    store = Store(tmp_path / "root")
    _, _, ex = small_chain(store)
    real, calls = objectives.STEPS["electra"], []

    def rewriting(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            for shard in sorted((ex.path / "data").iterdir()):
                _rewrite_in_place(shard)
        return real(*args, **kwargs)

    monkeypatch.setitem(objectives.STEPS, "electra", rewriting)
    with pytest.raises(ExamplesError, match=r"data/shard-.*: rewritten in place while training read it"):
        stages.pretrain(store, str(ex.path), preset="tiny", sets=SETS)
    assert store.list("checkpoint") == [] and len(calls) < 12


def test_resume_rejects_different_layout(tmp_path):
    root = _write(tmp_path)
    state = ExampleLoader(root, 8, seed=0).state_dict()
    with pytest.raises(ValueError, match="batch_size"):
        ExampleLoader(root, 4, seed=0).load_state_dict(state)
    # another seed is another order: the same position would name other batches
    with pytest.raises(ValueError, match="seed=0, this loader has seed=1"):
        ExampleLoader(root, 8, seed=1).load_state_dict(state)


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
    z = np.zeros((25, 8), np.uint8)
    (root / "data/shard-00001.arrow").write_bytes(arrow_bytes(z.astype(np.uint16), z, z))
    with pytest.raises(ExamplesError, match=r"shard-00001.arrow: column 'input_ids': shape \(25, 8\)"):
        ExampleLoader(root, 8, seed=0)
    (root / "data/shard-00001.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(ExamplesError, match=r"shard-00001.arrow: not a readable Arrow IPC file"):
        ExampleLoader(root, 8, seed=0)
    root = _write(tmp_path / "b1", legacy_npy=True)
    np.save(root / "data/shard-00001.input_ids.npy", np.zeros((25, 8), np.uint16))
    with pytest.raises(ExamplesError, match=r"shard-00001.input_ids.npy: shape \(25, 8\)"):
        ExampleLoader(root, 8, seed=0)
    root = _write(tmp_path / "f")
    index = json.loads((root / "index.json").read_text())
    (root / "index.json").write_text(json.dumps({**index, "format": 3}))
    with pytest.raises(ExamplesError, match=r"format 3 is not supported .*rebuild it with `kolectra examples`"):
        read_index(root)
    # a real token outside every sequence would attend to nothing: refused at the batch
    n, L = 103, 16
    ids = np.zeros((n, L), np.uint16)
    ids[:, :4] = [2, 9, 9, 3]
    docs = (ids != 0).astype(np.uint8)
    docs[50, 2] = 0
    root = write_examples(tmp_path / "g", ids, np.zeros((n, L), np.uint8), 500, 25, docs)
    with pytest.raises(ExamplesError, match=r"shard-00002.arrow: row 0: doc_ids is 0 exactly where input_ids is "
                                            r"padding \(0\), not so at column 2"):
        next(ExampleLoader(root, 103, seed=0))

    root = _write(tmp_path / "c", vocab=50)  # row ids reach 5 + 102 > 50
    loader = ExampleLoader(root, 103, seed=0)
    with pytest.raises(ExamplesError, match="outside the vocabulary of 50"):
        next(loader)
    # with prefetch, good batches come first and the error arrives at the batch it belongs to
    root = _write(tmp_path / "e", vocab=5 + 96)  # rows 96.. are bad; the first epoch order decides when

    def first_bad(seed):
        segments = shard_order.deal([25, 25, 25, 25, 3], seed, 1)[0]
        order = shard_order.RankOrder(segments, np.array([0, 25, 50, 75, 100, 103]), seed, 0).positions(0, 0, 96)
        order = order.reshape(12, 8)
        return int(np.flatnonzero((order >= 96).any(axis=1))[0])

    seed = next(s for s in range(100) if first_bad(s) >= 3)  # a seed whose first bad batch comes late
    first_bad = first_bad(seed)
    loader = ExampleLoader(root, 8, seed=seed, prefetch=3)
    for _ in range(first_bad):
        next(loader)
    with pytest.raises(ExamplesError, match="outside the vocabulary"):
        next(loader)
    assert loader.state_dict()["batch_in_epoch"] == first_bad

    with pytest.raises(ExamplesError, match="cannot fill one batch"):
        ExampleLoader(_write(tmp_path / "d", n=5), 8, seed=0)


def test_format_1_artifacts_still_load_without_doc_ids(tmp_path):
    """Artifacts written before packing (``.npy`` pairs, index format 1): the same rows, and no
    ``doc_ids``, so the step keeps its one-sequence-a-row attention for them."""
    new, old = _write(tmp_path / "new"), _write(tmp_path / "old", legacy_npy=True)
    assert read_index(old).format == 1 and read_index(new).format == 2
    a, b = next(ExampleLoader(new, 8, seed=4)), next(ExampleLoader(old, 8, seed=4))
    assert set(b) == {"input_ids", "token_type_ids"} and "doc_ids" in a
    assert np.array_equal(a["input_ids"], b["input_ids"]) and np.array_equal(a["token_type_ids"], b["token_type_ids"])
