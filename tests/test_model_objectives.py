"""The paper's ablations (section 3.2): BERT-style MLM, ELECTRA 15%, Replace MLM, All-Tokens MLM."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from transformers import AutoModel, ElectraForMaskedLM, ElectraForSequenceClassification

from kolectra.model import config, metrics, objectives, presets, rtd, train
from kolectra.model.electra import ElectraPair
from tests.model_support import small_examples
from tests.test_model_rtd import SP, _batch

OBJ = config.ObjectiveConfig


def _pair(objective):
    m = dataclasses.replace(presets.tiny().model, hidden=32, heads=2, intermediate=64, embedding_size=16,
                            generator_hidden=16, generator_heads=1, generator_intermediate=32, max_position=64)
    torch.manual_seed(0)
    return ElectraPair(m, SP.vocab_size, SP.pad_id, objective)


@pytest.mark.parametrize("objective", config.OBJECTIVES)
def test_every_objective_steps_and_trains_the_right_networks(objective):
    pair = _pair(objective)
    ids, types = _batch()
    torch.manual_seed(1)
    out = objectives.step_function(objective)(pair, ids, types, SP, OBJ(objective=objective))
    assert torch.isfinite(out.loss)
    out.loss.backward()
    emb = pair.embeddings.word_embeddings.weight
    assert emb.grad is not None and emb.grad.abs().sum() > 0  # shared embeddings learn in every variant
    if objective == "mlm":
        assert pair.generator is None and "gen_correct" not in out.sums
        # BERT: the network sees [MASK]s, not generator samples.
        assert torch.equal(out.disc_in_BL, out.masked_BL)
    else:
        assert pair.generator.electra.encoder.layer[0].output.dense.weight.grad is not None
    if objective in config.MLM_OBJECTIVES:
        assert isinstance(pair.discriminator, ElectraForMaskedLM)
        assert pair.discriminator.generator_lm_head.weight is emb  # output layer tied to the shared embeddings
        assert torch.allclose(out.loss, out.parts["gen_loss"] + out.parts["mlm_loss"])
        assert 0 <= out.sums["mlm_correct"] <= out.sums["mlm_tokens"]
    elif objective in config.DISC_LM_OBJECTIVES:  # mlm_then_rtd without knobs: its RTD phase
        lm = 0.0 if objective == "mlm_then_rtd" else out.parts["disc_mlm_loss"]
        assert torch.allclose(out.loss, out.parts["gen_loss"] + 50 * out.parts["disc_loss"] + lm)
    else:
        assert torch.allclose(out.loss, out.parts["gen_loss"] + 50 * out.parts["disc_loss"])
    if objective == "all_tokens_mlm":
        assert pair.copy_head.dense_prediction.weight.grad is not None
        assert out.sums["mlm_tokens"] == (ids != SP.pad_id).sum()  # every real token is predicted
        # what copying cannot get right, for the health check: the real tokens whose input is not the original
        assert out.sums["mlm_replaced"] == ((out.disc_in_BL != ids) & (ids != SP.pad_id)).sum() > 0


def test_electra15_counts_only_masked_positions():
    pair = _pair("electra15")
    ids, types = _batch()
    torch.manual_seed(2)
    out = rtd.electra_step(pair, ids, types, SP, OBJ(objective="electra15"))
    assert out.sums["disc_tokens"] == out.sums["masked"] < (ids != SP.pad_id).sum()
    torch.manual_seed(2)
    full = rtd.electra_step(pair, ids, types, SP, OBJ())
    assert full.sums["disc_tokens"] == (ids != SP.pad_id).sum()


def test_replace_mlm_predicts_originals_from_generator_samples():
    pair = _pair("replace_mlm").eval()
    ids, types = _batch()
    torch.manual_seed(3)
    out = objectives.masked_lm_step(pair, ids, types, SP, OBJ(objective="replace_mlm"))
    # The MLM's input is the generator-filled sequence (no [MASK] left from masking).
    chosen = torch.gather(out.disc_in_BL, 1, out.positions_BN)[out.weights_BN > 0]
    assert not (chosen == SP.mask_id).any() and (torch.gather(out.masked_BL, 1, out.positions_BN) == SP.mask_id).any()
    # Its loss is the cross-entropy of the originals at the masked slots.
    logits, _ = pair.mlm_logits(out.disc_in_BL, types, rtd.attention_bias((ids != 0).float()), out.positions_BN)
    target = torch.gather(ids, 1, out.positions_BN)
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
    w = out.weights_BN.flatten()
    assert torch.allclose(out.parts["mlm_loss"], (ce * w).sum() / w.sum(), atol=1e-6)


def test_copy_mechanism_is_a_distribution():
    """D * [y = x] + (1 - D) * softmax sums to 1 over all targets y, for copy and non-copy inputs."""
    torch.manual_seed(0)
    V = 11
    logits = torch.randn(1, 3, V)
    copy_logit = torch.tensor([[2.0, -1.0, 0.3]])
    inputs = torch.tensor([[4, 7, 0]])
    total = torch.zeros(1, 3)
    for y in range(V):
        total += objectives.copy_log_likelihood(logits, copy_logit, inputs, torch.full((1, 3), y)).exp()
    assert torch.allclose(total, torch.ones(1, 3), atol=1e-6)
    d = torch.sigmoid(copy_logit[0, 0])
    p = torch.softmax(logits[0, 0], -1)[4]
    same = objectives.copy_log_likelihood(logits, copy_logit, inputs, inputs)[0, 0].exp()
    assert torch.allclose(same, d + (1 - d) * p)


def test_step_normalizers_match_the_masked_slots():
    ids, _ = _batch()
    for p in (0.15, 0.3, 0.5):
        torch.manual_seed(0)
        _, w = rtd.choose_positions(ids, SP, p)
        masked, tokens = rtd.normalizers(ids, SP, p).tolist()
        assert masked == w.sum().item() and tokens == (ids != 0).sum().item()


def test_auc_from_histograms_matches_pairwise_count():
    rng = np.random.default_rng(0)
    pos, neg = rng.normal(1.0, 1.0, 300), rng.normal(-0.5, 1.0, 500)
    exact = ((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (300 * 500)
    logits = torch.tensor(np.concatenate([pos, neg]), dtype=torch.float32)[None]
    labels = torch.cat([torch.ones(300), torch.zeros(500)])[None]
    s = rtd.discriminator_sums(logits, labels, torch.ones_like(labels))
    auc = metrics.auc_from_histograms(s["hist_replaced"].tolist(), s["hist_original"].tolist())
    assert abs(auc - exact) < 1e-3
    assert s["disc_tp"] == (pos > 0).sum() and s["disc_pred_pos"] == (pos > 0).sum() + (neg > 0).sum()


@pytest.mark.parametrize("shape", ["plateau", "narrow", "trained", "wide"])
def test_binned_auc_equals_sklearn_on_the_same_logits(shape):
    """The trainer's AUC (histograms summed over micro-steps, read at log time) against scikit-learn's
    exact ``roc_auc_score`` on the same logits: within 1e-3 where the 64 bins of 0.25 logits used
    before read up to 0.035 low (a plateau's logits all lie within a few tenths of -2)."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    B, L = 64, 128
    mean_pos, mean_neg, sd = {"plateau": (-1.9, -2.1, 0.25), "narrow": (-2.0, -2.02, 0.05),
                              "trained": (2.0, -9.0, 3.0), "wide": (0.0, -12.0, 6.0)}[shape]
    replaced = torch.tensor(rng.random((B, L)) < 0.11, dtype=torch.float32)
    logits = torch.tensor(np.where(replaced.numpy() > 0, rng.normal(mean_pos, sd, (B, L)),
                                   rng.normal(mean_neg, sd, (B, L))), dtype=torch.float32)
    w = torch.ones(B, L)
    w[:, 100:] = 0.0  # padding is left out of both
    sums = [rtd.discriminator_sums(logits[i:i + 16], replaced[i:i + 16], w[i:i + 16]) for i in range(0, B, 16)]
    pos = sum(s["hist_replaced"] for s in sums)
    neg = sum(s["hist_original"] for s in sums)
    assert pos.shape == (rtd.AUC_BINS,) and pos.sum() + neg.sum() == w.sum()
    auc = metrics.auc_from_histograms(pos.tolist(), neg.tolist())
    keep = w.flatten() > 0
    exact = roc_auc_score(replaced.flatten()[keep].numpy(), logits.flatten()[keep].numpy())
    assert abs(auc - exact) < 1e-3, (auc, exact)


def test_metrics_resume_drops_histograms_of_another_bin_count():
    from kolectra.model.device import Device

    log = metrics.MetricsLog.__new__(metrics.MetricsLog)
    log.dev = Device()
    log.load_state_dict({"sums": {"hist_replaced": torch.ones(64), "hist_original": torch.ones(64),
                                  "disc_tokens": torch.tensor(5.0)}, "tokens": 3, "steps": 1})
    assert set(log.sums) == {"disc_tokens"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return small_examples(tmp_path_factory.mktemp("inputs"))


@pytest.mark.parametrize("objective", ["mlm", "all_tokens_mlm"])
def test_ablation_trains_and_exports_a_finetunable_encoder(objective, inputs, tmp_path):
    examples, tok = inputs
    cfg = presets.tiny()
    cfg = dataclasses.replace(cfg, objective=dataclasses.replace(cfg.objective, objective=objective),
                              train=dataclasses.replace(cfg.train, steps=6, batch_size=8, warmup_steps=2,
                                                        log_every=3, lr=3e-3))
    result = train.pretrain(cfg, examples, tok, tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [3, 6] and all(np.isfinite(r["mlm_loss"]) for r in rows)
    assert "disc_loss" not in rows[0] and 0 <= rows[-1]["mlm_acc"] <= 1
    assert result.stats["objective"] == objective
    if objective == "all_tokens_mlm":  # its health is judged against copying the input
        assert 0 < rows[-1]["input_replaced_share"] < 0.5
        assert result.stats["health"]["figures"]["copy_only_loss"] > 0
    disc_dir = tmp_path / "hf" / "discriminator"
    assert json.loads((disc_dir / "config.json").read_text())["architectures"] == ["ElectraForMaskedLM"]
    enc = AutoModel.from_pretrained(disc_dir)
    clf = ElectraForSequenceClassification.from_pretrained(disc_dir, num_labels=2)
    assert torch.equal(enc.embeddings.word_embeddings.weight, clf.electra.embeddings.word_embeddings.weight)
    gen = ElectraForMaskedLM.from_pretrained(tmp_path / "hf" / "generator")
    assert gen.config.hidden_size == (cfg.model.hidden if objective == "mlm" else cfg.model.generator_hidden)
    assert "masked LM" in (disc_dir / "README.md").read_text()
