"""An exported model's card (``README.md``): its facts table (:func:`facts`, what was trained, how, and
what the last log window measured) and the YAML front matter, as the Hugging Face Hub reads it.

The metadata block is written by ``huggingface_hub.ModelCardData`` (the Hub's own writer), so the
keys are the ones the Hub indexes: ``language: ko``, ``license``, ``library_name: transformers``,
``tags`` (the objective among them; the RTD family's objectives with a vocabulary head also get
``objective-<name>``) and ``metrics`` (what the card reports). ``datasets`` and ``base_model`` hold
Hub ids, which the Hub links and checks, so they are written only when the user names them
(``kolectra export --dataset ID --base-model ID``): the corpus artifacts and a local
``train.init_from`` folder are not Hub ids and stay in the card's body (its lineage and facts).
``huggingface_hub.ModelCard.load(dir)`` and any YAML reader parse it back.

The licence is kolectra's own (Apache-2.0); what a trained model may be used for depends on its
training text, so the card's body says to change it when that text demands another.
"""

from __future__ import annotations

from huggingface_hub import ModelCardData

from kolectra.core.errors import UserInputError
from kolectra.model import health

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


def hub_id(value: str, what: str) -> str:
    """``value`` if it is a Hub repository id (``owner/name`` or ``name``), else a ValueError naming ``what``."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id  # noqa: PLC0415 - huggingface_hub: only when a card names a repo

    try:
        validate_repo_id(value)
    except HFValidationError:
        raise UserInputError(f"{what}: {value!r} is not a Hugging Face Hub id (owner/name, letters, digits, "
                         "'-', '_' and '.')") from None
    return value


def _as_list(tag: str | list[str]) -> list[str]:
    return tag if isinstance(tag, list) else [tag]


def front_matter(cls_name: str, objective: str, datasets: list[str] | None = None,
                 base_model: str | None = None) -> str:
    """``---`` + YAML + ``---``: the card's metadata block (ends with a newline). ``datasets`` and
    ``base_model``: Hub ids the user named (checked), never local artifact names or folders."""
    # the RTD family's objectives with a vocabulary head carry two task tags, and their own name
    extra = [f"objective-{objective.replace('_', '-')}"] if isinstance(OBJECTIVE_TAGS.get(objective), list) else []
    data = ModelCardData(
        language="ko", license=LICENSE, library_name="transformers",
        tags=["electra", "korean", "kolectra", *_as_list(OBJECTIVE_TAGS.get(objective, objective)), *extra],
        datasets=[hub_id(d, "--dataset") for d in datasets or []] or None, metrics=METRICS.get(cls_name),
        base_model=hub_id(base_model, "--base-model") if base_model else None,
        pipeline_tag="fill-mask" if cls_name == "ElectraForMaskedLM" else None,
    )
    return f"---\n{data.to_yaml()}\n---\n"


# a run of 0 steps (kolectra study's floor) has no loss: "nan" read as a divergence, and its health "unchecked: no
# metrics logged after warm-up" as a run whose log missed its windows (pipeline/verdicts.py says the same words)
UNTRAINED = "untrained (0 steps: the random initialisation, as a study's floor)"
UNTRAINED_LOSS = "none (0 steps: the random initialisation)"


def loss_text(final: dict) -> str:
    """The final loss for the card and the last line: a NaN loss is recorded as null (JSON has no
    NaN), and must still print, so that the divergence check after it can say what happened."""
    loss = final.get("loss")
    return "nan" if loss is None else f"{loss:.4f}"


# the card's figures of the last log window (the metrics of METRICS), by network
CARD_FIGURES = {"discriminator": (("disc_acc", "accuracy"), ("disc_precision", "precision"),
                                  ("disc_recall", "recall"), ("disc_auc", "AUC"), ("mlm_acc", "masked LM accuracy")),
                "generator": (("gen_acc", "accuracy at the masked slots"),)}


def figures_text(final: dict) -> str:
    """What the last log window measured, per network, for the card (the metrics :func:`front_matter` names)."""
    parts = []
    for network, keys in CARD_FIGURES.items():
        said = [f"{name} {final[k]:.3f}" for k, name in keys if isinstance(final.get(k), (int, float))]
        if said:
            parts.append(f"{network}: {', '.join(said)}")
    return "; ".join(parts) or "none logged"


def warning_figures(verdict: dict) -> str:
    """What a not-learning warning's figures are, for the card that also shows the last window's: the warning
    quoted "AUC 0.598" above a table saying "AUC 0.597" (the mean of the windows at steps 580 and 600, beside
    the one at 600), which read as a rounding slip."""
    step = (verdict.get("figures") or {}).get("step")
    return ("Its figures are the health check's: weighted means over the log windows it read (up to two"
            + (f", to step {step}" if isinstance(step, int) else "") + "); the Training table's final figures are "
            "the last log window's alone.")


def facts(cfg, *, recipe: dict, seq_len: int, vocab_size: int, parameters: int, flops: float, wall_seconds: float,
          where: str, final: dict, first_step: int, flops_share: dict, verdict: dict) -> dict:
    """The card's table of a pretraining run (``cfg``: its PretrainConfig; ``final``: the last log
    window's figures; ``verdict``: :func:`model.health.verdict`)."""
    t = cfg.train
    return {"objective": cfg.objective.objective, "preset": cfg.preset,
            "recipe": ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in recipe.items() if k != "objective"),
            "steps": t.steps,
            "batch size": t.batch_size, "sequence length": seq_len, "vocabulary": vocab_size,
            "discriminator parameters": f"{parameters:,}",
            "training FLOPs": f"{flops:.3e}", "wall time": f"{wall_seconds:.0f} s",
            "hardware": where, "final loss": UNTRAINED_LOSS if t.steps == 0 else loss_text(final),
            "final figures (last log window)": figures_text(final), "seed": cfg.seed,
            **({"initialised from": t.init_from} if t.init_from else {}),
            **({"resumed at step": first_step} if first_step else {}),
            "FLOPs by part": ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in flops_share.items()),
            "training health": UNTRAINED if t.steps == 0 else health.status_text(verdict)}
