"""Positions a fine-tuning run reads that the model's pretraining never trained.

ELECTRA-Small's practice, kept by kolectra's tiny and small presets and ``kolectra run``'s demo, pretrains
on rows of 128 tokens with a table of 512 positions; ``kolectra finetune korquad`` reads up to 512. An
input past 128 tokens then reads position embeddings pretraining never shaped (random, from the
initialisation), with no error: the card says so (:func:`kolectra.model.export_files.untrained_positions`),
and a fine-tuning run past that length says it once, before it trains (:func:`warn_untrained`), as does
the linear probe (a study's ``probe`` readout) before it encodes (its encoder frozen: nothing trains those positions there).

The pretrained length is the card's: the ``sequence length`` row of the Training table that kolectra
writes into ``hf/discriminator/README.md`` (and ``kolectra export`` keeps), the same figure as the
checkpoint manifest's ``stats.max_seq_length``. A folder without that row (another project's model)
is not judged.
"""

from __future__ import annotations

import re
from pathlib import Path

from kolectra.core.stage import warn

# the card's rows are written '| key | value |' (model.export.model_card)
_ROW = re.compile(r"^\| sequence length \| (\d+) \|[ \t]*$", re.MULTILINE)
_INHERITED = re.compile(r"^\| initialised from \| ", re.MULTILINE)


def pretrained_length(model_dir: Path) -> tuple[int | None, bool]:
    """(the row length the model was pretrained on, whether it was initialised from another model) from
    its card; (None, False) where the folder has no kolectra card saying it."""
    try:
        text = (Path(model_dir) / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None, False
    found = _ROW.findall(text)
    if len(found) != 1 or int(found[0]) <= 0:  # none, or a card that is not one table's
        return None, False
    return int(found[0]), bool(_INHERITED.search(text))


def untrained_text(max_length: int, positions: int, trained: int, inherited: bool, model_dir: Path,
                   cfg=None, frozen: bool = False) -> str:
    """The warning for a run of ``max_length`` tokens on a model of ``positions`` pretrained at ``trained``;
    "" where it reads no position past ``trained``. ``frozen``: the run never trains the encoder (the probe)."""
    if not trained < max_length <= positions:
        return ""
    held = ("they hold what the model it was initialised from had" if inherited
            else "they are random, from the initialisation")
    extra = ""
    if cfg is not None and hasattr(cfg, "doc_stride") and hasattr(cfg, "max_query_length"):
        # KorQuAD's windows: the question and the stride must fit the shorter window too
        q = cfg.max_query_length if cfg.max_query_length <= trained // 2 else max(1, trained // 4)
        s = cfg.doc_stride if cfg.doc_stride <= trained - q - 3 else max(1, min(trained // 4, trained - q - 3))
        extra = (f" --set max_query_length={q}" * (q != cfg.max_query_length)
                 + f" --set doc_stride={s}" * (s != cfg.doc_stride))
    return (f"max_length {max_length} reaches past the {trained} tokens a row {model_dir} was pretrained on (its "
            f"README.md's sequence length): positions {trained}-{max_length - 1} were never trained by its "
            f"pretraining ({held}), so every input longer than {trained} tokens reads position embeddings "
            "pretraining never shaped; "
            + ("the probe's encoder is frozen, so nothing trains them. " if frozen
               else "fine-tuning trains them on this task's rows alone. ")
            + f"To keep to the pretrained positions, --set max_length={trained}{extra}")


def warn_untrained(config, cfg, model_dir: Path, frozen: bool = False) -> str:
    """Say once, before training, that ``cfg.max_length`` reads positions the model's pretraining never
    trained (``config``: the model's transformers config; ``frozen``: a probe, which trains no encoder
    weight); the text said, or ""."""
    if getattr(cfg, "random_init", False):  # every weight drawn afresh on purpose: nothing was pretrained
        return ""
    trained, inherited = pretrained_length(model_dir)
    positions = getattr(config, "max_position_embeddings", None)
    if trained is None or not isinstance(positions, int):
        return ""
    text = untrained_text(int(cfg.max_length), positions, trained, inherited, model_dir, cfg, frozen)
    if text:
        warn(text)
    return text
