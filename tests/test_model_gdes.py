"""Embedding sharing: ELECTRA's (es), DeBERTaV3's gradient-disentangled (gdes) and none.

What GDES promises: the discriminator's tables are the generator's (detached) plus a zero-initialised
delta, so the discriminator's loss moves only the delta and the generator's loss only the generator's
tables; the export is a stock ElectraForPreTraining with the delta folded in; resume is exact.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import ElectraForMaskedLM, ElectraForPreTraining

from kolectra.core.config import ConfigError
from kolectra.model import config, init, presets, rtd, train
from kolectra.model.electra import TABLES, ElectraPair, attention_bias
from tests.model_support import build_examples, build_tokenizer, stop_in_step

V = 60


def _pair(sharing: str, objective: str = "electra") -> ElectraPair:
    torch.manual_seed(0)
    model_cfg = dataclasses.replace(presets.tiny().model, embedding_sharing=sharing, vocab_size=V)
    return ElectraPair(model_cfg, V, 0, objective)


def _grads(pair: ElectraPair, part: str) -> dict[str, float]:
    """Gradient mass each embedding table receives from one loss term."""
    pair.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    ids = torch.randint(5, V, (4, 24))
    out = rtd.electra_step(pair, ids, torch.zeros_like(ids), rtd.Specials(vocab_size=V), presets.tiny().objective)
    out.parts[part].backward()
    total = {}
    for name, p in pair.named_parameters():
        if "embeddings" in name and any(t in name for t in TABLES):
            owner = "generator" if name.startswith("generator.") else "discriminator"
            total[owner] = total.get(owner, 0.0) + (0.0 if p.grad is None else float(p.grad.abs().sum()))
    return total


def test_gdes_separates_the_two_losses_and_es_does_not():
    gdes = _pair("gdes")
    disc_emb = gdes.discriminator.electra.embeddings
    assert all(torch.count_nonzero(getattr(disc_emb, t).parametrizations.weight.original) == 0 for t in TABLES)
    assert torch.equal(disc_emb.word_embeddings.weight, gdes.generator.electra.embeddings.word_embeddings.weight)
    from_disc, from_gen = _grads(gdes, "disc_loss"), _grads(gdes, "gen_loss")
    assert from_disc["generator"] == 0.0 and from_disc["discriminator"] > 0  # only the delta learns RTD
    assert from_gen["generator"] > 0 and from_gen["discriminator"] == 0.0  # the MLM loss moves the shared tables
    es = _pair("es")
    assert es.generator.electra.embeddings is es.discriminator.electra.embeddings
    assert _grads(es, "disc_loss")["discriminator"] > 0 and _grads(es, "gen_loss")["discriminator"] > 0
    none = _pair("none")
    assert none.generator.electra.embeddings is not none.discriminator.electra.embeddings
    assert _grads(none, "disc_loss").get("generator", 0.0) == 0.0
    # the generator's output layer stays tied to its own word embeddings in every mode
    for pair in (gdes, es, none):
        assert pair.generator.generator_lm_head.weight is pair.generator.electra.embeddings.word_embeddings.weight


def test_gdes_is_for_replaced_token_detection_only():
    cfg = presets.tiny()
    bad = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, embedding_sharing="gdes"),
                              objective=dataclasses.replace(cfg.objective, objective="replace_mlm"))
    with pytest.raises(ConfigError, match="embedding_sharing=gdes"):
        bad.validate()
    with pytest.raises(ConfigError, match="expected one of"):
        dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, embedding_sharing="both")).validate()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gdes")
    tok = build_tokenizer(root / "tok")
    return build_examples(root / "examples", tok, n=64, seq_len=32), tok


def _cfg(sharing: str, **train_kw) -> config.PretrainConfig:
    cfg = presets.tiny()
    t = dict(steps=12, batch_size=8, warmup_steps=2, log_every=1, lr=3e-3, cpu_threads=1, save_every=4)
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, embedding_sharing=sharing),
                               train=dataclasses.replace(cfg.train, **{**t, **train_kw}))


class Stop(Exception):
    pass


def _rows(out):
    return [{k: v for k, v in json.loads(x).items() if k not in ("tokens_per_s", "mfu")}
            for x in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("sharing", ["gdes", "none"])
def test_resume_is_exact_and_the_export_folds_the_delta_in(inputs, tmp_path, monkeypatch, sharing):
    examples, tok = inputs
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    train.pretrain(_cfg(sharing), examples, tok, straight)
    resume_step = stop_in_step(monkeypatch, 7, Stop())
    with pytest.raises(Stop):
        train.pretrain(_cfg(sharing), examples, tok, cut)
    resume_step()
    assert train.pretrain(_cfg(sharing), examples, tok, cut, resume=True).stats["resumed_from_step"] == 4
    assert _rows(cut) == _rows(straight)
    for role in ("discriminator", "generator"):
        assert (cut / "hf" / role / "model.safetensors").read_bytes() == \
               (straight / "hf" / role / "model.safetensors").read_bytes()

    # The export is a stock pair; its discriminator computes what the trained one did.
    disc = ElectraForPreTraining.from_pretrained(straight / "hf" / "discriminator").eval()
    gen = ElectraForMaskedLM.from_pretrained(straight / "hf" / "generator").eval()
    weights = load_file(straight / "hf" / "discriminator" / "model.safetensors")
    assert not any("parametrizations" in k for k in weights)
    V_tok = train.data.read_index(examples).vocab_size
    model_cfg = dataclasses.replace(_cfg(sharing).model, vocab_size=V_tok)
    pair = ElectraPair(model_cfg, V_tok, 0)
    init.load_pair(pair, straight / "hf", model_cfg, V_tok, 0)  # continued pretraining re-creates the deltas
    ids = torch.tensor([[2, 10, 11, 12, 3, 0]])
    with torch.no_grad():
        ours = pair.eval().discriminator_logits(ids, torch.zeros_like(ids), attention_bias((ids != 0).float()))
        assert torch.allclose(ours, disc(input_ids=ids, attention_mask=(ids != 0).long()).logits, atol=1e-5)
    emb = pair.discriminator.electra.embeddings.word_embeddings
    if sharing == "gdes":
        delta = emb.parametrizations.weight.original
        assert torch.allclose(gen.electra.embeddings.word_embeddings.weight + delta,
                              disc.electra.embeddings.word_embeddings.weight, atol=1e-6)
        assert delta.abs().sum() > 0  # the discriminator did learn its own part
