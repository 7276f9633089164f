"""The plain texts of a fine-tuning run's scored file, by task, for the check of how many of them the
pretraining corpus holds verbatim (:mod:`pipeline.overlap`).

Each task's own reader reads the file, so the texts are those the run scored: NSMC's (and a probe's)
reviews, the text columns ``text_column`` and ``text_pair_column`` of classify and regress, KorQuAD's
questions and its contexts (each context once: many questions share one). NER's rows are token lists
(CoNLL), whose spacing is not the text's: not checked. A file the reader would refuse for its bad rows
is still read: the check counts what could be read. A run capped by ``max_eval_examples`` scored the first
N rows (KorQuAD: questions) only, as :func:`finetune.config.cap_eval_rows` cuts them: the texts are those N
(before 2026-12-02 the whole file was counted: the demo's "6 of 500" where its score is on 128 rows).
A classify/regress row the task cannot use (a column missing or not text) is not counted; a label the task
refuses is not looked at.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Texts(NamedTuple):
    column: str  # what the texts are: "review", "text", "question", "context" ...
    unit: str  # what one of them is counted as: "rows", "contexts"
    values: list[str]
    of: int = 0  # the file's rows (questions) when max_eval_examples scored fewer, else 0


def scored_cap(task: str, config: dict) -> int:
    """The rows (KorQuAD: questions) of the scored file the run scored, 0 for all: ``max_eval_examples``
    (a probe has no cap)."""
    return 0 if task == "probe" else int(config.get("max_eval_examples") or 0)


def _capped(values: list, cap: int) -> tuple[list, int]:
    return (values[:cap], len(values)) if cap and len(values) > cap else (values, 0)


def not_checked(task: str) -> str | None:
    """Why ``task``'s scored file has no texts to check, None when it has."""
    if task in ("nsmc", "probe", "classify", "regress", "korquad"):
        return None
    if task == "ner":
        return "ner's rows are token lists, not the texts a corpus holds"
    return f"no reader of plain texts for task {task!r}"


def eval_texts(task: str, config: dict, path: Path) -> list[Texts]:
    """The texts of ``task``'s scored file ``path`` as the task reads them (``config``: the eval's), the
    rows past ``max_eval_examples`` left out as the run left them."""
    cap = scored_cap(task, config)
    if task in ("nsmc", "probe"):
        from kolectra.finetune.readers.nsmc import read_nsmc  # noqa: PLC0415

        reviews, of = _capped(list(read_nsmc(path, max_bad_fraction=1.0).columns["text"]), cap)
        return [Texts("review", "rows", reviews, of)]
    if task == "korquad":
        from kolectra.finetune.readers.korquad_questions import read_squad  # noqa: PLC0415

        questions, of = _capped(read_squad(path)[0], cap)  # finetune/korquad.py: dev[:max_eval_examples]
        return [Texts("question", "questions", [q.question for q in questions], of),
                Texts("context", "contexts", list(dict.fromkeys(q.context for q in questions)))]
    from kolectra.finetune.readers.tables import open_table  # noqa: PLC0415

    texts = [c for c in (config.get("text_column", "text"), config.get("text_pair_column", "")) if c]
    label = config.get("label_column", "label")
    table = open_table(path, config.get("format", "auto"), read=[*texts, label])
    # the rows finetune/text_task.py's row_of takes (importing it imports torch): every column there, texts text
    rows = [[record[c] for c in texts] for _, record in table.records
            if label in record and all(isinstance(record.get(c), str) for c in texts)]
    rows, of = _capped(rows, cap)
    return [Texts(c, "rows", [row[i] for row in rows], of) for i, c in enumerate(texts)]
