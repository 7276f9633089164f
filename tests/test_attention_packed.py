"""Packed rows' attention in every form (model/attention.py) against the dense float bias it replaces.

The reference is the float bias the step used before the forms existed (a padding query saw no key:
all keys at the dtype's minimum, a uniform softmax). On real tokens every form must give the same
outputs and gradients as that reference (fp32: to float rounding; bf16: to its tolerance); with the
padding rule they now share, the forms agree with each other at every position. FlexAttention has no
backward on the CPU (torch 2.14 raises), so its forward is compared here and its mask rule is
compared with the dense mask element by element; its gradients need a GPU.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.nn.attention.flex_attention import create_mask
from transformers import ElectraModel

from kolectra.model import attention, config, cpu_dropout, presets, rtd
from kolectra.model.device import CudaDevice, Device
from kolectra.model.electra import ElectraPair, hf_configs
from tests.test_model_packing import _attentive
from tests.test_model_rtd import SP

B, L = 5, 48


def _packed(seed: int, b: int = B, n: int = L) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random packed rows: ids, token types, doc ids (1.. per row, 0 = padding at the end). Row 0 is
    full, the last row all padding, the others end in padding of random length."""
    g = torch.Generator().manual_seed(seed)
    docs = torch.zeros(b, n, dtype=torch.long)
    for r in range(b - 1):
        end = n if r == 0 else int(torch.randint(n // 2, n, (1,), generator=g))
        at, d = 0, 1
        while at < end:
            length = min(int(torch.randint(3, 17, (1,), generator=g)), end - at)
            docs[r, at:at + length] = d
            at, d = at + length, d + 1
    ids = torch.randint(SP.first_regular_id, SP.vocab_size, (b, n), generator=g) * (docs > 0)
    types = torch.randint(0, 2, (b, n), generator=g) * (docs > 0)
    return ids, types, docs


def _today_bias(doc_BL: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """The step's bias before this change: same sequence and key not padding; a padding query sees nothing."""
    keep = (doc_BL[:, :, None] == doc_BL[:, None, :]) & (doc_BL[:, None, :] > 0)
    return (~keep)[:, None].to(dtype) * torch.finfo(dtype).min


def _encoder(implementation: str = "sdpa", seed: int = 0) -> ElectraModel:
    """The discriminator's encoder at the tiny test size, without dropout (outputs comparable exactly)."""
    m = dataclasses.replace(presets.tiny().model, hidden=32, heads=2, intermediate=64, embedding_size=16,
                            max_position=64, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(seed)
    net = ElectraModel(hf_configs(m, SP.vocab_size, SP.pad_id)[0])
    with torch.no_grad():  # attention weights large enough that what attention carries shows (a leak too)
        for layer in net.encoder.layer:
            layer.attention.self.value.weight.mul_(8.0)
            layer.attention.output.dense.weight.mul_(8.0)
    net.set_attn_implementation(implementation)
    return net


def _run(net, ids, types, mask, positions, weights=None):
    """Hidden states [B, L, H] and, with ``weights``, the gradients of sum(weights * states) by parameter."""
    h = net(input_ids=ids, attention_mask=mask, token_type_ids=types, position_ids=positions).last_hidden_state
    if weights is None:
        return h, {}
    net.zero_grad()
    (h * weights).sum().backward()
    return h.detach(), {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}


def _real_weights(docs, seed=1):
    """Random loss weights on real tokens, 0 on padding: what every loss of the step does."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*docs.shape, 32, generator=g) * (docs > 0)[..., None]


@pytest.mark.parametrize("form", ["bias", "bool"])
def test_each_form_matches_todays_bias_in_fp32(form):
    ids, types, docs = _packed(0)
    positions = attention.document_positions(docs)
    weights, real = _real_weights(docs), docs > 0
    h_ref, g_ref = _run(_encoder("sdpa"), ids, types, _today_bias(docs), positions, weights)
    mask, _ = attention.document_attention(docs, form)
    h, grads = _run(_encoder(attention.PACKED), ids, types, mask, positions, weights)
    assert torch.allclose(h[real], h_ref[real], atol=1e-6, rtol=1e-6)
    assert g_ref.keys() == grads.keys() and len(grads) > 10
    for name, g in grads.items():
        assert torch.isfinite(g).all(), name
        assert torch.allclose(g, g_ref[name], atol=1e-6, rtol=1e-5), name
    assert torch.isfinite(h).all()


def test_forms_agree_at_every_position_padding_included():
    """One mask rule, three forms: the same states everywhere, padding queries (which see themselves) too."""
    ids, types, docs = _packed(1)
    positions = attention.document_positions(docs)
    bias, _ = attention.document_attention(docs, "bias")
    keep, _ = attention.document_attention(docs, "bool")
    flex, _ = attention.document_attention(docs, "flex")
    net = _encoder(attention.PACKED).eval()
    with torch.no_grad():
        h_bias, h_bool, h_flex = (_run(net, ids, types, m, positions)[0] for m in (bias, keep, flex))
    assert torch.allclose(h_bool, h_bias, atol=1e-6, rtol=1e-6)
    assert torch.allclose(h_flex, h_bias, atol=1e-5, rtol=1e-5)  # FlexAttention's CPU kernel, compiled
    assert torch.isfinite(h_flex).all()


def test_the_cpu_attention_takes_the_bias_form():
    """The CPU's own attention function (eager formula, cheap dropout) with the new bias equals today's path."""
    ids, types, docs = _packed(2)
    positions, weights, real = attention.document_positions(docs), _real_weights(docs), docs > 0
    net = cpu_dropout.install(_encoder("sdpa"))
    h_ref, g_ref = _run(net, ids, types, _today_bias(docs), positions, weights)
    h, grads = _run(net, ids, types, attention.document_attention(docs)[0], positions, weights)
    assert torch.allclose(h[real], h_ref[real], atol=1e-6, rtol=1e-6)
    assert all(torch.allclose(g, g_ref[n], atol=1e-6, rtol=1e-5) for n, g in grads.items())


def test_bool_mask_in_bf16_is_within_bf16_tolerance():
    ids, types, docs = _packed(3)
    positions, weights, real = attention.document_positions(docs), _real_weights(docs), docs > 0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h_ref, g_ref = _run(_encoder("sdpa"), ids, types, _today_bias(docs), positions, weights)
        h, grads = _run(_encoder(attention.PACKED), ids, types, attention.document_attention(docs, "bool")[0],
                        positions, weights)
    # bf16 keeps 8 bits: states O(1) agree to a few roundings; each gradient to 2 % of its norm
    assert (h[real].float() - h_ref[real].float()).abs().max() < 0.05
    for name, g in grads.items():
        assert torch.isfinite(g).all(), name
        assert (g - g_ref[name]).norm() <= 0.02 * g_ref[name].norm() + 1e-6, name


@pytest.mark.parametrize("form", ["bias", "bool", "flex"])
def test_no_token_attends_across_documents(form):
    """Changing one sequence's tokens leaves every other sequence's states as they were; the same
    change with only a padding mask (no document rule) moves them, so the test can fail."""
    ids, types, docs = _packed(4)
    row, other = 0, 2  # row 0 is full: sequences before and after sequence 2
    changed = ids.clone()
    changed[row, docs[row] == other] = SP.first_regular_id + (ids[row, docs[row] == other] - SP.first_regular_id + 7) % (
        SP.vocab_size - SP.first_regular_id)
    rest = (docs[row] != other) & (docs[row] > 0)
    positions = attention.document_positions(docs)
    net = _encoder(attention.PACKED).eval()
    mask = attention.document_attention(docs, form)[0]
    padding_only = torch.where(docs[:, None, None, :] > 0, 0.0, torch.finfo(torch.float32).min)
    with torch.no_grad():
        before, after = (_run(net, x, types, mask, positions)[0][row] for x in (ids, changed))
        leak_before, leak_after = (_run(net, x, types, padding_only, positions)[0][row] for x in (ids, changed))
    assert torch.equal(before[rest], after[rest])
    assert (before[docs[row] == other] - after[docs[row] == other]).abs().max() > 0.1  # the change itself shows
    assert (leak_before[rest] - leak_after[rest]).abs().max() > 0.1


def test_flex_mask_rule_is_the_dense_mask_and_skips_blocks():
    ids, _, docs = _packed(5)
    dense = attention.document_keep(docs)
    from_rule = create_mask(attention.document_mask_mod(docs), B, 1, L, L, device="cpu")
    assert torch.equal(from_rule[:, 0], dense)
    # Two sequences of 128 tokens a row: the 128 x 128 blocks across them hold nothing and are skipped.
    docs2 = torch.cat([torch.ones(2, 128, dtype=torch.long), torch.full((2, 128), 2)], 1)
    docs2[1, 200:] = 0
    blocks = attention.document_block_mask(docs2).to_dense()  # [B, 1, 2, 2] blocks that are visited
    assert blocks[:, 0].tolist() == [[[1, 0], [0, 1]]] * 2
    assert torch.equal(create_mask(attention.document_mask_mod(docs2), 2, 1, 256, 256, device="cpu")[:, 0],
                       attention.document_keep(docs2))


def test_padding_queries_see_only_themselves_and_stay_finite():
    ids, types, docs = _packed(6)
    keep = attention.document_keep(docs)
    pad = docs == 0
    assert keep.any(-1).all()  # no empty row: defined in every kernel
    assert torch.equal(keep[pad], torch.eye(L, dtype=torch.bool).expand(B, L, L)[pad])
    assert not (keep & pad[:, None, :] & ~torch.eye(L, dtype=torch.bool)).any()  # nobody else sees padding
    net = _encoder(attention.PACKED)
    h, grads = _run(net, ids, types, keep[:, None], attention.document_positions(docs), torch.ones(B, L, 32))
    assert torch.isfinite(h).all() and all(torch.isfinite(g).all() for g in grads.values())


def _pair(attention_dropout: float = 0.1):
    m = dataclasses.replace(presets.tiny().model, hidden=32, heads=2, intermediate=64, embedding_size=16,
                            generator_hidden=16, generator_heads=1, generator_intermediate=32, max_position=64,
                            attention_dropout=attention_dropout)
    torch.manual_seed(0)
    return _attentive(ElectraPair(m, SP.vocab_size, SP.pad_id))  # a leak across sequences moves the loss by 5e-3


def test_no_loss_reads_a_padding_position():
    """Every layer's output at padding positions gets an exactly zero gradient from the step's loss:
    what padding queries attend to cannot change the loss or any weight's gradient."""
    pair = _pair()
    pair.use_attention("bool")
    ids, types, docs = _packed(7)
    outs = []
    hooks = [layer.register_forward_hook(lambda _m, _i, o: (o[0] if isinstance(o, tuple) else o).retain_grad()
                                         or outs.append(o[0] if isinstance(o, tuple) else o))
             for net in pair.networks().values() for layer in net.electra.encoder.layer]
    torch.manual_seed(0)
    out = rtd.electra_step(pair, ids, types, SP, config.ObjectiveConfig(), doc_BL=docs)
    out.loss.backward()
    for h in hooks:
        h.remove()
    assert len(outs) == 4 and all(o.grad is not None for o in outs)
    assert all((o.grad[docs == 0] == 0).all() for o in outs)
    assert all(o.grad[docs > 0].abs().max() > 0 for o in outs)  # the hooks see the real gradient


def test_the_step_gives_the_same_loss_and_gradients_in_every_form():
    ids, types, docs = _packed(8)

    def step(form: str, grad: bool = True):
        pair = _pair(attention_dropout=0.0)
        assert pair.use_attention(form) == form
        torch.manual_seed(1)
        with torch.set_grad_enabled(grad):
            out = rtd.electra_step(pair, ids, types, SP, config.ObjectiveConfig(), doc_BL=docs)
        if grad:
            out.loss.backward()
        return out.loss.detach(), {n: p.grad for n, p in pair.named_parameters() if p.grad is not None}

    loss_bias, g_bias = step("bias")
    loss_bool, g_bool = step("bool")
    assert torch.allclose(loss_bool, loss_bias, atol=1e-6) and g_bool.keys() == g_bias.keys()
    assert all(torch.allclose(g, g_bias[n], atol=1e-6, rtol=1e-4) for n, g in g_bool.items())
    loss_flex, _ = step("flex", grad=False)  # FlexAttention has no backward on the CPU
    assert torch.allclose(loss_flex, loss_bias, atol=1e-5)


def test_each_device_picks_its_form_and_the_pair_settles_it():
    assert Device.attention == "bias" and CudaDevice.attention == "flex"
    placed = Device().place(_pair())
    assert placed.attention == "bias"
    assert placed.discriminator.config._attn_implementation == cpu_dropout.ATTENTION  # the CPU's own, unchanged
    with_dropout, without = _pair(0.1), _pair(0.0)
    assert with_dropout.use_attention("flex") == "bool"  # FlexAttention takes no dropout
    assert without.use_attention("flex") == "flex"
    assert {n.config._attn_implementation for n in without.networks().values()} == {attention.PACKED}
    with pytest.raises(ValueError, match="attention form 'dense'"):
        without.use_attention("dense")
