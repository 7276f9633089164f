"""Write the trained pair as two standalone Hugging Face models: the checkpoint's public face.

``hf/discriminator`` (``ElectraForPreTraining``; what fine-tuning loads, also as ``AutoModel``)
and ``hf/generator`` (``ElectraForMaskedLM``), each saved with ``save_pretrained``
(safetensors) plus the tokenizer files, so ``from_pretrained(dir)`` works without kolectra.
Inside training the two may share one embedding module; each export gets its own CPU copy holding
the shared weights, so the generator is a complete masked LM by itself (with GDES sharing the
discriminator's tables are exported with their deltas folded in: a stock ElectraForPreTraining). A model card
(README.md) records objective, preset, sizes, FLOPs, hardware and wall time, and the lineage
(artifact ids back to the raw text) when the artifact store hands it down, under the YAML
metadata the Hugging Face Hub reads (:mod:`model.card`).

MLM ablations (``objective.objective`` in mlm, replace_mlm, all_tokens_mlm): the
discriminator-sized network is a masked LM, so ``hf/discriminator`` holds an
``ElectraForMaskedLM`` (architectures = ElectraForMaskedLM). ``AutoModel`` and every
``ElectraFor*`` task class load its encoder (``electra.*``) as usual, which is all fine-tuning
needs; ``ElectraForPreTraining`` would start a fresh RTD head. All-Tokens MLM's copy head is a
pretraining device and is not exported, nor is the vocabulary head of hybrid, corrective and
mlm_then_rtd, whose ``hf/discriminator`` is a stock ``ElectraForPreTraining`` as for ELECTRA. ``hf/generator`` is the generator; the plain "mlm"
(BERT) baseline has none, so there it is the trained masked LM itself, for the same uses
(fill-mask, continued pretraining).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from transformers import ElectraForMaskedLM
from transformers.utils import logging as hf_logging

from kolectra.model.card import LICENSE, front_matter
from kolectra.model.checkpoint import writing_into, written
from kolectra.model.electra import ElectraPair, count_parameters, plain_state_dict
from kolectra.model.export_files import (
    FILL_MASK,
    fit_max_length,
    mask_in_text,
    one_segment_inputs,
    one_segment_pairs,
    untrained_positions,
)

ROLE_TEXT = {
    ("discriminator", "ElectraForPreTraining"): "the discriminator: the encoder to fine-tune (replaced token "
                                               "detection head included).",
    ("discriminator", "ElectraForMaskedLM"): "the discriminator-sized encoder, trained as a masked LM "
                                            "(an ablation from the paper); fine-tune it like a discriminator.",
    ("generator", "ElectraForMaskedLM"): "the generator: a masked language model.",
}

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def _standalone(cls, hf_model):
    """A fresh CPU model of ``cls`` with ``hf_model``'s weights (shared modules become copies)."""
    state = {k: v.detach().to("cpu", copy=True) for k, v in plain_state_dict(hf_model).items()}
    model = cls(hf_model.config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    # The tied output layer may be absent from state when tying already covers it.
    missing = [k for k in missing if k != "generator_lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"export of {cls.__name__}: missing {missing}, unexpected {unexpected}")
    if isinstance(model, ElectraForMaskedLM):
        model.generator_lm_head.weight = model.electra.embeddings.word_embeddings.weight
    return model.eval()


def copy_tokenizer(tokenizer_dir: Path, dest: Path) -> None:
    found = [n for n in TOKENIZER_FILES if (Path(tokenizer_dir) / n).is_file()]
    if "tokenizer.json" not in found and "vocab.txt" not in found:
        raise FileNotFoundError(f"{tokenizer_dir}: no tokenizer.json or vocab.txt to copy into the export")
    for name in found:
        shutil.copyfile(Path(tokenizer_dir) / name, dest / name)


def _cell(value) -> str:
    """A value on one line of a Markdown table: a ``|`` or a line break in it (an ``init_from`` path
    may hold either) ended the cell or the table."""
    return " ".join(str(value).split()).replace("|", "\\|")


def model_card(title: str, role: str, cls_name: str, facts: dict, lineage: list[str] | None = None,
               warnings: list[str] = (), positions: int | None = None) -> str:
    rows = "\n".join(f"| {_cell(k)} | {_cell(v)} |" for k, v in facts.items())
    alert = "".join(f"> **{w}**\n\n" for w in warnings)
    tree = ("\n## Lineage\n\nkolectra artifacts, back to the raw text:\n\n```\n" + "\n".join(lineage) + "\n```\n"
            if lineage else "")
    # no Hub datasets/base_model here: the lineage's corpora and a local init_from are not Hub ids
    meta = front_matter(cls_name, str(facts.get("objective", "electra")))
    return (f"{meta}\n# {title}\n\n{alert}This directory is {ROLE_TEXT[(role, cls_name)]} It was trained by kolectra's "
            f"pretrain stage (ELECTRA, Clark et al. 2020, \"Pre-training Text Encoders as Discriminators Rather "
            f"Than Generators\") on Korean text, and loads with `transformers` alone:\n\n"
            f"```python\nfrom transformers import AutoTokenizer, {cls_name}\n"
            f"tokenizer = AutoTokenizer.from_pretrained(path)\nmodel = {cls_name}.from_pretrained(path)\n```\n\n"
            + (f"{FILL_MASK}\n\n" if role == "generator" else "")
            + (f"{note}\n\n" if (note := untrained_positions(facts.get("sequence length"), positions,
                                                              "initialised from" in facts)) else "")
            + f"## Training\n\n| | |\n| --- | --- |\n{rows}\n{tree}"
            f"\n## Licence\n\n`{LICENSE}` above is kolectra's licence; the weights carry what their training "
            f"text allows, so change it when that text demands another.\n")


def export_pair(model: ElectraPair, tokenizer_dir: Path, hf_dir: Path, facts: dict,
                lineage: list[str] | None = None, warnings: list[str] = ()) -> dict[str, Path]:
    """Save discriminator and generator under ``hf_dir``; returns their directories."""
    out = {}
    disc_cls = type(model.discriminator)
    generator = model.generator if model.generator is not None else model.discriminator
    for role, cls, net in (("discriminator", disc_cls, model.discriminator),
                           ("generator", ElectraForMaskedLM, generator)):
        dest = Path(hf_dir) / role
        dest.mkdir(parents=True, exist_ok=True)
        standalone = _standalone(cls, net)
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # stderr carries kolectra's own progress lines
        try:
            with torch.no_grad():  # a full disk names the folder (safetensors' own error names no file)
                written(dest, lambda path: standalone.save_pretrained(path, safe_serialization=True), "export")
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        card = {"class": cls.__name__, "parameters": f"{count_parameters(standalone):,}", **facts}
        title = f"kolectra ELECTRA {role} ({facts.get('preset', '')}, {facts.get('objective', 'electra')})"
        with writing_into(dest, "export"):  # a full disk here names the folder too, not the tokenizer's source
            copy_tokenizer(tokenizer_dir, dest)
            fit_max_length(dest / "tokenizer_config.json", standalone.config.max_position_embeddings)
            one_segment_inputs(dest / "tokenizer_config.json", standalone.config.type_vocab_size)
            one_segment_pairs(dest / "tokenizer.json", standalone.config.type_vocab_size)
            if role == "generator":
                mask_in_text(dest / "tokenizer_config.json")
            (dest / "README.md").write_text(model_card(title, role, cls.__name__, card, lineage, warnings,
                                                           standalone.config.max_position_embeddings),
                                            encoding="utf-8")
        out[role] = dest
    return out
