"""Fine-tuning batches padded to a few fixed widths when the model's forward is compiled (issue 45):
the widths come out as designed, a batch goes to the smallest that holds it, the CPU keeps cutting
to the longest row unless told to compile, and padding a batch wider changes no loss, logit or
per-token prediction beyond float rounding (the attention bias hides the padding)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from kolectra.core.config import ConfigError, override, to_dict
from kolectra.finetune import config, loading, loop
from kolectra.finetune.features import Features
from kolectra.model.device import CudaDevice, Device
from tests.test_finetune_e2e import tiny_model  # noqa: F401 - a fixture


@pytest.mark.parametrize("max_length, widths", [
    (128, (16, 32, 64, 128)), (512, (64, 128, 256, 512)), (64, (8, 16, 32, 64)),
    (100, (16, 32, 56, 100)),  # multiples of 8 below max_length, max_length itself last
    (20, (8, 16, 20)), (3, (3,))])
def test_bucket_widths(max_length, widths):
    assert loop.bucket_widths(max_length) == widths


def test_a_batch_takes_the_smallest_bucket_that_holds_it():
    assert [loop.batch_width(n, 128, static=False, bucketed=True) for n in (3, 16, 17, 64, 65, 128)] == \
        [16, 16, 32, 64, 128, 128]
    assert loop.batch_width(17, 128, static=False, bucketed=False) == 17  # today's dynamic padding
    assert loop.batch_width(17, 128, static=True, bucketed=True) == 128  # XLA: one shape


def test_the_cpu_cuts_to_the_longest_row_unless_compiled():
    cpu, cuda = Device(), object.__new__(CudaDevice)
    try:
        auto = config.sample_nsmc()
        assert auto.compile == "auto" and "compile" not in to_dict(auto)  # earlier requests keep their ids
        assert not loop.compiled_forward(cpu, auto) and loop.compiled_forward(cuda, auto)
        assert loop.compiled_forward(cpu, dataclasses.replace(auto, compile=True))
        assert not loop.compiled_forward(cuda, dataclasses.replace(auto, compile=False))
        lengths = np.array([5, 9, 40])
        ids = np.where(np.arange(40)[None, :] < lengths[:, None], 7, 0).astype(np.int32)  # [PAD] = 0 past the end
        feats = Features({"input_ids": ids}, {"labels": np.array([0, 1, 0])}, lengths, pad_id=0)
        assert loop.inputs(feats, np.array([0, 1]), cpu, auto)["input_ids"].shape == (2, 9)
        bucketed = loop.inputs(feats, np.array([0, 1]), cpu, dataclasses.replace(auto, compile=True))
        assert bucketed["input_ids"].shape == (2, 16)
        assert bucketed["input_ids"][:, 9:].eq(0).all()  # filled with [PAD], masked out
        assert (bucketed["attention_mask"][:, 0, 0, 9:] == torch.finfo(torch.float32).min).all()
    finally:
        cpu.close()


def test_compile_is_checked():
    assert override(config.sample_nsmc(), ["compile=false"]).compile is False
    assert to_dict(override(config.sample_nsmc(), ["compile=false"]))["compile"] is False
    with pytest.raises(ConfigError, match="compile"):
        override(config.sample_nsmc(), ["device=xla", "compile=true"])


def test_the_switch_leaves_the_forward_alone_and_auto_on_the_cpu_too():
    from transformers import ElectraConfig, ElectraForSequenceClassification

    model = ElectraForSequenceClassification(ElectraConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                           num_attention_heads=2, intermediate_size=32,
                                                           embedding_size=16))
    cpu = Device()
    try:
        for choice in (False, "auto"):
            assert "forward" not in vars(loading.compile_forward(model, cpu, config.TaskConfig(compile=choice)))
    finally:
        cpu.close()


def _features(rng, n: int, longest: int, labels: dict) -> Features:
    lengths = rng.integers(3, longest + 1, n)
    lengths[0] = longest
    ids = rng.integers(5, 50, (n, longest)).astype(np.int32)
    ids[np.arange(longest)[None, :] >= lengths[:, None]] = 0
    ids[:, 0] = 2
    return Features({"input_ids": ids, "token_type_ids": np.zeros_like(ids), **labels.get("per_token", {})},
                    labels.get("per_row", {}), lengths, pad_id=0)


@pytest.mark.parametrize("head", ["sequence", "token"])
def test_padding_to_a_bucket_changes_no_loss_or_prediction(head):
    from transformers import ElectraConfig, ElectraForSequenceClassification, ElectraForTokenClassification

    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, embedding_size=32, max_position_embeddings=128, num_labels=3,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = (ElectraForSequenceClassification if head == "sequence" else ElectraForTokenClassification)(cfg).eval()
    rng = np.random.default_rng(0)
    n, longest = 6, 21
    if head == "sequence":
        labels = {"per_row": {"labels": rng.integers(0, 3, n)}}
    else:  # per-token labels, -100 past each row's end (features.FILL)
        labels = {"per_token": {"labels": rng.integers(0, 3, (n, longest)).astype(np.int32)}}
    feats = _features(rng, n, longest, labels)
    if head == "token":
        feats.per_token["labels"][np.arange(longest)[None, :] >= feats.lengths[:, None]] = -100
    cpu, task = Device(), config.TaskConfig(max_length=128)
    idx = np.arange(n)
    try:
        tight_in, wide_in = loop.inputs(feats, idx, cpu, task), loop.inputs(feats, idx, cpu, dataclasses.replace(task, compile=True))
        assert (tight_in["input_ids"].shape[1], wide_in["input_ids"].shape[1]) == (21, 32)
        with torch.no_grad():
            tight, wide = model(**tight_in), model(**wide_in)
    finally:
        cpu.close()
    torch.testing.assert_close(wide.loss, tight.loss, rtol=1e-5, atol=1e-6)
    if head == "sequence":
        torch.testing.assert_close(wide.logits, tight.logits, rtol=1e-5, atol=1e-5)
    else:  # each row's tokens up to its length
        for row, length in enumerate(feats.lengths):
            torch.testing.assert_close(wide.logits[row, :length], tight.logits[row, :length], rtol=1e-5, atol=1e-5)


def test_a_compiled_run_sees_only_bucket_widths_and_says_so(tiny_model, tmp_path, monkeypatch, capsys):
    # the plumbing from `compile` to the forward the loop calls, on the CPU: compiling for real takes
    # minutes here, so the recorder keeps the eager forward and notes each batch's width
    from kolectra.finetune import nsmc
    from tests.test_finetune_e2e import nsmc_file

    widths, modes = set(), []

    def recorder(forward, mode):
        modes.append(mode)

        def call(*args, **kwargs):
            widths.add(kwargs["input_ids"].shape[1])
            return forward(*args, **kwargs)
        return call

    monkeypatch.setattr(loading, "compiled", recorder)
    cfg = dataclasses.replace(config.sample_nsmc(), max_length=32, batch_size=16, epochs=1, compile=True)
    nsmc.run(cfg, tiny_model, nsmc_file(tmp_path / "train.txt", 60, 0), nsmc_file(tmp_path / "test.txt", 20, 1),
             tmp_path / "out")
    err = capsys.readouterr().err
    assert modes == ["default"] and widths and widths <= set(loop.bucket_widths(32))
    assert "fine-tuning with a compiled forward (torch.compile, mode default)" in err and "--set compile=false" in err
    assert "step 1 took" in err and "(with compilation)" in err
