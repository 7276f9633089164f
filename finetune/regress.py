"""Text-pair (or single text) regression from plain files: KorSTS and KLUE-STS similarity scores.

A task of the last stage: ``kolectra finetune regress``.  The same inputs as ``classify``
(:mod:`finetune.text_task`) with a numeric label; a one-output head (``num_labels=1``,
``problem_type="regression"``: transformers' mean squared error on the raw output).  Keeps the
epoch with the best dev ``select_on`` correlation (``spearman``, KorSTS's headline, or
``pearson``), scores the test file once.  Writes ``metrics.json`` (``pearson``, ``spearman``
from scipy, plus ``mse``; reader counts; ``health``: ``not_learning`` when the model gives every
dev row nearly the same score, or its dev predictions do not correlate positively with the
gold scores), ``predictions.jsonl`` (per test row: ``line``, ``text`` (, ``text_pair``),
``label``, ``predicted``) and ``learning_curve.{png,json}``.

A correlation with a constant is undefined (scipy gives NaN); it is reported as 0.0, which is what
such a model is worth, and the health check says why.  Predictions equal up to float32 rounding are
such a constant (:func:`constant`): their correlation would be that of the rounding noise.  So are the figures of a run whose training
diverged (NaN or infinite predictions; ``mse`` and those predictions are written as null): NaN
compares false with everything, so left as NaN it would pass every check, the health one too.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import pearsonr, spearmanr

from kolectra.core.stage import warn
from kolectra.finetune import skeleton
from kolectra.finetune.files import FinetuneError, reason_key, write_jsonl
from kolectra.finetune.row_rules import DECIMAL_COMMA, score_value  # finetune/eval_texts.py reads the rows with it too
from kolectra.finetune.text_task import TextTask

STAGE_VERSION = 11  # bump when the same request's bytes change; history: docs/artifacts.md
CONSTANT = 1e-3  # predictions whose spread is below this share of the gold scores' spread count as constant


# Float32 outputs closer than this (relative to their size, at least 1) differ by rounding only: the same
# input in batches of another width gives another last bit
RESOLUTION = 1e-6


def constant(predicted: np.ndarray) -> bool:
    """Whether the predictions are one score up to float32 rounding: a head that ignores its input gave
    0.044367 for every row, spread 5e-9 by the padding of each batch, and scipy correlated that noise
    (test Pearson -0.16, dev 0.24, which chose the epoch) where predictions.jsonl holds one value."""
    return float(np.ptp(predicted)) <= RESOLUTION * max(1.0, float(np.abs(predicted).max()))


def correlation(fn, gold: np.ndarray, predicted: np.ndarray) -> float:
    """``fn``'s coefficient (scipy ``pearsonr`` / ``spearmanr``); 0.0 where either side is constant
    (the predictions up to float32 rounding: :func:`constant`) or a prediction is not a finite number."""
    if len(gold) < 2 or not np.isfinite(predicted).all() or np.ptp(gold) == 0 or constant(predicted):
        return 0.0
    return float(fn(gold, predicted)[0])


def regression_scores(gold: np.ndarray, predicted: np.ndarray) -> dict:
    gold, predicted = np.asarray(gold, np.float64), np.asarray(predicted, np.float64)
    mse = float(np.mean((gold - predicted) ** 2))
    return {"pearson": correlation(pearsonr, gold, predicted), "spearman": correlation(spearmanr, gold, predicted),
            "mse": mse if math.isfinite(mse) else None}


class Regress(TextTask):
    name = "regress"
    figures = ("spearman", "pearson")
    stats = ("spearman", "pearson", *TextTask.stats)

    booleans = 0  # this file's scores that were JSON or Parquet true/false

    def target(self, value):
        self.booleans += isinstance(value, bool)
        return score_value(value)

    def load(self, path, cfg):
        self.booleans, self.reading = 0, None
        try:
            return super().load(path, cfg)
        except FinetuneError as e:
            notes = []
            if self.booleans and "malformed" in str(e):
                # "got True" alone sent the user to the file's format: a yes/no label is classify's, never a 1/0 score
                notes.append(f"{self.booleans} of them are a JSON or Parquet boolean (true/false), not a score: "
                             "regression reads numbers; a yes/no label is two classes, kolectra finetune classify reads "
                             "them ('false', 'true')")
            bad = self.reading.bad if self.reading is not None and ("malformed" in str(e) or "no usable" in str(e)) else []
            if 2 * (commas := sum(reason_key(why) == DECIMAL_COMMA for _, why in bad)) > len(bad):
                # a file of "3,5" (a spreadsheet of a decimal-comma locale) was refused as "not a number" row by row,
                # the cause unsaid; read as 3.5 unasked, a "1,000" would have been 1.0
                notes.append(f"{commas} of its {len(bad)} bad rows have a score with a decimal comma ('3,5'): write "
                             "the scores with a dot (3.5; a spreadsheet saves so with '.' as its decimal separator), "
                             "as regress does not take a comma for one")
            if not notes:
                raise
            raise FinetuneError("; ".join([str(e), *notes])) from None

    def fit(self, train, table):
        self.train_file = table.path
        scores = set(train["label"])
        if len(scores) < 2:  # nothing to rank: every correlation would be undefined
            raise FinetuneError(f"{table.path}: every training row has the score {next(iter(scores)):g}; "
                                "regression needs at least two different scores")

    def before_caps(self, train, dev):
        super().before_caps(train, dev)
        self.carved_scores = len(set(train["label"])) > 1  # the scores max_train_examples chooses from

    def check(self, splits, data, cfg):
        super().check(splits, data, cfg)
        if len(trained := set(data.train["label"])) < 2:
            # as classify refuses rows of one label: a head trained on one score learns that score, and the health
            # said so only after the run; the cap is named only where it cut two scores to one
            n, left_by, way = self.train_cut(data, cfg, self.carved_scores)
            raise FinetuneError(f"{self.train_file}: the {n} training row(s) left by {left_by} all have the score "
                                f"{next(iter(trained)):g}; regression needs at least two different scores: {way}")
        scores = set(data.dev["label"])
        if len(scores) < 2:  # every dev correlation 0: the first epoch kept, and the health said "learned nothing"
            where = f"--dev {self.dev_file}" if self.dev_file is not None else f"the dev rows ({data.facts['dev_set']})"
            cut = self.dev_cut(data, cfg)  # the cap, not the file, left one score: its way out is the cap's
            raise FinetuneError(f"{where}{cut}: every dev row has the score {next(iter(scores)):g}: a correlation with "
                                "it is undefined, so no epoch can be chosen by it; "
                                + ("raise max_dev_examples (0: all)" if cut else
                                   "give a dev file of different scores" if self.dev_file is not None else
                                   "raise dev_fraction or pass --dev FILE"))
        if len(scores := set(data.test["label"])) < 2:
            # warned, not refused: a test file of placeholder scores (a benchmark's unlabelled test set) is how
            # predictions.jsonl is had for it; but its Spearman 0.0000 had stood as the model's figure, unsaid
            cut = self.test_cut(data, cfg)
            warn(f"{self.name}: {self.eval_file}{cut}: every test row has the score {next(iter(scores)):g}: a "
                 "correlation with it is undefined, so the test pearson and spearman are reported as 0 whatever the "
                 "model learned (predictions.jsonl still holds its scores); "
                 + ("raise max_eval_examples (0: all)" if cut else "score a file of different scores"))

    def counts(self, part):
        scores = part["label"]
        return super().counts(part) | {"score_min": min(scores), "score_max": max(scores)}

    def model_config(self, data):
        return {"num_labels": 1, "problem_type": "regression"}

    def score(self, split, outputs, cfg):
        predicted = np.stack(outputs["logits"]).astype(np.float64)[:, 0]
        return regression_scores(split.feats.per_row["labels"], predicted), {"predicted": predicted}

    def health(self, splits, fit):
        gold, predicted = splits["dev"].feats.per_row["labels"].astype(np.float64), fit.dev.predictions["predicted"]
        broken = int(np.sum(~np.isfinite(predicted)))
        figures = {"dev_prediction_std": None if broken else float(predicted.std()),  # NaN is no figure
                   "dev_label_std": float(gold.std()), "dev_spearman": fit.dev.scores["spearman"],
                   "dev_pearson": fit.dev.scores["pearson"]}
        if broken:
            return [f"{broken} of the {len(gold)} dev predictions are not numbers (NaN or infinite): training "
                    "diverged; try a lower optim.lr"], figures
        if predicted.std() <= CONSTANT * max(gold.std(), 1e-12):
            # not "it learned the mean": an untrained head gives about 0 whatever the gold scores are
            return [f"the model gives all {len(gold)} dev rows nearly the same score ({predicted.mean():.4g}, "
                    f"standard deviation {predicted.std():.2g} against the gold scores' {gold.std():.2g}, mean "
                    f"{gold.mean():.4g}): its score does not depend on the input; it learned nothing"], figures
        if fit.dev.scores["spearman"] <= 0 and fit.dev.scores["pearson"] <= 0:
            return [f"dev Spearman {fit.dev.scores['spearman']:.4f} and Pearson {fit.dev.scores['pearson']:.4f}: "
                    "the predicted scores do not rise with the gold ones; the model learned nothing useful"], figures
        return [], figures

    def write(self, out_dir, splits, fit):
        test, p = splits["test"].rows, fit.final.predictions["predicted"]
        pairs = test["text_pair"] if "text_pair" in test.column_names else [None] * len(test)
        write_jsonl(out_dir / "predictions.jsonl", (
            {"line": n, "text": t, **({"text_pair": b} if b is not None else {}), "label": y,
             "predicted": round(float(k), 6) if math.isfinite(k) else None}
            for n, t, b, y, k in zip(test["line"], test["text"], pairs, test["label"], p)))


def run(cfg, model_dir, train_file, test_file, out_dir, cache_dir=None, dev_file=None):
    """Fine-tune on ``train_file`` (dev: ``dev_file`` or carved from train), score ``test_file`` once."""
    return skeleton.run(Regress(dev_file), cfg, model_dir, train_file, test_file, out_dir, cache_dir)
