"""The plain texts of a fine-tuning run's scored file, by task, for the check of how many of them the
pretraining corpus holds verbatim (:mod:`pipeline.overlap`).

Each task's own reader reads the file, so the texts are those the run scored: NSMC's (and a probe's)
reviews, the text columns ``text_column`` and ``text_pair_column`` of classify and regress, KorQuAD's
questions and its contexts (each context once: many questions share one). NER's rows are token lists
(CoNLL), whose spacing is not the text's: not checked. A file the reader would refuse for its bad rows
is still read: the check counts what could be read. A run capped by ``max_eval_examples`` scored the first
N rows (KorQuAD: questions) only, as :func:`finetune.config.cap_eval_rows` cuts them: the texts are those N
(before 2026-12-02 the whole file was counted: the demo's "6 of 500" where its score is on 128 rows).
A classify/regress row the task cannot use is not counted: the rows are taken by the task's own rules
(:mod:`finetune.row_rules`: a column missing or not text, a label or score its ``target`` refuses, classify's
``label_names`` heeded), so bad rows among the first N do not stand in for rows the run scored.
"""

from __future__ import annotations

from functools import partial
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
    from kolectra.finetune.files import column_name  # noqa: PLC0415
    from kolectra.finetune.readers.tables import open_table  # noqa: PLC0415
    from kolectra.finetune.row_rules import BadRow, class_label, label_names, score_value, take_row  # noqa: PLC0415

    names = (config.get("text_column", "text"), config.get("text_pair_column") or None,
             config.get("label_column", "label"))
    if task not in ("classify", "regress"):
        raise ValueError(not_checked(task))
    keys = tuple(column_name(n) if n else None for n in names)  # as TextTask.load looks them up
    table = open_table(path, config.get("format", "auto"), read=[n for n in keys if n])
    # the label rule of the task's target (Classify.target, Regress.target), without the notes its refusals use
    target = partial(class_label, names=label_names(config.get("label_names") or ())) if task == "classify" \
        else score_value
    rows = []
    for _, record in table.records:  # the rows finetune/text_task.py's load keeps, by its own take_row and target
        try:
            row = take_row(record, keys, target)
        except BadRow:
            continue
        rows.append([row[k] for k in ("text", "text_pair") if k in row])
    rows, of = _capped(rows, cap)
    return [Texts(c, "rows", [row[i] for row in rows], of) for i, c in enumerate(n for n in names[:2] if n)]
