"""model/cpu_dropout.py: the CPU trainer's dropout keeps the statistics of nn.Dropout and the
attention maths of transformers, and leaves no trace in exported models."""

import copy

import pytest
import torch
from torch import nn
from transformers import AutoModel, ElectraConfig, ElectraForPreTraining
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from kolectra.model import cpu_dropout
from kolectra.model.device import Device


def test_drop_rate_and_scale():
    torch.manual_seed(0)
    x = torch.ones(1_000_000)
    y = cpu_dropout.drop(x, 0.1)
    p_used = 6554 / 65536  # round(0.1 * 65536) / 65536
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - p_used) < 0.002  # about 6 standard deviations
    assert torch.all((y == 0) | torch.isclose(y, torch.tensor(1 / (1 - p_used))))
    assert abs(y.mean().item() - 1.0) < 0.003  # unbiased


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_mask_built_in_numpy_is_torchs_formula_on_the_same_draws(dtype):
    threshold, p_used = cpu_dropout._threshold(0.1)
    for shape in (torch.Size([4, 33]), torch.Size([16, 2, 128, 128])):  # numel not a multiple of 4, and large
        torch.manual_seed(5)
        mask = cpu_dropout.keep_scale(shape, 0.1, dtype)
        torch.manual_seed(5)
        ref = (cpu_dropout.draws16(shape) >= threshold).to(dtype) * (1.0 / (1.0 - p_used))
        assert mask.dtype == dtype and mask.shape == shape and torch.equal(mask, ref)
        assert set(mask.unique().tolist()) == {0.0, ref.max().item()}


def test_drop_is_seeded_and_off_in_eval():
    x = torch.randn(4, 33, dtype=torch.bfloat16)  # numel not a multiple of 4
    torch.manual_seed(3)
    a = cpu_dropout.drop(x, 0.25)
    torch.manual_seed(3)
    b = cpu_dropout.drop(x, 0.25)
    assert torch.equal(a, b) and a.dtype == x.dtype and not torch.equal(a, x)
    assert cpu_dropout.drop(x, 0.25, training=False) is x
    assert cpu_dropout.drop(x, 0.0) is x
    assert torch.equal(cpu_dropout.drop(x, 1.0), torch.zeros_like(x))


def test_attention_is_the_eager_formula():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, 16) for _ in range(3))
    bias = torch.zeros(2, 1, 1, 8)
    bias[1, ..., 6:] = torch.finfo(torch.float32).min  # padding in the second sequence
    module = nn.Module()
    module.is_causal = False
    torch.manual_seed(1)
    out, _ = cpu_dropout.attention(module, q, k, v, bias, scaling=0.25, dropout=0.1)
    torch.manual_seed(1)
    weights = cpu_dropout.drop(torch.softmax(q @ k.transpose(2, 3) * 0.25 + bias, dim=-1), 0.1)
    assert torch.allclose(out, (weights @ v).transpose(1, 2), atol=1e-6)
    # without dropout it is SDPA, which agrees with the same formula
    plain, _ = cpu_dropout.attention(module, q, k, v, bias, scaling=0.25, dropout=0.0)
    ref = (torch.softmax(q @ k.transpose(2, 3) * 0.25 + bias, dim=-1) @ v).transpose(1, 2)
    assert torch.allclose(plain, ref, atol=1e-5)


def _graph_names(fn, seen=None) -> set[str]:
    """The names of every node of an autograd graph."""
    seen = set() if seen is None else seen
    if fn is not None and fn not in seen:
        seen.add(fn)
        for nxt, _ in fn.next_functions:
            _graph_names(nxt, seen)
    return {type(f).__name__ for f in seen}


@pytest.mark.parametrize("bf16", [False, True])
def test_training_attention_without_dropout_has_sdpas_values_and_gradients(bf16):
    """With a gradient to compute and no dropout, bf16 takes the eager formula (SDPA's CPU backward is
    slow in bf16) and fp32 SDPA; values and gradients are SDPA's in both."""
    torch.manual_seed(0)
    leaves = [torch.randn(2, 2, 8, 16, requires_grad=True) for _ in range(3)]
    bias = torch.zeros(2, 1, 1, 8)
    bias[1, ..., 5:] = torch.finfo(torch.float32).min
    module = nn.Module()
    module.is_causal = False
    results = []
    for fn in (cpu_dropout.attention, sdpa_attention_forward):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            # as a model's projections hand them over: bf16 under autocast
            out, _ = fn(module, *(t.to(torch.bfloat16) if bf16 else t for t in leaves), bias, scaling=0.25, dropout=0.0)
        (out.float() * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
        results.append([out.float(), *(t.grad.clone() for t in leaves)])
        if fn is cpu_dropout.attention:
            assert any("ScaledDotProduct" in n for n in _graph_names(out.grad_fn)) is not bf16
        for t in leaves:
            t.grad = None
    tol = 2e-2 if bf16 else 1e-5
    for ours, theirs in zip(*results):
        assert torch.allclose(ours, theirs, atol=tol, rtol=tol)


@pytest.fixture
def electra():
    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=100, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    return ElectraForPreTraining(cfg)


def test_device_place_installs_it_and_eval_is_unchanged(electra, tmp_path):
    stock = copy.deepcopy(electra).eval()
    placed = Device().place(electra)
    assert not any(type(m) is nn.Dropout for m in placed.modules())
    assert sum(isinstance(m, cpu_dropout.Dropout) for m in placed.modules()) == 1 + 2 * 3  # embeddings + 3 a layer
    assert placed.config._attn_implementation == cpu_dropout.ATTENTION
    ids = torch.randint(5, 100, (2, 12))
    with torch.no_grad():
        assert torch.allclose(placed.eval()(input_ids=ids).logits, stock(input_ids=ids).logits, atol=1e-5)
    placed.train()
    torch.manual_seed(5)
    first = placed(input_ids=ids).logits
    first.sum().backward()
    assert placed.electra.embeddings.word_embeddings.weight.grad is not None
    torch.manual_seed(5)
    assert torch.equal(placed(input_ids=ids).logits, first)  # seeded: exact resume still holds
    placed.save_pretrained(tmp_path)
    assert cpu_dropout.ATTENTION not in (tmp_path / "config.json").read_text()
    loaded = AutoModel.from_pretrained(tmp_path)
    assert not any(isinstance(m, cpu_dropout.Dropout) for m in loaded.modules())


def test_draws_are_fresh_streams_from_torchs_generator():
    torch.manual_seed(7)
    a, b = cpu_dropout.draws16(torch.Size([1000, 1000])), cpu_dropout.draws16(torch.Size([1000, 1000]))
    assert a.dtype == torch.int16 and a.shape == (1000, 1000)
    # uniform over int16: mean near 0 (sd of the mean ~19), every high byte value used
    assert abs(a.float().mean().item()) < 150 and torch.unique(a >> 8).numel() == 256
    # consecutive calls are independent streams: both below 0 about a quarter of the time
    both = ((a < 0) & (b < 0)).float().mean().item()
    assert abs(both - 0.25) < 0.003
    torch.manual_seed(7)
    assert torch.equal(cpu_dropout.draws16(torch.Size([1000, 1000])), a)  # the seed comes from torch


def test_bf16_on_a_cpu_without_native_bf16_is_named(monkeypatch):
    from kolectra.model import device

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    assert "no native bf16" in device.slow_cpu_bf16_note()
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    assert device.slow_cpu_bf16_note() is None
