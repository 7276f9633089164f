"""The whole update recorded as one CUDA graph (``train.compile_mode=whole-step``, model/step_graph.py),
rehearsed on the CPU: the trainer's real wiring (``train.start``: rates on the device, capturable
AdamW, the update behind :class:`StepGraph`) with everything but the recording itself, which needs
a GPU (docs/benchmarks.md says what was measured there). The rehearsal's device is the CPU's with
one change: its ``whole_step`` runs the update through the graph's static inputs and outputs
without recording (``capture=False``), as the CUDA device's does with recording."""

from __future__ import annotations

import dataclasses
import json
import types

import pytest
import torch

from kolectra.core.config import ConfigError, override
from kolectra.core.errors import UserInputError
from kolectra.model import checkpoint, optim, presets, step_graph, train
from kolectra.model.device import CudaDevice, Device
from kolectra.model.step_graph import StepGraph
from tests.model_support import small_examples
from tests.test_model_loop_syncs import syncs  # noqa: F401 - the fixture: host reads between log steps

STEPS = 6


class Rehearsal(Device):
    """The CPU, with the CUDA device's whole-step wrapper minus the recording."""

    def whole_step(self, step):
        self.graph = StepGraph(step, capture=False)
        return self.graph


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return small_examples(tmp_path_factory.mktemp("inputs"))


def _cfg(whole: bool, **train_sets):
    cfg = presets.tiny()
    t = {"steps": STEPS, "batch_size": 8, "warmup_steps": 3, "log_every": 2, **train_sets}
    if whole:  # validate() keeps whole-step to CUDA: the rehearsal goes around it, as the device does
        t.update(compile=True, compile_mode="whole-step")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **t))


def _run(cfg, inputs, out, dev, monkeypatch, steps=range(STEPS), resume=False):
    # compiling for real takes minutes on a CPU: the loop gets the eager step it was given
    monkeypatch.setattr(train, "compiled", lambda step_fn, mode: step_fn)
    examples, tok = inputs
    out.mkdir(parents=True, exist_ok=True)
    run = train.start(cfg, train.read_inputs(cfg, examples, tok), examples, out, dev, resume=resume)
    train.train_loop(run, out, steps)
    run.log.close()
    run.loader.close()
    return run


def _lines(out):
    return [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]


def test_the_recorded_path_trains_as_the_loop_does(inputs, tmp_path, monkeypatch, capsys, syncs):  # noqa: F811
    plain = _run(_cfg(False), inputs, tmp_path / "plain", Device(), monkeypatch)
    dev = Rehearsal()
    whole = _run(_cfg(True), inputs, tmp_path / "whole", dev, monkeypatch)
    # nothing in the update, its static buffers or the loop around them reads a tensor on the host
    # between log steps (updates 3 and 5 here): a recorded update could hold no such read
    assert not syncs, f"{len(syncs)} host read(s) between log steps; the first:\n{syncs[0]}"
    assert "the whole update recorded as one CUDA graph after 3 updates" in capsys.readouterr().err
    # the wiring: rates on the device, capturable AdamW, every update through the static buffers
    groups = whole.optimizer.param_groups
    assert all(isinstance(g["lr"], torch.Tensor) and g["capturable"] for g in groups)
    assert dev.graph.calls == STEPS and len(dev.graph.inputs) == 1
    # the schedule reached the device's rates: the last update's (warm-up over, decaying to 0)
    scale = optim.lr_scale(STEPS - 1, 3, STEPS)
    assert [float(g["lr"]) for g in groups] == pytest.approx([g["base_lr"] * scale for g in groups], rel=1e-6)
    # the same update: the rates differ only by float32 rounding (a stale rate fails this at once)
    for p, q in zip(plain.params, whole.params):
        torch.testing.assert_close(p, q)
    a, b = _lines(tmp_path / "plain"), _lines(tmp_path / "whole")
    assert [ln["step"] for ln in b] == [2, 4, 6]
    for x, y in zip(a, b):
        for key in ("loss", "gen_loss", "disc_loss", "grad_norm", "disc_acc"):
            assert y[key] == pytest.approx(x[key], rel=1e-5), key


def test_the_static_inputs_and_outputs_are_the_same_tensors_every_call():
    seen = []

    def step(micro):
        seen.append(micro[0]["x"])
        return [{"sum": micro[0]["x"].sum()}], {"n": micro[0]["x"].float().mean()}

    graph = StepGraph(step, capture=False)
    first = graph([{"x": torch.arange(4)}])
    second = graph([{"x": torch.arange(4) * 10}])
    assert seen[0] is seen[1]  # the batch was copied into the first call's tensor
    assert first[0][0]["sum"] is second[0][0]["sum"] and float(second[0][0]["sum"]) == 60.0
    assert float(first[1]["n"]) == 15.0  # as a replayed graph's, the earlier outputs now hold the new values
    with pytest.raises(ValueError, match=r"shapes are fixed once recorded"):
        graph([{"x": torch.arange(5)}])
    with pytest.raises(ValueError, match=r"takes 1 micro-batches, got 2"):
        graph([{"x": torch.arange(4)}, {"x": torch.arange(4)}])


def test_a_run_resumes_across_the_recorded_and_the_plain_update(inputs, tmp_path, monkeypatch):
    # the placement flags and the rate's form are the run's own, whatever wrote the checkpoint
    for first, then in ((True, False), (False, True)):
        out = tmp_path / f"{first}-{then}"
        cfg = _cfg(first, save_every=3)
        _run(cfg, inputs, out, Rehearsal() if first else Device(), monkeypatch, steps=range(3))
        assert checkpoint.load_latest(out, 0) is not None
        run = _run(_cfg(then, save_every=3), inputs, out, Rehearsal() if then else Device(), monkeypatch,
                   steps=range(3, STEPS), resume=True)
        assert run.first_step == 3
        groups = run.optimizer.param_groups
        assert all(isinstance(g["lr"], torch.Tensor) == then and g["capturable"] == then for g in groups)
        state = run.optimizer.state[run.params[0]]
        assert float(state["step"]) == STEPS  # the counters came along and counted on
        assert [ln["step"] for ln in _lines(out)] == [2, 4, 6]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: recording would work")
def test_an_update_that_cannot_be_recorded_says_so_in_one_line():
    calls = []
    graph = StepGraph(lambda micro: calls.append(1) or {"x": micro[0]["x"] * 2}, capture=True, warmup=0)
    with pytest.raises(step_graph.RecordingFailed, match=r"^recording update 1 as one CUDA graph failed \(.*CUDA") as e:
        graph([{"x": torch.ones(2)}])
    assert "\n" not in str(e.value) and "train.compile_mode=reduce-overhead" in str(e.value)
    assert isinstance(e.value.__cause__, RuntimeError) and calls == []  # nothing ran as if recorded


@pytest.mark.parametrize("sets, says", [
    (["train.compile_mode=whole-step"], "needs train.device=cuda, not 'cpu'"),
    (["train.device=cuda", "train.compile_mode=whole-step", "train.bias_correction=false"],
     "use reduce-overhead with it"),
    (["train.device=cuda", "train.compile=false", "train.compile_mode=whole-step"], "leave train.compile at auto"),
])
def test_whole_step_is_checked_before_anything_runs(sets, says):
    with pytest.raises(ConfigError, match=says):
        override(presets.small(), sets).validate()


def test_whole_step_is_for_one_cuda_process():
    override(presets.small(), ["train.device=cuda", "train.compile_mode=whole-step", "train.grad_accum=2"]).validate()
    with pytest.raises(UserInputError, match="not on cpu"):
        Device().whole_step(lambda micro: micro)
    # CudaDevice needs a GPU to be built; its check reads only the number of ranks
    with pytest.raises(UserInputError, match="under torchrun use train.compile_mode=reduce-overhead"):
        CudaDevice.whole_step(types.SimpleNamespace(world_size=2), lambda micro: micro)
    assert step_graph.WARMUP_STEPS >= 2  # the compiled step's forward, then its backward's lazy compile
