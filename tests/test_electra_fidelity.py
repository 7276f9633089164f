"""kolectra's ELECTRA against the reference (google-research/electra) and Hugging Face's Electra classes.

The presets' shapes and recipe follow the reference's ``configure_pretraining.py`` (and the
paper's table 6 for Base, which the reference writes as a comment), the ``electra`` fine-tuning
presets its ``configure_finetuning.py`` and ``model/optimization.py``; the exported folders are
stock ``ElectraForPreTraining`` / ``ElectraModel`` / ``ElectraForMaskedLM`` that give what the
training pair gives, padding and the second segment included.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from kolectra.finetune import config as ft
from kolectra.model import presets
from kolectra.model.electra import ElectraPair, attention_bias
from kolectra.model.export import export_pair
from tests.model_support import build_tokenizer


def reference_generator(hidden: int, layers: int, share: float) -> dict:
    """The reference's ``get_generator_config``: the hidden size scaled, 64-wide heads, a 4x FFN."""
    gen_hidden = int(round(hidden * share))
    return {
        "generator_hidden": gen_hidden,
        "generator_layers": layers,
        "generator_heads": max(1, gen_hidden // 64),
        "generator_intermediate": 4 * gen_hidden,
    }


@pytest.mark.parametrize(
    "name, shape, share, recipe",
    [
        # (hidden, layers, heads, FFN, embeddings), generator share, (lr, batch, steps, sequence)
        ("small", (256, 12, 4, 1024, 128), 0.25, (5e-4, 128, 1_000_000, 128)),
        ("base", (768, 12, 12, 3072, 768), 0.33333, (2e-4, 256, 766_000, 512)),
    ],
)
def test_pretraining_presets_are_the_reference_shapes_and_recipe(name, shape, share, recipe):
    cfg = presets.preset(name)
    m, t, o = cfg.model, cfg.train, cfg.objective
    assert (m.hidden, m.layers, m.heads, m.intermediate, m.embedding_size) == shape
    gen = {
        k: getattr(m, k) for k in ("generator_hidden", "generator_layers", "generator_heads", "generator_intermediate")
    }
    assert gen == reference_generator(m.hidden, m.layers, share)
    assert (m.dropout, m.attention_dropout, m.max_position, m.type_vocab_size, m.embedding_sharing) == (
        0.1,
        0.1,
        512,
        2,
        "es",
    )
    assert (t.lr, t.batch_size, t.steps, cfg.max_seq_length) == recipe
    assert (t.warmup_steps, t.weight_decay, t.adam_eps, t.clip) == (10_000, 0.01, 1e-6, 1.0)
    assert (o.objective, o.mask_prob, o.mask_token_prob, o.random_token_prob, o.disc_weight, o.temperature) == (
        "electra",
        0.15,
        0.85,
        0.0,
        50.0,
        1.0,
    )


@pytest.mark.parametrize(
    "presets", [ft.NSMC_PRESETS, ft.KORQUAD_PRESETS, ft.CLASSIFY_PRESETS, ft.REGRESS_PRESETS, ft.NER_PRESETS]
)
def test_electra_finetuning_presets_use_the_reference_optimizer(presets):
    """lr 1e-4, weight decay 0.01, 10 % warm-up, layer-wise decay 0.8, Adam betas 0.9/0.999, eps 1e-6
    (the reference's AdamWeightDecayOptimizer; until 2026-11-30 the presets kept the koelectra
    default's eps 1e-8)."""
    o = presets["electra"]().optim
    assert (o.lr, o.weight_decay, o.warmup_fraction, o.layerwise_lr_decay) == (1e-4, 0.01, 0.1, 0.8)
    assert (tuple(o.adam_betas), o.adam_eps, o.max_grad_norm) == ((0.9, 0.999), 1e-6, 1.0)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.mark.parametrize("sharing", ["es", "gdes", "none"])
def test_the_export_gives_what_the_pair_gives_on_padded_two_segment_rows(sharing, tokenizer_dir, tmp_path):
    """Embeddings narrower than both networks (each projects them, as ELECTRA-Small does), every weight
    perturbed (LayerNorms, biases, GDES deltas), a padded batch whose rows hold segment 1: the stock
    classes loaded from the export equal the training pair, and AutoModel leaves out only the RTD head."""
    from transformers import AutoModel, ElectraForMaskedLM, ElectraForPreTraining

    base = presets.tiny().model
    cfg = dataclasses.replace(base, embedding_size=48, generator_heads=2, max_position=32, embedding_sharing=sharing)
    torch.manual_seed(0)
    pair = ElectraPair(cfg, 300, 0)
    with torch.no_grad():
        for p in pair.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    pair.eval()
    dirs = export_pair(pair, tokenizer_dir, tmp_path / "hf", {"preset": "tiny", "objective": "electra"})
    ids = torch.tensor(
        [
            [2, 10, 11, 12, 3, 13, 14, 15, 3, 0, 0, 0],
            [2, 20, 21, 3, 22, 23, 3, 0, 0, 0, 0, 0],
            [2, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 3],
        ]
    )
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0], [0] * 12])
    mask = (ids != 0).long()
    real = mask.bool()
    hf = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    bias = attention_bias(mask.float())
    disc = ElectraForPreTraining.from_pretrained(str(dirs["discriminator"])).eval()
    encoder, info = AutoModel.from_pretrained(str(dirs["discriminator"]), output_loading_info=True)
    gen = ElectraForMaskedLM.from_pretrained(str(dirs["generator"])).eval()
    assert not info["missing_keys"] and {k.split(".")[0] for k in info["unexpected_keys"]} == {
        "discriminator_predictions"
    }
    with torch.no_grad():
        ours = pair.discriminator_logits(ids, types, bias)
        hidden = pair.discriminator.electra(input_ids=ids, attention_mask=bias, token_type_ids=types).last_hidden_state
        gen_ours = pair.generator_logits(ids, types, bias, torch.arange(12).expand(3, 12))
        torch.testing.assert_close(disc(**hf).logits[real], ours[real], rtol=0, atol=1e-6)
        torch.testing.assert_close(encoder.eval()(**hf).last_hidden_state[real], hidden[real], rtol=0, atol=1e-6)
        torch.testing.assert_close(gen(**hf).logits[real], gen_ours[real], rtol=0, atol=1e-6)
    # the segment ids reach the model: the same rows as one segment give other logits
    assert not torch.allclose(disc(input_ids=ids, attention_mask=mask).logits[real], ours[real], atol=1e-4)


def test_the_exported_tokenizer_gives_the_ids_the_examples_stage_trained_on(tmp_path):
    """What the examples stage encodes with (tokenizer.json through ``tokenizers``, specials never matched
    in text) and what a user of the exported folder gets from ``AutoTokenizer``: the same ids and segments."""
    from transformers import AutoTokenizer

    from kolectra.core.tokens import SPECIALS
    from kolectra.corpus.examples import load_tokenizer
    from kolectra.vocab.export import write_dir

    chars = sorted(set("나는영화를정말좋아한다배우가어제봤다."))
    vocab = [*SPECIALS, *chars, *(f"##{c}" for c in chars), "영화", "##를", "배우", "정말"]
    (tmp_path / "vocab").mkdir()
    write_dir(vocab, tmp_path / "vocab")
    pair = ElectraPair(dataclasses.replace(presets.tiny().model, max_position=32), len(vocab), 0)
    hf_dir = export_pair(pair, tmp_path / "vocab", tmp_path / "hf", {"preset": "tiny"})["discriminator"]
    trained, user = load_tokenizer(tmp_path / "vocab"), AutoTokenizer.from_pretrained(str(hf_dir))
    for text, second in [
        ("영화를 정말 좋아한다.", None),
        ("[MASK] 배우가 [SEP] 봤다", "나는  어제\t봤다."),
        ("영화 ⓐ", "정말"),
    ]:
        ours = trained.encode(text) if second is None else trained.encode(text, second)
        theirs = user(text, second)
        assert theirs["input_ids"] == ours.ids and theirs["token_type_ids"] == ours.type_ids, text
        assert user.mask_token_id not in theirs["input_ids"]
