"""Text and text-pair classification from plain files (KorNLI, PAWS-X, Question Pair, hate speech, KLUE-YNAT/NLI).

A task of the last stage: ``kolectra finetune classify``.  Reads TSV, CSV, JSONL or a saved
``datasets`` folder (:mod:`finetune.text_task`, :mod:`finetune.readers.tables`); the labels are the
distinct values of ``label_column`` in the training file (strings, integers or JSON/Parquet booleans, read as
``true``/``false``; compared as text, sorted: numerically when they all are integers); a dev or test label outside them is an error
naming the label, file and line.  Integer labels that are class-label codes (``Dataset.to_json``
writes a ``ClassLabel`` column's) are named by ``label_names`` (code ``k`` is the ``k``-th name; a boolean is a code, false 0 and true 1).  Fine-tunes a ``len(labels)``-way head, keeps the epoch with the
best dev ``select_on`` figure (``accuracy`` or ``macro_f1``), scores the test file once.  Writes
``metrics.json`` (``accuracy``, ``macro_f1``, both fractions; ``labels``; per-epoch dev figures;
reader counts; ``health``: ``not_learning`` when one class is predicted for every dev row or dev
accuracy is no better than the majority class), ``predictions.jsonl`` (per test row in file order:
``line``, ``text`` (, ``text_pair``), ``label``, ``predicted``, ``probability`` of the predicted
class) and ``learning_curve.{png,json}``.  Macro-F1 is scikit-learn's (the mean of per-class F1
over the classes present in the gold or predicted labels).
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
from sklearn.metrics import f1_score

from kolectra.core.stage import warn
from kolectra.finetune import skeleton
from kolectra.finetune.files import FinetuneError, write_jsonl
from kolectra.finetune.row_rules import class_label, label_names, label_text  # noqa: F401  (label_text: API)
from kolectra.finetune.text_task import TextTask

STAGE_VERSION = 13  # bump when the same request's bytes change; history: docs/artifacts.md


def alike_labels(labels: list[str]) -> str | None:
    """The first labels equal but for case, width or an invisible character inside (``pos``, ``POS``, ``Ｐｏｓ``,
    ``p\u200bos``), quoted (the invisible shown as escapes), else None: kept as
    classes of their own, as they are (a label may be case-sensitive), but never without a word."""
    groups: dict[str, list[str]] = {}
    for label in labels:
        key = "".join(c for c in unicodedata.normalize("NFKC", label) if unicodedata.category(c) != "Cf")
        groups.setdefault(key.casefold(), []).append(label)
    same = next((g for g in groups.values() if len(g) > 1), None)
    return " and ".join(f"'{invisible_shown(x)}'" for x in same) if same else None


def invisible_shown(label: str) -> str:
    """``label`` with its invisible format characters (Cf) written as escapes (``p\u200bos``), so two labels
    that print alike do not read alike."""
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) == "Cf" else c for c in label)


def case_only(label: str, labels: list[str]) -> str:
    """What to add to "label ... is not among the training labels" when one of them differs from ``label`` only in
    case: pandas' to_csv writes a boolean column as ``True``/``False``, a JSON or Parquet boolean is ``true``/``false``."""
    same = [x for x in labels if x.casefold() == label.casefold()]
    if not same:
        return ""
    boolean = label.casefold() in ("true", "false")
    return (f"; the training label {same[0]!r} differs from it only in case"
            + (" (a JSON or Parquet true/false is read as 'true'/'false'; pandas' to_csv writes a boolean column as "
               "'True'/'False'): write both files' labels alike" if boolean else ""))


SHOWN_LABELS = 20  # training labels a refusal lists: KorSTS's scores read as classes had listed 173 in one line


def shown_labels(labels: list[str]) -> str:
    """``a, b, c`` for at most :data:`SHOWN_LABELS` labels, then how many there are in all."""
    shown = ", ".join(labels[:SHOWN_LABELS])
    return shown + (f", ... ({len(labels)} in all)" if len(labels) > SHOWN_LABELS else "")


def score_like(labels: list[str]) -> str | None:
    """What to say when the training labels look like scores (every one a number, some with decimals: KorSTS's
    0.0-5.0), else None: each is a class of its own here, and a test score the training file lacks is refused."""
    decimals = [x for x in labels if re.fullmatch(r"-?[0-9]+\.[0-9]+", x)]
    if len(labels) < 3 or not decimals or not all(re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", x) for x in labels):
        return None
    return (f"the {len(labels)} training labels are numbers, {len(decimals)} with decimals ({', '.join(decimals[:3])}, "
            "...): scores? classify makes each one a class of its own; kolectra finetune regress reads a score per row")


def label_order(labels) -> list[str]:
    """Sorted; numerically when every label is an integer (so 2 < 10).

    ASCII digits only (``str.isdigit`` also passes ``²``, which ``int`` refuses), and equal numbers
    (``1``, ``01``) ordered by their text: a set's order changes between processes, and the class ids
    must not."""
    labels = set(labels)
    if all(re.fullmatch(r"-?[0-9]+", x) for x in labels):
        return sorted(labels, key=lambda x: (int(x), x))
    return sorted(labels)


def classification_scores(gold: np.ndarray, predicted: np.ndarray) -> dict:
    """``accuracy`` and ``macro_f1`` (fractions) of class ids."""
    return {"accuracy": float((gold == predicted).mean()),
            "macro_f1": float(f1_score(gold, predicted, average="macro", zero_division=0))}


def names_misfit(path, names: tuple[str, ...], unnamed: list[str], codes: set[int] | None = None) -> str | None:
    """Why a file refused for its bad rows was, when label_names left its labels unnamed: the refusal's way out
    ("raise max_bad_fraction") would have dropped a whole class (codes past the names, or a scale from -1 as
    many values as names) or every row (text labels). ``codes``: every label of the file, when all are integers.
    None when the unnamed labels are negative codes only (-1, the Hub's unlabelled row): dropping those rows is the
    way out (naming them text sent the user to leave label_names out, training a class '-1')."""
    past = [int(x) for x in unnamed if re.fullmatch(r"[0-9]+", x)]
    if past:
        return (f"{path}: label_names gives {len(names)} names (codes 0 to {len(names) - 1}), but {len(past)} "
                f"rows have codes past them (up to {max(past)}): give every class's name in code order "
                "(ds.features['label'].names)")
    if codes and min(codes) < 0 and sorted(codes) == list(range(min(codes), min(codes) + len(names))):
        # -1, 0, 1 with three names: a value scale (negative, neutral, positive), not codes counting from 0; the
        # way out, dropping the -1 rows, gave the names to the wrong values (0 the first name, 1 the second)
        low, high, k = min(codes), max(codes), len(names)
        return (f"{path}: label_names gives {k} names for the codes 0 to {k - 1}, but the labels are {low} to {high}, "
                f"as many values as names: a scale, not class-label codes (which count from 0)? Leave label_names "
                f"out to train the classes {', '.join(repr(str(c)) for c in sorted(codes))} as they are; dropping "
                f"the rows of {', '.join(str(c) for c in sorted(codes) if c < 0)} (max_bad_fraction) would name "
                f"{', '.join(f'{c} {names[c]!r}' for c in sorted(codes) if c >= 0)}")
    text = [x for x in unnamed if not re.fullmatch(r"-[0-9]+", x)]
    if not text:
        return None
    shown = ", ".join(repr(x) for x in list(dict.fromkeys(text))[:5])
    return (f"{path}: label_names names integer class codes, but {len(text)} rows' labels are text that is none "
            f"of its names ({shown}): leave label_names out for a file whose labels are names")


def booleans_beside_integers(rows, table, typed: bool = True) -> str | None:
    """Why a file whose labels mix booleans with integers is refused: ``false``/``true`` and ``0``/``1`` would be
    four classes, each taking rows of the other's (a boolean had been a bad row, dropped within max_bad_fraction);
    None when no label is an integer. ``typed``: JSON or Parquet booleans; else the text of a TSV or CSV file
    (``true``, pandas' ``True``), the same class, which had trained the four classes unsaid though the docs say
    such a file is refused."""
    lines = dict(zip(rows["label"], rows["line"]))  # a label's last line
    integers = [x for x in lines if re.fullmatch(r"-?[0-9]+", x)]
    boolean = next((lines[x] for x in lines if x.casefold() in ("true", "false")), None)  # (label_names named them)
    if not integers or boolean is None:
        return None
    shown = ", ".join(repr(x) for x in label_order(lines))
    return (f"{table.where(boolean)}: its labels mix {'JSON or Parquet booleans' if typed else 'booleans'} "
            f"(true/false) with integers ({table.where(lines[integers[0]])}: {integers[0]}): they would be the "
            f"{len(lines)} classes {shown}, false and 0 not one; write the file's labels alike (all true/false, "
            "or all integers)")


class Classify(TextTask):
    name = "classify"
    figures = ("accuracy", "macro_f1")
    stats = ("accuracy", "macro_f1", *TextTask.stats)
    names: tuple[str, ...] = ()  # label_names, NFC
    unnamed: list[str] = []
    codes: set[int] | None = None  # the file's labels while each is an integer (None once one is not)
    booleans = 0  # this file's labels that were JSON or Parquet true/false

    def read(self, cfg, train_file, eval_file):
        self.names = label_names(getattr(cfg, "label_names", ()))
        self.train_file = train_file
        return super().read(cfg, train_file, eval_file)

    def target(self, value):
        self.booleans += isinstance(value, bool)
        return class_label(value, self.names, self.saw)  # finetune/eval_texts.py takes the scored rows so too

    def saw(self, label: str, kept: bool) -> None:
        """Note a label's text for a refusal's reasons: the integer codes, the labels label_names did not name."""
        if self.codes is not None and self.names:  # more values than names, or one that is no integer: no scale
            self.codes.add(int(label)) if re.fullmatch(r"-?[0-9]{1,18}", label) else self.codes.clear()
            self.codes = self.codes if 0 < len(self.codes) <= len(self.names) else None
        if not kept:
            self.unnamed.append(label)

    def load(self, path, cfg):
        self.unnamed, self.codes, self.booleans = [], set(), 0  # labels label_names did not name; integer labels
        try:
            rows, table = super().load(path, cfg)
        except FinetuneError as e:
            if not self.unnamed or "malformed" not in str(e) or not (why := names_misfit(path, self.names,
                                                                                        self.unnamed, self.codes)):
                raise
            if {x.casefold() for x in self.unnamed} <= {"true"}:  # one name: true is the code 1, past it
                why = (f"{path}: label_names gives one name ({self.names[0]!r}), but {len(self.unnamed)} rows' labels "
                       "are true, the code 1 (false is 0): give both names, false's first (--set "
                       "label_names=negative,positive), or leave label_names out to train the classes 'false', 'true'")
            raise FinetuneError(why) from None
        if why := booleans_beside_integers(rows, table, typed=bool(self.booleans)):
            raise FinetuneError(why)
        return rows, table

    def fit(self, train, table):
        self.labels = label_order(train["label"])
        if len(self.labels) < 2:
            raise FinetuneError(f"{table.path}: every training row has the label {self.labels[0]!r}; "
                                "classification needs at least two")
        if scores := score_like(self.labels):
            warn(f"{self.name}: {table.path}: {scores}")
        if alike := alike_labels(self.labels):
            warn(f"{self.name}: {table.path}: the training labels {alike} differ only in case, width or an invisible "
                 "character: each is a "
                 "class of its own (a typo's class takes its rows from the other); if they are one, spell them alike")

    def check(self, splits, data, cfg):
        super().check(splits, data, cfg)
        trained = set(data.train["label"])
        if len(trained) < 2:  # as nsmc refuses: the head could only learn to say it (the health said so, after)
            # the cap is named only where it cut rows of two labels to one (nsmc's one_class): named whenever set, a
            # max_train_examples of 1000 over 200 rows was told to be raised when the dev split had taken a label
            n, left_by, way = self.train_cut(data, cfg, len(self.carved_labels) > 1)
            raise FinetuneError(f"{self.train_file}: the {n} training row(s) left by {left_by} all have the label "
                                f"{self.labels[next(iter(trained))]!r}; classification needs at least two: {way}")

    def before_caps(self, train, dev):
        super().before_caps(train, dev)
        self.carved_labels = set(train["label"])  # the labels max_train_examples had to choose from

    def convert(self, part, table):
        ids = {label: i for i, label in enumerate(self.labels)}
        for n, label in zip(part["line"], part["label"]):
            if label not in ids:
                raise FinetuneError(f"{table.where(n)}: label {label!r} is not among the training "
                                    f"labels ({shown_labels(self.labels)}){case_only(label, self.labels)}"
                                    + (f"; {scores}" if (scores := score_like(self.labels)) else ""))
        return part.replace("label", [ids[label] for label in part["label"]])

    def counts(self, part):
        ids, n = np.unique(np.array(part["label"], dtype=np.int64), return_counts=True)
        return super().counts(part) | {"labels": {self.labels[i]: int(c) for i, c in zip(ids, n)}}

    def model_config(self, data):
        # said, not inferred: a problem_type in the model directory's config.json (a KorSTS model's
        # "regression") was kept, and the head trained on a squared error against the class ids
        return {"num_labels": len(self.labels), "problem_type": "single_label_classification"}

    def score(self, split, outputs, cfg):
        logits = np.stack(outputs["logits"]).astype(np.float64)
        predicted = logits.argmax(-1)
        probability = 1.0 / np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)  # softmax at the argmax
        return (classification_scores(split.feats.per_row["labels"], predicted),
                {"predicted": predicted, "probability": probability})

    def health(self, splits, fit):
        problems, figures = skeleton.majority_check(splits["dev"].feats.per_row["labels"],
                                                    fit.dev.predictions["predicted"], "dev")
        # the classes by name: their ids are only this run's sorting of the training labels
        named = [re.sub(r"class (\d+) ", lambda m: f"class {self.labels[int(m.group(1))]!r} ", p) for p in problems]
        return named, figures | {"dev_majority_label": self.labels[figures["dev_majority_class"]]}

    def metrics(self, data, splits, fit):
        return {**super().metrics(data, splits, fit), "labels": self.labels}

    def write(self, out_dir, splits, fit):
        test, p = splits["test"].rows, fit.final.predictions
        pairs = test["text_pair"] if "text_pair" in test.column_names else [None] * len(test)
        write_jsonl(out_dir / "predictions.jsonl", (
            {"line": n, "text": t, **({"text_pair": b} if b is not None else {}), "label": self.labels[y],
             "predicted": self.labels[int(k)], "probability": round(float(q), 6)}
            for n, t, b, y, k, q in zip(test["line"], test["text"], pairs, test["label"], p["predicted"],
                                        p["probability"])))


def run(cfg, model_dir, train_file, test_file, out_dir, cache_dir=None, dev_file=None):
    """Fine-tune on ``train_file`` (dev: ``dev_file`` or carved from train), score ``test_file`` once."""
    return skeleton.run(Classify(dev_file), cfg, model_dir, train_file, test_file, out_dir, cache_dir)

