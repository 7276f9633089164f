"""The GPU's speed settings (issue 30): MFU against a known GPU's datasheet peak, ``train.compile``
with torch.compile's ``reduce-overhead`` mode (CUDA graphs) checked up front, and the step wrapper
that marks each call as a new CUDA-graph iteration. What needs a GPU itself was measured on an
H200 (docs/benchmarks.md, "CUDA"); these run on the CPU."""

from __future__ import annotations

import pytest
import torch

from kolectra.core.config import ConfigError, override, to_dict
from kolectra.model import checkpoint, presets, train
from kolectra.model.device import CudaDevice, Device, compiled, gpu_peak_tflops
from kolectra.pipeline.store.request import Request


@pytest.mark.parametrize("name, bf16, peak", [
    ("NVIDIA H200", True, 989.0), ("NVIDIA H200", False, 494.0), ("NVIDIA H200 NVL", True, 835.0),
    ("NVIDIA GH200 480GB", True, 989.0), ("NVIDIA H100 80GB HBM3", True, 989.0), ("NVIDIA H100 PCIe", True, 756.0),
    ("NVIDIA H100 PCIE", False, 378.0), ("NVIDIA H100 NVL", False, 417.0), ("NVIDIA A100-SXM4-80GB", True, 312.0),
    ("NVIDIA A100 80GB PCIe", False, 156.0), ("NVIDIA L40S", True, 362.0), ("NVIDIA L40", True, 181.0),
    ("NVIDIA L4", True, 121.0),
    # not the GPU its name contains: a small workstation card, and a MIG slice of an A100
    ("NVIDIA RTX A1000", True, 0.0), ("NVIDIA RTX A1000 Laptop GPU", True, 0.0),
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", True, 0.0), ("Tesla T4", True, 0.0), ("", True, 0.0)])
def test_a_known_gpu_has_its_datasheet_peak(name, bf16, peak):
    # whole words, the more specific first: an H100 PCIe is not rated as an SXM part, an L40 not as an L4
    assert gpu_peak_tflops(name, bf16) == peak


@pytest.mark.parametrize("sets, says", [
    (["train.compile_mode=max-autotune"], "train.compile_mode: expected one of"),
    (["train.device=cuda", "train.compile=false", "train.compile_mode=reduce-overhead"],
     "leave train.compile at auto or set it to true"),
    (["train.compile=true", "train.compile_mode=reduce-overhead"], "needs train.device=cuda, not 'cpu'"),
    (["train.device=cuda", "train.compile=true", "train.compile_mode=reduce-overhead", "train.grad_accum=2"],
     "needs train.grad_accum=1, got 2"),
    # torch.compile's Inductor cannot lower XLA tensors (an InductorError deep in its stack, seen with
    # torch-xla 2.9 on PJRT_DEVICE=CPU): torch-xla compiles the step itself
    (["train.device=xla", "train.compile=true"], "on xla, torch-xla already compiles the step"),
])
def test_compile_mode_is_checked_before_anything_runs(sets, says):
    with pytest.raises(ConfigError, match=says):
        override(presets.small(), sets).validate()


def test_the_modes_that_can_run_pass():
    override(presets.small(), ["train.compile=true"]).validate()
    override(presets.small(), ["train.device=cuda", "train.compile=true", "train.compile_mode=reduce-overhead"]).validate()


def test_compile_mode_leaves_the_request_alone():
    # where and how the step runs, not what it trains: the same artifact id, and a run resumes with
    # or without CUDA graphs (a learning-rate change is still a difference)
    eager = to_dict(override(presets.small(), ["train.device=cuda"]))
    graphs = to_dict(override(presets.small(), ["train.device=cuda", "train.compile=true",
                                               "train.compile_mode=reduce-overhead"]))
    assert checkpoint.differences(eager, graphs) == []
    assert checkpoint.differences(eager, {**graphs, "train": {**graphs["train"], "lr": 1e-3}}) != []
    base = dict(kind="checkpoint", name="p", stage_version=1, operational=checkpoint.OPERATIONAL)
    assert Request(config=eager, **base).id() == Request(config=graphs, **base).id()


def test_the_loop_compiles_its_step_in_the_configured_mode(tmp_path, monkeypatch, capsys):
    # The plumbing from train.compile to the step the loop calls, and what the run says. Compiling
    # for real takes over a minute on a CPU (and CUDA graphs need a GPU: docs/benchmarks.md, "CUDA"),
    # so the recorder hands the loop the eager step it was given.
    from tests.model_support import build_examples, build_tokenizer

    asked = []
    monkeypatch.setattr(train, "compiled", lambda step_fn, mode: (asked.append(mode), step_fn)[1])
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=16, seq_len=32)
    cfg = override(presets.tiny(), ["train.steps=2", "train.batch_size=8", "train.warmup_steps=1",
                                   "train.cpu_threads=1", "train.compile=true"])
    train.pretrain(cfg, examples, tok, tmp_path / "out")
    err = capsys.readouterr().err
    assert asked == ["default"]
    assert "compiling the training step (torch.compile, mode default" in err
    assert "step 1 took" in err and "(with compilation)" in err
    assert "waits on launching" not in err  # the GPU's note: not on a CPU


def test_reduce_overhead_marks_every_call_as_a_new_iteration(monkeypatch):
    marks = []
    real = torch.compiler.cudagraph_mark_step_begin
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: (marks.append(len(marks)), real())[1])

    def step(x):
        return (x * 2).sum()

    fn = compiled(step, "reduce-overhead")
    assert [float(fn(torch.ones(3))) for _ in range(3)] == [6.0, 6.0, 6.0]
    assert marks == [0, 1, 2]
    marks.clear()
    assert float(compiled(step, "default")(torch.ones(2))) == 4.0 and marks == []


def test_only_the_gpu_suggests_compiling():
    cpu = Device()
    try:
        assert cpu.speed_note(compiled=False) is None
    finally:
        cpu.close()
    gpu = object.__new__(CudaDevice)  # its methods, without a GPU to open
    note = gpu.speed_note(compiled=False)
    assert "train.compile=auto (the default)" in note and "with train.grad_accum=1" in note
    assert gpu.speed_note(compiled=True) is None
