"""The replaced-token-detection objective: masking, sampling, labels, losses and gradients."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from model import config, rtd
from model.electra import ElectraPair, attention_bias

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
    m = dataclasses.replace(config.tiny().model, hidden=32, heads=2, intermediate=64, embedding_size=16,
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


def test_gumbel_max_sampling_matches_softmax():
    torch.manual_seed(0)
    logits = torch.tensor([[[2.0, 1.0, 0.0, -1.0]]]).expand(1, 20000, 4)
    counts = torch.bincount(rtd.sample_tokens(logits, 1.0).flatten(), minlength=4).float() / 20000
    assert torch.allclose(counts, torch.softmax(logits[0, 0], -1), atol=0.015)
    cold = torch.bincount(rtd.sample_tokens(logits, 0.05).flatten(), minlength=4)
    assert cold[0] == 20000


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


@pytest.mark.parametrize("objective", ["electra", "electra15"])
def test_step_traces_to_one_graph(objective):
    """Static shapes, no host sync, no data-dependent Python branch: torch.compile (and XLA) see
    the whole forward step as one graph, with the trainer's CPU dropout in place too."""
    from model.device import Device

    model = Device().place(_tiny_pair()).train()
    ids, types = _batch()
    obj = config.ObjectiveConfig(objective=objective)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(rtd.electra_step)(model, ids, types, SP, obj)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
