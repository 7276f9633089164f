"""The replaced-token-detection objective: masking, sampling, labels, losses and gradients."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from kolectra.model import config, presets, rtd
from kolectra.model.electra import ElectraPair, attention_bias

SP = rtd.Specials(pad_id=0, cls_id=2, sep_id=3, mask_id=4, vocab_size=50, first_regular_id=5)


def _batch(B=6, L=40, seed=0):
    """[CLS] A [SEP] B [SEP] + padding, lengths varying down to a 4-token sequence."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, SP.vocab_size, (B, L), generator=g)
    types = torch.zeros_like(ids)
    lengths = [L, L - 3, 25, 12, 4, L][:B]
    for b, n in enumerate(lengths):
        mid = max(2, n // 2)
        ids[b, 0], ids[b, mid], ids[b, n - 1] = SP.cls_id, SP.sep_id, SP.sep_id
        ids[b, n:] = SP.pad_id
        types[b, mid + 1:n] = 1
    ids[0, 7] = SP.mask_id  # a literal [MASK] in the input must never be chosen either
    ids[1, 9] = 1  # [UNK] is an ordinary token
    return ids, types


def _tiny_pair(vocab=SP.vocab_size):
    m = dataclasses.replace(presets.tiny().model, hidden=32, heads=2, intermediate=64, embedding_size=16,
                            generator_hidden=16, generator_heads=1, generator_intermediate=32, max_position=64)
    torch.manual_seed(0)
    return ElectraPair(m, vocab, SP.pad_id)


def test_positions_static_and_never_special_or_padding():
    ids, _ = _batch()
    L = ids.shape[1]
    for seed in range(20):
        torch.manual_seed(seed)
        pos, w = rtd.choose_positions(ids, SP, 0.15)
        assert pos.shape == w.shape == (ids.shape[0], round(0.15 * L))
        chosen = torch.gather(ids, 1, pos)
        valid = w > 0
        assert not ((chosen == SP.pad_id) | (chosen == SP.cls_id) | (chosen == SP.sep_id)
                    | (chosen == SP.mask_id))[valid].any()
        for b in range(ids.shape[0]):  # distinct positions per row
            assert len(set(pos[b].tolist())) == pos.shape[1]
    n_cand = rtd.candidates(ids, SP).sum(1)
    # Each sequence masks 15% of its own candidates (at least one), never more than N.
    assert w.sum(1).tolist() == [min(6, max(1, int(c * 0.15 + 0.5))) for c in n_cand.tolist()]


def test_sequence_without_candidates_masks_nothing():
    ids = torch.tensor([[2, 3, 3, 0, 0, 0, 0, 0, 0, 0]])
    pos, w = rtd.choose_positions(ids, SP, 0.15)
    assert pos.shape == (1, 2) and w.sum() == 0
    masked = rtd.mask_inputs(ids, pos, w, SP, config.ObjectiveConfig())
    assert torch.equal(masked, ids)


def test_a_mask_prob_that_rounds_to_no_slot_masks_one_and_says_so(tmp_path, capsys):
    """mask_prob 0.001 of 128 tokens masked 1 a row (0.8 %, 8x the setting) and nothing said so (k4)."""
    from kolectra.model.pretrain_inputs import read_inputs
    from tests.model_support import build_examples, build_tokenizer

    assert rtd.num_slots(0.001, 128) == 1 and rtd.num_slots(0.999, 128) == 128
    ids = torch.tensor([[2] + [10] * 126 + [3]])
    _, weights = rtd.choose_positions(ids, rtd.Specials(vocab_size=50), 0.001)
    assert weights.sum() == 1
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "ex", tok, n=16, seq_len=32)
    cfg = presets.tiny()
    low = dataclasses.replace(cfg, objective=dataclasses.replace(cfg.objective, mask_prob=0.01))
    read_inputs(low, examples, tok)
    err = capsys.readouterr().err
    assert ("note — objective.mask_prob 0.01 of a row's 32 tokens rounds to no masked position, so every row masks "
            "one (at least one, as BERT and ELECTRA do): 3.12% of a full row's tokens") in err
    read_inputs(dataclasses.replace(cfg, objective=dataclasses.replace(cfg.objective, mask_prob=0.016)), examples, tok)
    assert "mask_prob" not in capsys.readouterr().err  # 0.512 slots round to one: as asked


def test_mask_keep_random_split_follows_config():
    torch.manual_seed(0)
    ids = torch.randint(5, 30000, (400, 128))
    sp = dataclasses.replace(SP, vocab_size=30000)
    pos, w = rtd.choose_positions(ids, sp, 0.15)
    original = torch.gather(ids, 1, pos)
    new = torch.gather(rtd.mask_inputs(ids, pos, w, sp, config.ObjectiveConfig()), 1, pos)
    n = w.sum().item()
    share_mask = ((new == sp.mask_id).float() * w).sum().item() / n
    share_keep = ((new == original).float() * w).sum().item() / n
    assert abs(share_mask - 0.85) < 0.01 and abs(share_keep - 0.15) < 0.01  # ~7,600 slots: sd ~0.004
    obj = config.ObjectiveConfig(mask_token_prob=0.8, random_token_prob=0.1)
    new = torch.gather(rtd.mask_inputs(ids, pos, w, sp, obj), 1, pos)
    share_random = (((new != sp.mask_id) & (new != original)).float() * w).sum().item() / n
    assert abs(share_random - 0.1) < 0.01
    assert ((new == sp.mask_id) | (new >= sp.first_regular_id)).all()  # random ones are never specials


def test_sampled_equal_to_original_is_labelled_real():
    ids, _ = _batch()
    torch.manual_seed(1)
    pos, w = rtd.choose_positions(ids, SP, 0.15)
    original = torch.gather(ids, 1, pos)
    sampled = torch.where(torch.arange(pos.shape[1]) % 2 == 0, original, 5 + (original - 4) % 45)
    disc_in, replaced = rtd.replace_tokens(ids, pos, w, sampled)
    got = torch.gather(replaced, 1, pos)
    want = ((sampled != original) & (w > 0)).float()
    assert torch.equal(got, want)
    assert replaced.sum() == want.sum()  # nothing outside the chosen positions changes
    assert torch.equal(torch.gather(disc_in, 1, pos), torch.where(w > 0, sampled, original))


@pytest.mark.parametrize("sampler", rtd.SAMPLERS)
def test_sampling_matches_softmax(sampler):
    """Both samplers (Gumbel-max and inverse CDF) draw from softmax(logits / T)."""
    torch.manual_seed(0)
    logits = torch.tensor([[[2.0, 1.0, 0.0, -1.0, -30.0, float("-inf")]]]).expand(1, 20000, 6)
    counts = torch.bincount(rtd.sample_tokens(logits, 1.0, sampler).flatten(), minlength=6).float() / 20000
    assert torch.allclose(counts, torch.softmax(logits[0, 0], -1), atol=0.015)
    assert counts[4] == 0 and counts[5] == 0  # probability ~1e-14 and exactly 0
    hot = torch.bincount(rtd.sample_tokens(logits, 2.0, sampler).flatten(), minlength=6).float() / 20000
    assert torch.allclose(hot, torch.softmax(logits[0, 0] / 2.0, -1), atol=0.015)
    cold = torch.bincount(rtd.sample_tokens(logits, 0.05, sampler).flatten(), minlength=6)
    assert cold[0] == 20000


def test_inverse_cdf_reuses_the_given_softmax_and_lands_on_every_token():
    torch.manual_seed(0)
    probs = torch.tensor([[[0.0, 0.25, 0.0, 0.75]]]).expand(1, 8000, 4)
    got = torch.bincount(rtd.sample_tokens(torch.zeros(1, 8000, 4), 1.0, "inverse_cdf", probs).flatten(), minlength=4)
    assert got[0] == 0 and got[2] == 0  # the logits say uniform: the given softmax was used
    assert abs(got[1].item() / 8000 - 0.25) < 0.02
    with pytest.raises(ValueError, match="unknown sampler"):
        rtd.sample_tokens(torch.zeros(1, 2, 4), 1.0, "top_k")


def test_softmax_cross_entropy_equals_torch_in_value_and_gradient():
    torch.manual_seed(0)
    logits = (torch.randn(3, 5, 40) * 4).requires_grad_()
    target = torch.randint(0, 40, (3, 5))
    w = torch.rand(3, 5)
    ce, probs = rtd.softmax_cross_entropy(logits, target)
    (ce * w).sum().backward()
    ours = logits.grad.clone()
    logits.grad = None
    ref = torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none").view(3, 5)
    (ref * w).sum().backward()
    assert torch.allclose(ce, ref, atol=1e-6)
    assert torch.allclose(ours, logits.grad, atol=1e-6)
    assert torch.allclose(probs, torch.softmax(logits, -1)) and not probs.requires_grad
    # bf16 logits (autocast): float32 loss and softmax, the gradient in bf16 without a cast in the graph
    half = (torch.randn(3, 5, 40) * 4).bfloat16().requires_grad_()
    ce_h, probs_h = rtd.softmax_cross_entropy(half, target)
    (ce_h * w).sum().backward()
    ref_h = torch.nn.functional.cross_entropy(half.detach().float().flatten(0, 1).requires_grad_(), target.flatten(),
                                              reduction="none")
    assert ce_h.dtype == probs_h.dtype == torch.float32 and half.grad.dtype == torch.bfloat16
    assert torch.allclose(ce_h, ref_h.view(3, 5), atol=1e-5)
    ref_grad = torch.softmax(half.detach().float(), -1) - torch.nn.functional.one_hot(target, 40)
    assert torch.allclose(half.grad.float(), ref_grad * w[..., None], atol=4e-3, rtol=1e-2)
    # a confident, correct row: the target's gradient keeps its size in bf16 instead of cancelling
    sure = torch.tensor([[[9.0, 0.0, 0.0]]], dtype=torch.bfloat16, requires_grad=True)
    rtd.softmax_cross_entropy(sure, torch.tensor([[0]]))[0].sum().backward()
    exact = torch.softmax(sure.detach().float(), -1)[0, 0, 0] - 1.0
    assert abs(sure.grad[0, 0, 0].float() / exact - 1.0) < 0.01
    # a target far below the rest: a finite loss (log-probabilities, never log of an underflowed 0)
    far = torch.tensor([[[0.0, 200.0]]], requires_grad=True)
    assert torch.isfinite(rtd.softmax_cross_entropy(far, torch.tensor([[0]]))[0]).all()


def test_losses_match_hf_reference_and_total_is_gen_plus_50_disc():
    """Our gather/weight losses equal HF's own loss functions on the same inputs (eval: no dropout)."""
    pair = _tiny_pair().eval()
    ids, types = _batch()
    torch.manual_seed(3)
    out = rtd.electra_step(pair, ids, types, SP, config.ObjectiveConfig())
    gen_loss, disc_loss = out.parts["gen_loss"], out.parts["disc_loss"]
    assert torch.allclose(out.loss, gen_loss + 50.0 * disc_loss)
    attn = (ids != SP.pad_id).long()

    labels = torch.full_like(ids, -100).scatter(1, out.positions_BN,
                                                torch.where(out.weights_BN > 0, torch.gather(ids, 1, out.positions_BN), -100))
    ref_gen = ElectraForMaskedLM.forward(pair.generator, input_ids=out.masked_BL, attention_mask=attn,
                                         token_type_ids=types, labels=labels).loss
    ref_disc = ElectraForPreTraining.forward(pair.discriminator, input_ids=out.disc_in_BL, attention_mask=attn,
                                             token_type_ids=types, labels=out.replaced_BL.long()).loss
    assert torch.allclose(gen_loss, ref_gen, atol=1e-5)
    assert torch.allclose(disc_loss, ref_disc, atol=1e-5)
    assert 0 < out.sums["replaced"] <= out.sums["masked"]


def test_4d_bias_equals_2d_mask():
    pair = _tiny_pair().eval()
    ids, types = _batch()
    attn = (ids != SP.pad_id).long()
    ours = pair.discriminator_logits(ids, types, attention_bias(attn.float()))
    ref = pair.discriminator(input_ids=ids, attention_mask=attn, token_type_ids=types).logits
    assert torch.allclose(ours * attn, ref * attn, atol=1e-5)


def test_embeddings_shared_and_tied():
    pair = _tiny_pair()
    assert pair.generator.electra.embeddings is pair.discriminator.electra.embeddings
    assert pair.generator.generator_lm_head.weight is pair.embeddings.word_embeddings.weight
    names = [n for n, _ in pair.named_parameters()]
    assert sum("word_embeddings" in n for n in names) == 1  # listed (and optimised) once


def test_gradients_reach_shared_embeddings_from_both_losses_but_not_through_sampling():
    pair = _tiny_pair()
    ids, types = _batch()
    torch.manual_seed(4)
    out = rtd.electra_step(pair, ids, types, SP, config.ObjectiveConfig())
    emb = pair.embeddings.word_embeddings.weight
    gen_layer = pair.generator.electra.encoder.layer[0].attention.self.query.weight
    disc_layer = pair.discriminator.electra.encoder.layer[0].attention.self.query.weight

    out.parts["gen_loss"].backward(retain_graph=True)
    assert emb.grad.abs().sum() > 0 and gen_layer.grad.abs().sum() > 0
    assert disc_layer.grad is None
    pair.zero_grad(set_to_none=True)

    out.parts["disc_loss"].backward()
    assert emb.grad.abs().sum() > 0 and disc_layer.grad.abs().sum() > 0
    # Discrete sampling cuts the graph: the discriminator's loss never reaches the generator.
    assert gen_layer.grad is None
    assert pair.generator.generator_predictions.dense.weight.grad is None


@pytest.mark.parametrize("objective", ["electra", "electra15"])
def test_step_is_finite_and_deterministic(objective):
    pair = _tiny_pair()
    ids, types = _batch()
    obj = config.ObjectiveConfig(objective=objective)
    torch.manual_seed(5)
    a = rtd.electra_step(pair, ids, types, SP, obj)
    torch.manual_seed(5)
    b = rtd.electra_step(pair, ids, types, SP, obj)
    assert torch.isfinite(a.loss) and torch.equal(a.loss, b.loss) and torch.equal(a.disc_in_BL, b.disc_in_BL)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("objective", ["electra", "electra15"])
def test_step_traces_to_one_graph(objective, packed):
    """Static shapes, no host sync, no data-dependent Python branch: torch.compile (and XLA) see
    the whole forward step as one graph, with the trainer's CPU dropout in place too, and with
    packed rows' per-sequence attention (``doc_BL``)."""
    from kolectra.model.device import Device

    model = Device().place(_tiny_pair()).train()
    ids, types = _batch()
    obj = config.ObjectiveConfig(objective=objective)
    doc = (ids != SP.pad_id).long() * (1 + (torch.arange(ids.shape[1]) >= 10)) if packed else None
    torch._dynamo.reset()
    explained = torch._dynamo.explain(rtd.electra_step)(model, ids, types, SP, obj, doc_BL=doc)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_cpu_device_sets_the_inverse_cdf_sampler_and_the_step_uses_it(monkeypatch):
    from kolectra.model.device import Device

    pair = _tiny_pair()
    assert pair.sampler == "gumbel"  # the reference code's sampler unless a device says otherwise
    assert Device().place(pair).sampler == "inverse_cdf"
    used = []
    real = rtd.sample_tokens
    monkeypatch.setattr(rtd, "sample_tokens", lambda *a, **k: used.append(a[2]) or real(*a, **k))
    ids, types = _batch()
    out = rtd.electra_step(pair, ids, types, SP, config.ObjectiveConfig())
    assert used == ["inverse_cdf"]
    assert ((out.disc_in_BL >= 0) & (out.disc_in_BL < SP.vocab_size)).all()


@pytest.mark.parametrize("block", [8, 37, 128, 1024])
def test_two_level_inverse_cdf_equals_a_full_running_sum(monkeypatch, block):
    """Blocks (full ones and a ragged tail) pick exactly the token a full-width cumsum picks for the
    same uniform, and never a token of probability 0."""
    monkeypatch.setattr(rtd, "CDF_BLOCK", block)
    torch.manual_seed(0)
    logits = torch.randn(5, 300, 37) * 3
    logits[..., ::4] = float("-inf")  # zero-probability tokens, in every block
    probs = torch.softmax(logits, -1)
    torch.manual_seed(1)
    got = rtd._inverse_cdf(probs)
    torch.manual_seed(1)
    u = torch.rand(5, 300, 1) * probs.sum(-1, keepdim=True)
    want = torch.searchsorted(probs.double().cumsum(-1), u.double(), right=True).squeeze(-1)
    assert (got == want).float().mean() > 0.995  # float vs double rounding may move a rare boundary
    assert (got % 4 != 0).all()
    assert ((got >= 0) & (got < 37)).all()
