"""The GPU's speed settings (issue 30): MFU against a known GPU's datasheet peak, ``train.compile``
with torch.compile's ``reduce-overhead`` mode (CUDA graphs) checked up front, and the step wrapper
that marks each call as a new CUDA-graph iteration. What needs a GPU itself was measured on an
H200 (docs/benchmarks.md, "CUDA"); these run on the CPU."""

from __future__ import annotations

import pytest
import torch

from kolectra.core.config import ConfigError, override
from kolectra.model import checkpoint, config, train
from kolectra.model.device import CudaDevice, Device, gpu_peak_tflops


@pytest.mark.parametrize("name, bf16, peak", [
    ("NVIDIA H200", True, 989.0), ("NVIDIA H200", False, 494.0), ("NVIDIA H100 80GB HBM3", True, 989.0),
    ("NVIDIA H100 PCIe", True, 756.0), ("NVIDIA H100 NVL", False, 417.0), ("NVIDIA A100-SXM4-80GB", True, 312.0),
    ("NVIDIA L40S", True, 362.0), ("NVIDIA L4", True, 121.0), ("Tesla T4", True, 0.0), ("", True, 0.0)])
def test_a_known_gpu_has_its_datasheet_peak(name, bf16, peak):
    # the more specific name wins: an H100 PCIe is not rated as an SXM part, an L40S not as an L4
    assert gpu_peak_tflops(name, bf16) == peak


@pytest.mark.parametrize("sets, says", [
    (["train.compile_mode=max-autotune"], "train.compile_mode: expected one of"),
    (["train.device=cuda", "train.compile_mode=reduce-overhead"], "set train.compile=true too"),
    (["train.compile=true", "train.compile_mode=reduce-overhead"], "needs train.device=cuda, not 'cpu'"),
    (["train.device=cuda", "train.compile=true", "train.compile_mode=reduce-overhead", "train.grad_accum=2"],
     "needs train.grad_accum=1, got 2"),
])
def test_compile_mode_is_checked_before_anything_runs(sets, says):
    with pytest.raises(ConfigError, match=says):
        override(config.small(), sets).validate()


def test_the_modes_that_can_run_pass():
    override(config.small(), ["train.compile=true"]).validate()
    override(config.small(), ["train.device=cuda", "train.compile=true", "train.compile_mode=reduce-overhead"]).validate()


def test_compile_mode_leaves_the_request_alone():
    # where and how the step runs, not what it trains: a run resumes with or without CUDA graphs
    assert "train.compile_mode" in checkpoint.OPERATIONAL and "train.compile" in checkpoint.OPERATIONAL


def test_reduce_overhead_marks_every_call_as_a_new_iteration(monkeypatch):
    marks = []
    real = torch.compiler.cudagraph_mark_step_begin
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: (marks.append(len(marks)), real())[1])

    def step(x):
        return (x * 2).sum()

    fn = train.compiled(step, "reduce-overhead")
    assert [float(fn(torch.ones(3))) for _ in range(3)] == [6.0, 6.0, 6.0]
    assert marks == [0, 1, 2]
    marks.clear()
    assert float(train.compiled(step, "default")(torch.ones(2))) == 4.0 and marks == []


def test_only_the_gpu_suggests_compiling():
    cpu = Device()
    try:
        assert cpu.speed_note(compiled=False) is None
    finally:
        cpu.close()
    gpu = object.__new__(CudaDevice)  # its methods, without a GPU to open
    assert "train.compile=true" in gpu.speed_note(compiled=False) and "reduce-overhead" in gpu.speed_note(False)
    assert gpu.speed_note(compiled=True) is None
