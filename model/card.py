"""The YAML front matter of an exported model's card (``README.md``), as the Hugging Face Hub reads it.

The metadata block is written by ``huggingface_hub.ModelCardData`` (the Hub's own writer), so the
keys are the ones the Hub indexes: ``language: ko``, ``license``, ``library_name: transformers``,
``tags`` (the objective's among them; the RTD family's objectives with a vocabulary head also get
``objective-<name>``), ``datasets`` (the corpus artifacts the model was trained on, from the
lineage), ``metrics`` (what the card reports) and ``base_model`` when pretraining
continued from another pair (``train.init_from``). ``huggingface_hub.ModelCard.load(dir)`` and any
YAML reader parse it back.

The licence is kolectra's own (Apache-2.0); what a trained model may be used for depends on its
training text, so the card's body says to change it when that text demands another.
"""

from __future__ import annotations

import re

from huggingface_hub import ModelCardData

LICENSE = "apache-2.0"
OBJECTIVE_TAGS = {"electra": "replaced-token-detection", "electra15": "replaced-token-detection",
                  "mlm": "masked-language-modeling", "replace_mlm": "masked-language-modeling",
                  "all_tokens_mlm": "masked-language-modeling",
                  "hybrid": ["replaced-token-detection", "masked-language-modeling"],
                  "corrective": ["replaced-token-detection", "corrective-language-modeling"],
                  "mlm_then_rtd": ["masked-language-modeling", "replaced-token-detection"]}
# what each exported network's card reports (metric ids as the Hub names them)
METRICS = {"ElectraForPreTraining": ["accuracy", "precision", "recall", "roc_auc"],
           "ElectraForMaskedLM": ["accuracy"]}


def corpora(lineage: list[str] | None) -> list[str]:
    """The corpus artifacts (``corpus/<name>-<id>``) named in the lineage tree's lines."""
    found = []
    for line in lineage or []:
        for label in re.findall(r"corpus/[A-Za-z0-9_.+-]+", line):
            if label not in found:
                found.append(label)
    return found


def _as_list(tag: str | list[str]) -> list[str]:
    return tag if isinstance(tag, list) else [tag]


def front_matter(cls_name: str, objective: str, lineage: list[str] | None = None,
                 base_model: str | None = None) -> str:
    """``---`` + YAML + ``---``: the card's metadata block (ends with a newline)."""
    # the RTD family's objectives with a vocabulary head carry two task tags, and their own name
    extra = [f"objective-{objective.replace('_', '-')}"] if isinstance(OBJECTIVE_TAGS.get(objective), list) else []
    data = ModelCardData(
        language="ko", license=LICENSE, library_name="transformers",
        tags=["electra", "korean", "kolectra", *_as_list(OBJECTIVE_TAGS.get(objective, objective)), *extra],
        datasets=corpora(lineage) or None, metrics=METRICS.get(cls_name),
        base_model=base_model or None,
        pipeline_tag="fill-mask" if cls_name == "ElectraForMaskedLM" else None,
    )
    return f"---\n{data.to_yaml()}\n---\n"
