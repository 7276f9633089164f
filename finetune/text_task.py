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

from kolectra.core.stage import progress
from kolectra.finetune import skeleton
from kolectra.finetune.config import cap_eval_rows
from kolectra.finetune.features import carve, rows
from kolectra.finetune.files import FinetuneError, column_name, same_content, say_bad_files
from kolectra.finetune.leakage import text_key
from kolectra.finetune.readers.tables import Table, check_bad, open_table, shown_bad
from kolectra.finetune.row_rules import BadRow, row_of, take_row  # noqa: F401  (BadRow, row_of: this module's API)


class Rows:
    """A text task's rows as columns: equal-length lists by name (``line``, ``text`` (, ``text_pair``),
    ``label``), not a dict a row (docs/finetune.md, "Memory and large task files").  ``rows["label"]`` is
    a column; ``rows[a:b]`` and :meth:`take` select rows, in the order given."""

    def __init__(self, columns: dict[str, list]):
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns["line"])

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def __getitem__(self, key):
        if isinstance(key, str):
            return self.columns[key]
        return Rows({k: v[key] for k, v in self.columns.items()})

    def take(self, indices) -> "Rows":
        return Rows({k: [v[i] for i in indices] for k, v in self.columns.items()})

    def replace(self, name: str, values: list) -> "Rows":
        """The same rows with ``name``'s values replaced (the other columns shared, not copied)."""
        return Rows({k: values if k == name else v for k, v in self.columns.items()})


def take(part, indices):
    """The rows of ``part`` (:class:`Rows`, or a list of row dicts: NER's sentences) at ``indices``."""
    return part.take(indices) if isinstance(part, Rows) else [part[i] for i in indices]


def row_keys(part):
    """Each row's :func:`finetune.leakage.text_key` (the unit the dev carve keeps on one side)."""
    if not isinstance(part, Rows):
        return (text_key(r) for r in part)
    pairs = part["text_pair"] if "text_pair" in part else [None] * len(part)
    return (text_key({"text": t} if b is None else {"text": t, "text_pair": b}) for t, b in zip(part["text"], pairs))


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

    def fit(self, train: Rows, table: Table) -> None:
        """Learn what the training labels are (e.g. the class list)."""

    def convert(self, part: Rows, table: Table) -> Rows:
        """The rows with their labels as the model takes them (e.g. class ids)."""
        return part

    def pairs(self, cfg) -> bool:
        return bool(getattr(cfg, "text_pair_column", None))

    # ---- reading --------------------------------------------------------------------------
    def read(self, cfg, train_file, eval_file):
        self.select_on = getattr(cfg, "select_on", self.figures[0])
        self.eval_file = Path(eval_file)
        check_dev(self.dev_file, train_file, eval_file)
        (train, t_train), (test, t_test) = self.load(train_file, cfg), self.load(eval_file, cfg)
        self.fit(train, t_train)
        if self.dev_file is not None:
            dev, t_dev = self.load(self.dev_file, cfg)
            dev_set = t_dev.path.name
        else:
            try:
                (train_at, dev_at), t_dev = carve(row_keys(train), len(train), cfg.dev_fraction, cfg.seed), None
                train, dev = take(train, train_at), take(train, dev_at)
            except FinetuneError as e:  # too few rows: name the file, and the way out
                raise FinetuneError(f"{t_train.path}: {e}; or pass --dev FILE") from None
            dev_set = f"{cfg.dev_fraction:g} of {t_train.path.name}, carved with seed {cfg.seed}"
        train, dev, test = (self.convert(train, t_train), self.convert(dev, t_dev or t_train),
                            self.convert(test, t_test))
        self.before_caps(train, dev)
        if cfg.max_train_examples and self.dev_file is not None and cfg.max_train_examples < len(train):
            # a seeded sample (in file order), as the carve's shuffle gives without --dev: the file's first
            # rows are one class of a file sorted by label
            keep = sorted(random.Random(cfg.seed).sample(range(len(train)), cfg.max_train_examples))
            train = take(train, keep)
        if cfg.max_train_examples:
            train = train[:cfg.max_train_examples]
        dev, test = cap_eval_rows(cfg, dev, test, lambda line: progress(f"{self.name}: {line}"))
        progress(f"{self.name}: {len(train)} train / {len(dev)} dev / {len(test)} test rows")
        facts = {"train_file": t_train.stats() | self.counts(train), "test_file": t_test.stats() | self.counts(test),
                 **({"dev_file": t_dev.stats() | self.counts(dev)} if t_dev else {}), "dev_set": dev_set}
        # each file's bad rows left out, from its counts as metrics.json keeps them: a reuse of this eval says the same
        said = say_bad_files(self.name, facts)
        parts, train, dev, test = [train, dev, test], None, None, None
        return skeleton.Data(*self.datasets(parts), facts=facts, warnings=said)

    def before_caps(self, train, dev) -> None:
        """Note the rows the carve (or ``--dev``) left, before ``max_train_examples`` and the dev cap cut them: a
        refusal of the rows left (:meth:`check`) names a cap only where it cut rows, and its way out is then the cap's."""
        self.uncapped = {"train": len(train), "dev": len(dev)}

    def train_cut(self, data, cfg, capped: bool) -> tuple[int, str, str]:
        """(training rows left, what left them, the way out) for a refusal of the training rows holding one
        label, score or no entity: the cap is named only where ``capped`` (the rows it chose from held more),
        else the dev split took what was missing."""
        carve = f"the dev split (dev_fraction={cfg.dev_fraction})"
        if not capped:
            return self.uncapped["train"], carve, "lower dev_fraction or pass --dev FILE"
        cut = f"max_train_examples={cfg.max_train_examples}"
        return len(data.train), (cut if self.dev_file is not None else f"{cut} and {carve}"), "raise max_train_examples"

    def dev_cut(self, data, cfg) -> str:
        """" (the first N of M dev rows, cut by ...)" when the dev cap cut the dev rows, else "": a refusal of
        the dev rows had sent a user to a dev file of other rows when the cap had left out those it holds."""
        uncapped = getattr(self, "uncapped", {}).get("dev", 0)
        if uncapped <= len(data.dev):
            return ""
        cap = (f"max_dev_examples={cfg.max_dev_examples}" if getattr(cfg, "max_dev_examples", -1) >= 0 else
               f"max_eval_examples={cfg.max_eval_examples}, which caps dev while max_dev_examples is -1")
        return f" (the first {len(data.dev)} of its {uncapped} rows, cut by {cap})"

    def test_cut(self, data, cfg) -> str:
        """" (the first N of its M rows, cut by max_eval_examples=N)" when that cap cut the test rows, else ""."""
        uncapped = data.facts.get("test_file", {}).get("rows", 0)
        if uncapped <= len(data.test):
            return ""
        return f" (the first {len(data.test)} of its {uncapped} rows, cut by max_eval_examples={cfg.max_eval_examples})"

    def datasets(self, parts: list) -> list:
        """Each part as a ``datasets.Dataset``, emptying ``parts``: a part's rows are dropped before
        the next part's Arrow copy is made (docs/finetune.md, "Memory and large task files")."""
        out = []
        while parts:
            out.append(rows(self.columns(parts.pop(0))))
        return out

    def load(self, path: Path, cfg) -> tuple[Rows, Table]:
        """The usable rows of one file: ``line``, ``text`` (, ``text_pair``), ``label`` (as :meth:`target` made it).

        The file is read a record at a time (:func:`open_table`) and only these values are kept."""
        # NFC (column_name), as the readers name the file's columns: a header saved on macOS may be decomposed
        names = tuple(column_name(n) if n else None for n in (cfg.text_column, cfg.text_pair_column, cfg.label_column))
        table = open_table(Path(path), cfg.format, read=[n for n in names if n])
        self.reading = table  # the file being read: a task's refusal of its bad rows looks at them (regress)
        if table.complete:  # a JSONL file's columns are known once it is read
            check_columns(table, cfg)
        keys = ("line", "text", "text_pair", "label") if names[1] else ("line", "text", "label")
        columns, labels = {k: [] for k in keys}, {}
        line, text, pair, label = (columns.get(k, []).append for k in ("line", "text", "text_pair", "label"))
        for n, record in table.records:
            try:
                row = take_row(record, names, self.target)  # finetune/eval_texts.py takes the scored rows so too
            except BadRow as e:
                table.bad.append((n, e.reason()))
                continue
            value = row["label"]
            line(n)
            text(row["text"])
            label(labels.setdefault(value, value) if type(value) is str else value)  # one object a class
            if names[1]:
                pair(row["text_pair"])
        check_columns(table, cfg)
        for note in (table.multiline_note(), table.quoting_note()):
            if note:
                progress(f"{self.name}: {note}")
        # the counts in metrics.json (rows used, rows bad): the records themselves are not kept, their
        # values are in the columns (a file's records beside its rows were one more dict a row)
        table.records, table.taken = [], len(columns["line"])
        table.bad.sort()
        check_bad(table, cfg.max_bad_fraction)
        if not table.taken:  # every row bad (max_bad_fraction=1 let them through): why, as its refusal says
            raise FinetuneError(f"{table.path}: no usable rows"
                                + (f" ({len(table.bad)} bad row(s): {shown_bad(table.bad[:5], table.unit)})"
                                   if table.bad else ""))
        return Rows(columns), table

    def counts(self, part: Rows) -> dict:
        """Reader counts of a file's usable rows, for ``metrics.json``."""
        pairs = part["text_pair"] if "text_pair" in part else ()
        return {"empty_texts": sum(1 for i, t in enumerate(part["text"])
                                   if not t.strip() or (pairs and not pairs[i].strip()))}

    def columns(self, part: Rows) -> dict[str, list]:
        """The rows as the columns of a ``datasets.Dataset`` (what :meth:`encoder` reads)."""
        return part.columns

    # ---- tokenising, selection, the run's figures ----------------------------------------------
    def encoder(self, tokenizer, cfg):
        def encode(batch: dict, indices: list[int]) -> dict:
            enc = tokenizer(batch["text"], batch.get("text_pair"), truncation=True, max_length=cfg.max_length,
                            return_token_type_ids=True)
            return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"], "labels": batch["label"],
                    "truncated": past_max_length(enc)}
        return encode

    def check(self, splits, data, cfg):
        say_truncated(self.name, splits, cfg)

    def selection(self, scores):
        return scores[self.select_on]

    def metrics(self, data, splits, fit):
        return {**fit.final.scores, "best_epoch": fit.epoch, "selection": self.select_on,
                **{f"dev_{k}": v for k, v in fit.dev.scores.items()},
                "train_examples": len(data.train), "dev_examples": len(data.dev), "test_examples": len(data.test),
                **truncated_rows(splits)}

    def table(self, metrics):
        from kolectra.finetune.report import file_task_table  # noqa: PLC0415

        return file_task_table(self.name, metrics, self.figures)


def past_max_length(enc) -> list[bool]:
    """Per row of a fast tokenizer's batch: whether ``max_length`` cut it (tokens past it overflowed; a row of
    exactly ``max_length`` tokens was not cut)."""
    return [bool(e.overflowing) for e in enc.encodings]


def truncated_rows(splits) -> dict:
    """``{"rows_past_max_length": {"train": n, "dev": n, "test": n}}``: the rows of each split that
    ``max_length`` cut (their tokens past it never read); empty for a task whose encoder does not mark them."""
    import pyarrow.compute as pc  # noqa: PLC0415

    counts = {name: int(pc.sum(split.encoded.data.column("truncated")).as_py() or 0)
              for name, split in splits.items() if "truncated" in split.encoded.column_names}
    return {"rows_past_max_length": counts} if counts else {}


def say_truncated(task: str, splits, cfg) -> None:
    """One line when ``max_length`` cuts rows of a split: the text past it is never read (a news body at
    the koelectra preset's 128 tokens), which no figure had said."""
    counts = truncated_rows(splits).get("rows_past_max_length", {})
    cut = [f"{n:,} of {len(splits[name].encoded):,} {name} rows ({n / len(splits[name].encoded):.1%})"
           for name, n in counts.items() if n]
    if cut:
        progress(f"{task}: {', '.join(cut)} are longer than max_length={cfg.max_length} tokens and cut there "
                 "(rows_past_max_length in metrics.json); --set max_length=N reads more of them, up to the "
                 "model's positions")


def check_dev(dev_file: Path | None, train_file: Path, eval_file: Path) -> None:
    """A dev file must be neither the scored file (selecting on it overstates the score) nor the train file."""
    if dev_file is None:
        return
    for other, what in ((eval_file, "the test file"), (train_file, "the training file")):
        if same_content(dev_file, other):
            raise FinetuneError(f"--dev {dev_file} is {what} {other}: choosing the epoch on it would "
                                f"{'overstate the score' if other == eval_file else 'reward memorisation'}; "
                                "leave --dev out to carve a dev set from the training rows")


def check_columns(table: Table, cfg) -> None:
    """The task's columns are the table's (else an error naming the setting and the columns it has)."""
    table.column(cfg.text_column, "text_column")
    if cfg.text_pair_column:
        table.column(cfg.text_pair_column, "text_pair_column")
    table.column(cfg.label_column, "label_column")


