"""Data-parallel pretraining over two CPU processes (gloo): ranks stay in sync, rank 0 writes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket

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
