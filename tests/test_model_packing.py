"""Packed rows (several sequences a row, ``doc_ids``): no sequence sees another.

The proof is behavioural: a sequence's outputs (discriminator logits, generator and MLM
hidden states) are the same, up to float rounding, whether it sits alone at the start of a row
or in the middle of a row between other sequences. The same comparison with either half of
the mechanism taken away (the block-diagonal bias, or positions restarting per sequence) must
fail, so the test cannot pass by accident.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kolectra.model import config, presets, rtd
from kolectra.model.attention import document_attention
from kolectra.model.electra import ElectraPair, attention_bias
from tests.test_model_rtd import SP, _tiny_pair

L = 44


def _sequence(n_a: int, n_b: int, seed: int) -> tuple[list[int], list[int]]:
    """A ``[CLS] A [SEP] (B [SEP])`` sequence of random regular tokens and its segment ids."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(SP.first_regular_id, SP.vocab_size, (n_a,), generator=g).tolist()
    b = torch.randint(SP.first_regular_id, SP.vocab_size, (n_b,), generator=g).tolist()
    ids = [SP.cls_id, *a, SP.sep_id] + ([*b, SP.sep_id] if b else [])
    return ids, [0] * (n_a + 2) + [1] * (len(ids) - n_a - 2)


def _rows(layout: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows of the given sequences (by index into SEQS), padded to L: ids, types, doc ids."""
    ids, types, docs = (torch.zeros(len(layout), L, dtype=torch.long) for _ in range(3))
    for r, seqs in enumerate(layout):
        at = 0
        for d, s in enumerate(seqs, start=1):
            s_ids, s_types = SEQS[s]
            ids[r, at:at + len(s_ids)] = torch.tensor(s_ids)
            types[r, at:at + len(s_ids)] = torch.tensor(s_types)
            docs[r, at:at + len(s_ids)] = d
            at += len(s_ids)
    return ids, types, docs


SEQS = [_sequence(5, 4, 0), _sequence(6, 0, 1), _sequence(4, 6, 2), _sequence(3, 2, 3)]
X = 2  # the sequence compared: 13 tokens
# row 0: X alone; row 1: X after two others (it starts at column 17) and before a third
LAYOUT = [[X], [0, 1, X, 3]]
X_LEN = len(SEQS[X][0])
X_AT = len(SEQS[0][0]) + len(SEQS[1][0])


def _attentive(pair: ElectraPair) -> ElectraPair:
    """At initialisation attention adds little to the residual stream (weights of std 0.02), so a
    leak would move the outputs by only ~1e-3; larger value and output projections make what
    attention carries, and so any leak, show up clearly."""
    with torch.no_grad():
        for net in pair.networks().values():
            for layer in net.electra.encoder.layer:
                layer.attention.self.value.weight.mul_(8.0)
                layer.attention.output.dense.weight.mul_(8.0)
    return pair.eval()


def _x_outputs(pair: ElectraPair, bias, position_BL, ids, types) -> dict[str, torch.Tensor]:
    """Each network's outputs on sequence X, from the alone row and from the packed row."""
    outs = {f"{role} states": net.electra(input_ids=ids, attention_mask=bias, token_type_ids=types,
                                          position_ids=position_BL).last_hidden_state
            for role, net in pair.networks().items()}
    outs["discriminator logits"] = pair.discriminator_logits(ids, types, bias, position_BL)
    return {k: (v[0, :X_LEN].float(), v[1, X_AT:X_AT + X_LEN].float()) for k, v in outs.items()}


def _max_gap(outs) -> dict[str, float]:
    return {k: (alone - packed).abs().max().item() for k, (alone, packed) in outs.items()}


def test_layout_has_x_in_the_middle_of_a_full_row():
    ids, _, docs = _rows(LAYOUT)
    assert X_AT > 0 and (docs[1, X_AT + X_LEN:] > 0).any()  # others before and after X
    assert torch.equal(ids[0, :X_LEN], ids[1, X_AT:X_AT + X_LEN])


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_a_sequence_encodes_the_same_alone_or_packed(attn):
    pair = _attentive(_tiny_pair())
    for net in pair.networks().values():
        net.config._attn_implementation = attn
    ids, types, docs = _rows(LAYOUT)
    bias, position_BL = document_attention(docs)
    with torch.no_grad():
        gaps = _max_gap(_x_outputs(pair, bias, position_BL, ids, types))
        assert all(g < 1e-5 for g in gaps.values()), gaps
        # the alone row is what it was before packing existed: padding mask, positions 0..L-1
        plain = pair.discriminator_logits(ids[:1], types[:1], attention_bias((ids[:1] != 0).float()))
        assert torch.allclose(plain[0, :X_LEN], pair.discriminator_logits(ids, types, bias, position_BL)[0, :X_LEN],
                              atol=1e-5)

        # Either half alone does not isolate X: the test can fail.
        leaky_bias = attention_bias((ids != 0).float())
        shared_positions = torch.arange(L).expand(2, L)
        for name, (b, p) in {"no block bias": (leaky_bias, position_BL),
                             "no position restart": (bias, shared_positions)}.items():
            gaps = _max_gap(_x_outputs(pair, b, p, ids, types))
            # (hidden states: LayerNorm keeps them O(1); an untrained head's logits are all ~0)
            assert all(g > 0.1 for k, g in gaps.items() if "states" in k), (name, gaps)


def test_a_sequence_encodes_the_same_alone_or_packed_in_bf16():
    pair = _attentive(_tiny_pair())
    ids, types, docs = _rows(LAYOUT)
    bias, position_BL = document_attention(docs)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        gaps = _max_gap(_x_outputs(pair, bias, position_BL, ids, types))
        leaks = [_max_gap(_x_outputs(pair, attention_bias((ids != 0).float()), position_BL, ids, types)),
                 _max_gap(_x_outputs(pair, bias, torch.arange(L).expand(2, L), ids, types))]
    # bf16 keeps 8 bits (about 0.01 at these O(1) states): a few roundings at most, far below a leak
    assert all(g < 0.02 for g in gaps.values()), gaps
    for leak in leaks:
        assert all(g > 0.1 for k, g in leak.items() if "states" in k), leak


@pytest.mark.parametrize("objective", ["mlm", "all_tokens_mlm"])
def test_mlm_ablations_isolate_sequences_too(objective):
    m = dataclasses.replace(presets.tiny().model, hidden=32, heads=2, intermediate=64, embedding_size=16,
                            generator_hidden=16, generator_heads=1, generator_intermediate=32, max_position=64)
    torch.manual_seed(0)
    pair = _attentive(ElectraPair(m, SP.vocab_size, SP.pad_id, objective))
    ids, types, docs = _rows(LAYOUT)
    bias, position_BL = document_attention(docs)
    with torch.no_grad():
        logits, h = pair.mlm_logits(ids, types, bias, position_BL=position_BL)
        _, leaky_h = pair.mlm_logits(ids, types, attention_bias((ids != 0).float()), position_BL=position_BL)
    assert torch.allclose(logits[0, :X_LEN], logits[1, X_AT:X_AT + X_LEN], atol=1e-5)
    assert torch.allclose(h[0, :X_LEN], h[1, X_AT:X_AT + X_LEN], atol=1e-5)
    assert (leaky_h[0, :X_LEN] - leaky_h[1, X_AT:X_AT + X_LEN]).abs().max() > 0.1


def test_positions_restart_and_padding_sees_only_itself():
    _, _, docs = _rows(LAYOUT)
    bias, position_BL = document_attention(docs)
    lengths = [len(SEQS[s][0]) for s in LAYOUT[1]]
    want = [p for n in lengths for p in range(n)]
    assert position_BL[1, :len(want)].tolist() == want
    assert position_BL[0, :X_LEN].tolist() == list(range(X_LEN))
    keep = bias[1, 0] == 0
    assert keep[X_AT, X_AT:X_AT + X_LEN].all() and keep[X_AT].sum() == X_LEN  # X sees X, all of it, only it
    pad = docs[1] == 0
    assert not keep[~pad][:, pad].any()  # no real token attends to padding
    assert torch.equal(keep[pad][:, pad], torch.eye(int(pad.sum()), dtype=torch.bool))  # padding sees itself only
    assert not keep[pad][:, ~pad].any()
    assert bias.shape == (2, 1, L, L)


def test_packed_step_masks_15_percent_of_real_text_and_never_specials():
    ids, types, docs = _rows([[0, 1, X, 3]] * 64)
    torch.manual_seed(0)
    pos, w = rtd.choose_positions(ids, SP, 0.15)
    chosen = torch.gather(ids, 1, pos)[w > 0]
    assert not ((chosen == SP.cls_id) | (chosen == SP.sep_id) | (chosen == SP.pad_id)).any()
    text = int(rtd.candidates(ids[:1], SP).sum())
    assert (w.sum(1) == int(0.15 * text + 0.5)).all()  # 15% of the row's text (half up), not of L
    out = rtd.electra_step(_tiny_pair(), ids, types, SP, config.ObjectiveConfig(), doc_BL=docs)
    assert torch.isfinite(out.loss) and out.sums["disc_tokens"] == (ids != 0).sum()
