"""The plain texts of a fine-tuning run's scored file, by task, for the check of how many of them the
pretraining corpus holds verbatim (:mod:`pipeline.overlap`).

Each task's own reader reads the file, so the texts are those the run scored: NSMC's (and a probe's)
reviews, the text columns ``text_column`` and ``text_pair_column`` of classify and regress, KorQuAD's
questions and its contexts (each context once: many questions share one). NER's rows are token lists
(CoNLL), whose spacing is not the text's: not checked. A file the reader would refuse for its bad rows
is still read: the check counts what could be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Texts(NamedTuple):
    column: str  # what the texts are: "review", "text", "question", "context" ...
    unit: str  # what one of them is counted as: "rows", "contexts"
    values: list[str]


def not_checked(task: str) -> str | None:
    """Why ``task``'s scored file has no texts to check, None when it has."""
    if task in ("nsmc", "probe", "classify", "regress", "korquad"):
        return None
    if task == "ner":
        return "ner's rows are token lists, not the texts a corpus holds"
    return f"no reader of plain texts for task {task!r}"


def eval_texts(task: str, config: dict, path: Path) -> list[Texts]:
    """The texts of ``task``'s scored file ``path`` as the task reads them (``config``: the eval's)."""
    if task in ("nsmc", "probe"):
        from kolectra.finetune.readers.nsmc import read_nsmc  # noqa: PLC0415

        return [Texts("review", "rows", list(read_nsmc(path, max_bad_fraction=1.0).columns["text"]))]
    if task == "korquad":
        from kolectra.finetune.readers.korquad_questions import read_squad  # noqa: PLC0415

        questions, _ = read_squad(path)
        return [Texts("question", "questions", [q.question for q in questions]),
                Texts("context", "contexts", list(dict.fromkeys(q.context for q in questions)))]
    from kolectra.finetune.readers.tables import open_table  # noqa: PLC0415

    columns = [c for c in (config.get("text_column", "text"), config.get("text_pair_column", "")) if c]
    table = open_table(path, config.get("format", "auto"), read=columns)
    values: dict[str, list[str]] = {c: [] for c in columns}
    for _, record in table.records:
        for c in columns:
            v = record.get(c)
            values[c].append("" if v is None else str(v))
    return [Texts(c, "rows", values[c]) for c in columns]
