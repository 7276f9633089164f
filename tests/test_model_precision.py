"""bf16 autocast by default on CPUs that run it natively (issue 30): chosen when the config is
resolved, so ``--print-config``, the manifest and the artifact id all hold the choice; a
``train.bf16`` the user set is kept; other devices and CPUs without native bf16 keep float32."""

from __future__ import annotations

import dataclasses

import pytest

from kolectra.core import host
from kolectra.model import config, presets
from kolectra.pipeline import configs


def test_the_flags_come_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\nflags\t\t: fpu sse avx512f avx512_bf16\n\n"
                    "processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n")
    assert host.cpu_flags(str(info)) == {"fpu", "sse", "avx512f", "avx512_bf16"}  # the first CPU's
    assert host.first_cpu(str(info))["model name"] == "Some CPU @ 2.0GHz"
    assert host.cpu_flags(str(tmp_path / "none")) == frozenset()
    (tmp_path / "empty").write_text("processor : 0\n")
    assert host.cpu_flags(str(tmp_path / "empty")) == frozenset()


@pytest.mark.parametrize("flags, expect", [({"avx512f", "avx512_bf16"}, "avx512_bf16"),
                                           ({"amx_tile", "amx_bf16", "avx512_bf16"}, "amx_bf16"),
                                           ({"avx2", "fma"}, None), (set(), None)])
def test_native_bf16_is_avx512_bf16_or_amx(monkeypatch, flags, expect):
    monkeypatch.setattr(host, "cpu_flags", lambda: frozenset(flags))
    assert host.native_bf16() == expect


def test_a_native_cpu_resolves_to_bf16(monkeypatch):
    monkeypatch.setattr(host, "native_bf16", lambda: "avx512_bf16")
    cfg, doc = configs.resolve("pretrain", preset="mini")
    assert cfg.train.bf16 is True and doc["train"]["bf16"] is True  # what the manifest records
    # the choice is part of the request: the float32 run of the same preset is another artifact
    fp32, fp32_doc = configs.resolve("pretrain", preset="mini", sets=["train.bf16=false"])
    assert fp32.train.bf16 is False and fp32_doc != doc


def test_other_devices_and_cpus_without_native_bf16_keep_the_preset(monkeypatch):
    monkeypatch.setattr(host, "native_bf16", lambda: None)
    assert configs.resolve("pretrain", preset="mini")[0].train.bf16 is False
    monkeypatch.setattr(host, "native_bf16", lambda: "amx_bf16")
    for device in ("cuda", "xla"):
        assert configs.resolve("pretrain", preset="mini", sets=[f"train.device={device}"])[0].train.bf16 is False
    # asked for on a CPU without it: kept (the device warns at run time that it will be slow)
    monkeypatch.setattr(host, "native_bf16", lambda: None)
    assert configs.resolve("pretrain", preset="mini", sets=["train.bf16=true"])[0].train.bf16 is True


def test_fit_precision_leaves_an_explicit_choice_alone():
    cpu = presets.mini()
    assert config.fit_precision(cpu, explicit=True, native="amx_bf16") == cpu
    assert config.fit_precision(cpu, explicit=False, native="amx_bf16").train.bf16 is True
    assert config.fit_precision(cpu, explicit=False, native=None) == cpu


@pytest.mark.parametrize("bf16, said", [(True, "in bf16 autocast (--set train.bf16=false: float32)"), (False, "in float32")])
def test_the_trainer_names_its_precision(tmp_path, capsys, bf16, said):
    from kolectra.model import train
    from tests.model_support import build_examples, build_tokenizer

    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=16, seq_len=32)
    cfg = presets.tiny()
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=1, batch_size=8, warmup_steps=1,
                                                             cpu_threads=1, bf16=bf16))
    train.pretrain(cfg, examples, tok, tmp_path / "out")
    first = next(line for line in capsys.readouterr().err.splitlines() if "discriminator parameters" in line)
    assert f"on cpu (1 thread) {said}, " in first
