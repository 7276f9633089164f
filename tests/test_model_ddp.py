"""Data-parallel pretraining over two CPU processes (gloo): ranks stay in sync, rank 0 writes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
from pathlib import Path

import pytest
import torch.multiprocessing as mp

from kolectra.model import config, train
from tests.model_support import build_examples, build_tokenizer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, examples, tok, out, report, sharing: str = "es") -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    built = []

    class Recorded(train.ElectraPair):  # keeps a handle on the trained model to compare ranks
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            built.append(self)

    train.ElectraPair = Recorded
    cfg = config.tiny()
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=30, batch_size=8, warmup_steps=3,
                                                             log_every=10, lr=3e-3, cpu_threads=1),
                              model=dataclasses.replace(cfg.model, embedding_sharing=sharing))
    result = train.pretrain(cfg, examples, tok, out)
    digest = hashlib.sha256()
    for name, p in sorted(built[0].state_dict().items()):
        digest.update(name.encode() + p.detach().numpy().tobytes())
    (report / f"rank-{rank}.json").write_text(json.dumps({"weights": digest.hexdigest(), "stats": result.stats}))


@pytest.mark.parametrize("sharing", ["es", "gdes"])
def test_two_ranks_train_in_sync(tmp_path, sharing):
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=100, seq_len=32)
    out, report = tmp_path / "out", tmp_path / "report"
    out.mkdir()
    report.mkdir()
    mp.start_processes(_worker, args=(2, _free_port(), examples, tok, out, report, sharing), nprocs=2, join=True,
                       start_method="spawn")
    r0, r1 = (json.loads((report / f"rank-{r}.json").read_text()) for r in (0, 1))
    assert r0["weights"] == r1["weights"]  # gradients were averaged: identical updates everywhere
    assert r0["stats"]["ranks"] == 2 and r0["stats"]["final"] == r1["stats"]["final"]  # metrics averaged over ranks
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [10, 20, 30]  # written once, by rank 0
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert (out / "hf" / "discriminator" / "model.safetensors").is_file()


def _stage_rank(rank: int, world: int, port: int, root: str, report: str) -> None:
    """A rank as ``torchrun -m kolectra.pipeline.cli pretrain`` starts it: the whole stage, store included."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.artifacts import Store
    from tests.test_faults_pretrain import SETS

    store = Store(root)
    art = stages.pretrain(store, str(store.list("examples")[0].path), preset="tiny", sets=SETS)
    (Path(report) / f"rank-{rank}").write_text(str(art.path))


def test_every_rank_runs_the_stage_and_rank_0_alone_publishes(tmp_path):
    """Each rank runs the same build on one root: rank 0 reserves and publishes it, the others train
    in its run directory and return what it published (no rank waits on another's request lock)."""
    from kolectra.pipeline.store.artifacts import Store
    from tests.model_support import small_chain

    store = Store(tmp_path / "root")
    small_chain(store)
    report = tmp_path / "report"
    report.mkdir()
    mp.start_processes(_stage_rank, args=(2, _free_port(), str(store.root), str(report)), nprocs=2, join=True,
                       start_method="spawn")
    [art] = store.list("checkpoint")
    assert {(report / f"rank-{r}").read_text() for r in (0, 1)} == {str(art.path)}
    assert store.verify(art) == [] and art.manifest["stats"]["ranks"] == 2
    assert not any((store.root / ".work").iterdir())
