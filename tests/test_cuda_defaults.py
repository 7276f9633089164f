"""Issue 45's launch-bound fixes that need no GPU to check: the step compiled (CUDA graphs) by default
on CUDA and eager on cpu and xla, chosen by the device (``Device.compile_choice``); the switch that
turns it off; and a step with no host sync in it (what CUDA graphs need: a step that reads a value
back, or branches on one, cannot be captured). The GPU's own figures: ``benchmarks/gpu.py``."""

from __future__ import annotations

import pytest
import torch

from kolectra.core.config import ConfigError, override, to_dict
from kolectra.model import config, objectives, presets, rtd, runtime, train
from kolectra.model.device import CudaDevice, Device
from kolectra.model.electra import ElectraPair
from kolectra.model.xla import XlaDevice
from kolectra.pipeline.configs import resolve


def policy(cls):
    """A device class's methods without opening its accelerator (no GPU or TPU here)."""
    return object.__new__(cls)


@pytest.mark.parametrize("cls, grad_accum, expect", [
    (Device, 1, None), (XlaDevice, 1, None), (CudaDevice, 1, "reduce-overhead"),
    # CUDA graphs replay into the same buffers: accumulating micro-steps compile without them
    (CudaDevice, 4, "default")])
def test_auto_is_each_devices_default(cls, grad_accum, expect):
    t = config.TrainConfig()
    assert (t.compile, t.compile_mode) == ("auto", "auto")
    assert policy(cls).compile_choice(t.compile, t.compile_mode, grad_accum) == expect


@pytest.mark.parametrize("compile, mode, cpu, cuda", [
    (False, "auto", None, None),  # the switch: eager everywhere
    (True, "auto", "default", "reduce-overhead"),
    (True, "default", "default", "default"),
    ("auto", "default", "default", "default"),  # a mode named compiles
])
def test_an_explicit_choice_wins(compile, mode, cpu, cuda):
    assert policy(Device).compile_choice(compile, mode) == cpu
    assert policy(CudaDevice).compile_choice(compile, mode) == cuda


def test_the_resolved_config_keeps_auto_and_the_switch_parses():
    # what --print-config and the manifest hold: "auto" on every device (the device decides when the
    # run starts; --print-config stays torch-free), false when the user turns it off
    for device in ("cpu", "cuda", "xla"):
        cfg, doc = resolve("pretrain", preset="small", sets=[f"train.device={device}"])
        assert doc["train"]["compile"] == "auto" and doc["train"]["compile_mode"] == "auto"
    cfg, doc = resolve("pretrain", preset="small", sets=["train.device=cuda", "train.compile=false"])
    assert cfg.train.compile is False and doc["train"]["compile"] is False
    assert override(presets.small(), ["train.compile=auto"]).train.compile == "auto"
    with pytest.raises(ConfigError, match="train.compile"):
        override(presets.small(), ["train.compile=sometimes"])
    # xla: auto is eager there and passes; only an explicit true is refused
    override(presets.small(), ["train.device=xla"]).validate()
    with pytest.raises(ConfigError, match="on xla, torch-xla already compiles"):
        override(presets.small(), ["train.device=xla", "train.compile=true"]).validate()
    # an old manifest's bool still reads back
    assert config.TrainConfig(**{**to_dict(presets.small().train), "compile": False}).compile is False


class CudaPolicyCpu(Device):
    """The CPU device with CUDA's compile policy: the loop's plumbing from the device's default to the
    step it runs, checked where no GPU is."""

    compile_default = CudaDevice.compile_default


def _run(tmp_path, monkeypatch, sets, name):
    from tests.model_support import build_examples, build_tokenizer

    asked = []
    # compiling for real takes over a minute on a CPU (CUDA graphs need a GPU): the recorder hands the
    # loop the eager step it was given
    monkeypatch.setattr(train, "compiled", lambda step_fn, mode: (asked.append(mode), step_fn)[1])
    monkeypatch.setattr(runtime, "resolve", lambda name, *a: CudaPolicyCpu(*a))
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=16, seq_len=32)
    cfg = override(presets.tiny(), ["train.steps=2", "train.batch_size=8", "train.warmup_steps=1",
                                   "train.cpu_threads=1", *sets])
    out = train.pretrain(cfg, examples, tok, tmp_path / name)
    return asked, out.compute["step"]


def test_the_device_default_compiles_and_the_switch_turns_it_off(tmp_path, monkeypatch, capsys):
    asked, step = _run(tmp_path, monkeypatch, [], "auto")
    err = capsys.readouterr().err
    assert asked == ["reduce-overhead"] and step == "compiled (reduce-overhead)"
    assert "mode reduce-overhead with CUDA graphs, cpu's default" in err
    assert "--set train.compile=false runs it eagerly" in err
    assert "step 1 took" in err and "(with compilation)" in err

    asked, step = _run(tmp_path, monkeypatch, ["train.compile=false"], "off")
    err = capsys.readouterr().err
    assert asked == [] and step == "eager"
    assert "compiling" not in err and "(with compilation)" not in err


def test_a_cpu_run_stays_eager_by_default(tmp_path, monkeypatch):
    from tests.model_support import build_examples, build_tokenizer

    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=16, seq_len=32)
    cfg = override(presets.tiny(), ["train.steps=1", "train.batch_size=8", "train.warmup_steps=1", "train.cpu_threads=1"])
    assert train.pretrain(cfg, examples, tok, tmp_path / "out").compute["step"] == "eager"


# Every objective's step traced whole by dynamo (its "eager" backend: no Inductor, a few CPU seconds):
# fullgraph=True fails on any graph break, and a host sync is one (.item(), float() or bool() of a
# tensor, an `if` on one, nonzero or boolean-mask indexing with their data-dependent shapes).
@pytest.mark.parametrize("objective, packed, scheduled", [
    ("electra", True, True), ("electra15", False, False), ("mlm", False, False), ("all_tokens_mlm", True, False),
    ("corrective", False, False), ("mlm_then_rtd", True, False)])
def test_the_step_has_no_host_sync(objective, packed, scheduled):
    torch._dynamo.reset()  # noqa: SLF001 - a fresh cache per case
    V = 200
    sp = rtd.Specials(vocab_size=V)
    obj = config.ObjectiveConfig(objective=objective, temperature_start=2.0 if scheduled else 0.0)
    torch.manual_seed(0)
    model = ElectraPair(presets.tiny().model, V, sp.pad_id, objective).train()
    ids = torch.randint(sp.first_regular_id, V, (4, 32))
    ids[:, 0], ids[:, 20], ids[:, 31] = sp.cls_id, sp.sep_id, sp.pad_id
    doc = ((torch.arange(32) >= 10).long() + 1).expand(4, -1).clone() if packed else None
    if packed:
        doc[:, 31] = 0
        ids[:, 10] = sp.cls_id
    knobs = objectives.knobs(obj, torch.zeros(()), 10)
    norm_2 = rtd.normalizers(ids, sp, obj.mask_prob)
    step = torch.compile(objectives.step_function(objective), backend="eager", fullgraph=True)
    out = step(model, ids, torch.zeros_like(ids), sp, obj, norm_2, doc, knobs)
    out.loss.backward()
    assert torch.isfinite(out.loss.detach())
    assert torch.compile(rtd.normalizers, backend="eager", fullgraph=True)(ids, sp, obj.mask_prob).shape == (2,)
