"""What the text and text-pair tasks from plain files share: reading the splits, dev selection, tokenising.

``finetune.classify`` (labels) and ``finetune.regress`` (a score) are :class:`TextTask` subclasses;
they differ in how a label is read (:meth:`TextTask.target`), mapped (:meth:`TextTask.fit`), scored
and written.  ``finetune.ner`` takes the same splitting, dev selection and reporting, with its own
rows (:meth:`TextTask.load`: tagged sentences) and tokenising.  Reading (:mod:`finetune.readers.tables` for the formats): the train file, the test file
(scored once) and either ``--dev FILE`` or, without one, a seeded ``dev_fraction`` carved from
the train rows (:func:`finetune.features.split_dev`); the epoch is chosen on dev only.  A row is
one text (``text_column``) or a pair (``text_pair_column``, tokenised as ``[CLS] a [SEP] b
[SEP]``) and a label (``label_column``).  Rows that cannot be used (missing field, a text that is
not text, a label that does not parse) are bad rows with their line numbers, counted in
``metrics.json`` like the file's malformed lines (:func:`finetune.readers.tables.check_bad`).
"""

from __future__ import annotations

import random
from pathlib import Path

from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress
from kolectra.finetune import skeleton
from kolectra.finetune.config import cap_eval_rows
from kolectra.finetune.features import rows, split_dev
from kolectra.finetune.files import FinetuneError, same_content
from kolectra.finetune.leakage import text_key
from kolectra.finetune.readers.tables import Table, check_bad, read_table


class TextTask(skeleton.Task):
    """A text / text-pair task read from TSV, CSV, JSONL or a saved dataset."""

    stats = ("best_epoch", "train_examples", "dev_examples", "test_examples")
    figures: tuple[str, ...] = ()  # what ``score`` returns, each also reported as ``dev_<name>``

    def __init__(self, dev_file: Path | None = None):
        self.dev_file = Path(dev_file) if dev_file is not None else None

    # ---- the label hooks ------------------------------------------------------------------
    def target(self, value) -> object:
        """A label as read -> the value kept; :class:`BadRow` when it cannot be one."""
        raise NotImplementedError

    def fit(self, train: list[dict], table: Table) -> None:
        """Learn what the training labels are (e.g. the class list)."""

    def convert(self, part: list[dict], table: Table) -> list[dict]:
        """The rows with their labels as the model takes them (e.g. class ids)."""
        return part

    # ---- reading --------------------------------------------------------------------------
    def read(self, cfg, train_file, eval_file):
        self.select_on = getattr(cfg, "select_on", self.figures[0])
        check_dev(self.dev_file, train_file, eval_file)
        (train, t_train), (test, t_test) = self.load(train_file, cfg), self.load(eval_file, cfg)
        self.fit(train, t_train)
        if self.dev_file is not None:
            dev, t_dev = self.load(self.dev_file, cfg)
            dev_set = t_dev.path.name
        else:
            try:
                (train, dev), t_dev = split_dev(train, cfg.dev_fraction, cfg.seed, key=text_key), None
            except FinetuneError as e:  # too few rows: name the file, and the way out
                raise FinetuneError(f"{t_train.path}: {e}; or pass --dev FILE") from None
            dev_set = f"{cfg.dev_fraction:g} of {t_train.path.name}, carved with seed {cfg.seed}"
        train, dev, test = (self.convert(train, t_train), self.convert(dev, t_dev or t_train),
                            self.convert(test, t_test))
        if cfg.max_train_examples and self.dev_file is not None and cfg.max_train_examples < len(train):
            # a seeded sample (in file order), as the carve's shuffle gives without --dev: the file's first
            # rows are one class of a file sorted by label
            keep = sorted(random.Random(cfg.seed).sample(range(len(train)), cfg.max_train_examples))
            train = [train[i] for i in keep]
        if cfg.max_train_examples:
            train = train[:cfg.max_train_examples]
        dev, test = cap_eval_rows(cfg, dev, test, lambda line: progress(f"{self.name}: {line}"))
        progress(f"{self.name}: {len(train)} train / {len(dev)} dev / {len(test)} test rows")
        facts = {"train_file": t_train.stats() | self.counts(train), "test_file": t_test.stats() | self.counts(test),
                 **({"dev_file": t_dev.stats() | self.counts(dev)} if t_dev else {}), "dev_set": dev_set}
        parts, train, dev, test = [train, dev, test], None, None, None
        return skeleton.Data(*self.datasets(parts), facts=facts)

    def datasets(self, parts: list[list[dict]]) -> list:
        """Each part as a ``datasets.Dataset``, emptying ``parts``: a part's row dicts are dropped
        before its Arrow copy is made, not held beside it (docs/finetune.md, "Memory and large task files")."""
        out = []
        while parts:
            out.append(rows(self.columns(parts.pop(0))))
        return out

    def load(self, path: Path, cfg) -> tuple[list[dict], Table]:
        """The usable rows of one file: ``line``, ``text`` (, ``text_pair``), ``label`` (as :meth:`target` made it)."""
        table = read_table(Path(path), cfg.format)
        text = table.column(cfg.text_column, "text_column")
        pair = table.column(cfg.text_pair_column, "text_pair_column") if cfg.text_pair_column else None
        label = table.column(cfg.label_column, "label_column")
        out, kept = [], []
        for n, record in table.records:
            row = row_of(record, text, pair, label)
            try:
                if isinstance(row, str):
                    raise BadRow(row)
                out.append({**row, "line": n, "label": self.target(row["label"])})
                kept.append((n, None))
            except BadRow as e:
                table.bad.append((n, str(e)))
        # the counts in metrics.json (rows used, rows bad): the records themselves are not kept, their
        # values are in ``out`` (a file's records beside its rows were one more dict a row)
        table.records = kept
        table.bad.sort()
        check_bad(table, cfg.max_bad_fraction)
        if not out:
            raise FinetuneError(f"{table.path}: no usable rows")
        return out, table

    def counts(self, part: list[dict]) -> dict:
        """Reader counts of a file's usable rows, for ``metrics.json``."""
        return {"empty_texts": sum(1 for r in part if not r["text"].strip()
                                   or ("text_pair" in r and not r["text_pair"].strip()))}

    def columns(self, part: list[dict]) -> dict[str, list]:
        """The rows as the columns of a ``datasets.Dataset`` (what :meth:`encoder` reads)."""
        names = ("line", "text", "text_pair", "label") if part and "text_pair" in part[0] else ("line", "text", "label")
        return {k: [r[k] for r in part] for k in names}

    # ---- tokenising, selection, the run's figures ----------------------------------------------
    def encoder(self, tokenizer, cfg):
        def encode(batch: dict, indices: list[int]) -> dict:
            enc = tokenizer(batch["text"], batch.get("text_pair"), truncation=True, max_length=cfg.max_length,
                            return_token_type_ids=True)
            return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"], "labels": batch["label"]}
        return encode

    def selection(self, scores):
        return scores[self.select_on]

    def metrics(self, data, splits, fit):
        return {**fit.final.scores, "best_epoch": fit.epoch, "selection": self.select_on,
                **{f"dev_{k}": v for k, v in fit.dev.scores.items()},
                "train_examples": len(data.train), "dev_examples": len(data.dev), "test_examples": len(data.test)}

    def table(self, metrics):
        from kolectra.finetune.report import file_task_table  # noqa: PLC0415

        return file_task_table(self.name, metrics, self.figures)


def check_dev(dev_file: Path | None, train_file: Path, eval_file: Path) -> None:
    """A dev file must be neither the scored file (selecting on it overstates the score) nor the train file."""
    if dev_file is None:
        return
    for other, what in ((eval_file, "the test file"), (train_file, "the training file")):
        if same_content(dev_file, other):
            raise FinetuneError(f"--dev {dev_file} is {what} {other}: choosing the epoch on it would "
                                f"{'overstate the score' if other == eval_file else 'reward memorisation'}; "
                                "leave --dev out to carve a dev set from the training rows")


class BadRow(UserInputError):
    """Raised by :meth:`TextTask.target`: the row is counted as bad, with this reason and its line."""


def row_of(record: dict, text: str, pair: str | None, label: str) -> dict | str:
    """The row's text(s) and raw label, or why it cannot be used."""
    for column in (text, pair, label):
        if column is not None and column not in record:
            return f"no {column!r} field"
    out = {"text": record[text], "label": record[label]}
    if pair is not None:
        out["text_pair"] = record[pair]
    for key, column in (("text", text), ("text_pair", pair)):
        if key in out and not isinstance(out[key], str):
            return f"{column!r} is not text (got {type(out[key]).__name__})"
    return out
