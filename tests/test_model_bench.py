"""benchmarks.step_bench: the step comparison behind benchmarks/pretrain.py, on a tiny model (no timing asserted)."""

from __future__ import annotations

import dataclasses

import torch

from benchmarks.step_bench import compare, matmul_share, step_profile, top_ops
from kolectra.model import presets


class _Step:
    def __init__(self, fn):
        self.fn = fn

    def step(self) -> float:
        self.fn()
        return 0.0


def test_matmul_share_tells_matrix_products_from_the_rest():
    a = torch.randn(256, 256)
    only_mm = step_profile(_Step(lambda: [a @ a for _ in range(4)]))
    no_mm = step_profile(_Step(lambda: [torch.exp(a) + 1.0 for _ in range(4)]))
    assert matmul_share(only_mm) > 0.8
    assert matmul_share(no_mm) == 0.0
    assert abs(sum(no_mm.values()) - 1.0) < 1e-6
    assert set(top_ops(no_mm)) >= {"aten::exp", "aten::add"} and "aten::mm" not in top_ops(only_mm)


def test_compare_times_both_steps_and_splits_the_cpu_step():
    m = dataclasses.replace(presets.tiny().model, vocab_size=400)
    r = compare(m, seq_len=32, batch_size=2, rounds=2, warmup=1)
    assert set(r["seconds_per_step"]) == {"kolectra", "naive_hf"}
    assert all(len(ts) == 2 and min(ts) > 0 for ts in r["samples"].values())
    assert set(r["minor_faults_per_step"]) == {"kolectra", "naive_hf"}
    assert all(f >= 0 for f in r["minor_faults_per_step"].values())
    assert r["speedup"] == r["seconds_per_step"]["naive_hf"] / r["seconds_per_step"]["kolectra"]
    q1, q2, q3 = r["speedup_per_round_quartiles"]
    assert 0 < q1 <= q2 <= q3
    shares = r["matmul_share"]
    assert 0.0 < shares["kolectra"] < 1.0 and 0.0 < shares["naive_hf"] < 1.0
    # if everything but its matmuls were free, kolectra's step could only get faster
    assert r["speedup_ceiling"] >= r["speedup"]
    assert r["flops_per_step"] > 0
    assert "aten::mm" not in r["top_other_ops"]["kolectra"] and len(r["top_other_ops"]["naive_hf"]) == 8
