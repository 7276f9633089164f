"""NSMC sentiment classification (Naver movie reviews, 1 positive / 0 negative): a task of the last stage.

Reads the NSMC files (:mod:`finetune.readers.nsmc`), carves a seeded dev set out of the train file,
fine-tunes a two-class head on an ELECTRA discriminator directory, keeps the epoch with the best
*dev* accuracy and only then scores the test file once (the steps: :mod:`finetune.skeleton`).
Writes ``metrics.json`` (``accuracy`` as a fraction, ``accuracy_pct``, ``best_epoch``,
``dev_accuracy``, per-epoch records, reader counts, ``health``: ``not_learning`` when the model
predicts one class for every dev row or does no better than the majority class), ``predictions.jsonl`` (per test
row: id, text, label, predicted, probability of the predicted class; for error analysis) and
``learning_curve.{png,json}``; the CLI turns the directory into an ``eval`` artifact.

``eval_set`` (a caller's words for the scored rows when they are not NSMC's test set: a study's held-out
rows carved from the NSMC train file) is recorded in ``metrics.json`` and read in every line that would
otherwise call the score ``NSMC test accuracy``; without it a run's bytes are as they were.
"""

from __future__ import annotations

import numpy as np

from kolectra.core.stage import progress
from kolectra.finetune import skeleton
from kolectra.finetune.config import cap_eval_rows
from kolectra.finetune.features import carve, rows, split_dev
from kolectra.finetune.files import FinetuneError, say_bad, write_jsonl
from kolectra.finetune.leakage import text_key
from kolectra.finetune.readers.nsmc import read_nsmc
from kolectra.finetune.report import nsmc_table, percent
from kolectra.finetune.text_task import Rows, past_max_length, say_truncated, truncated_rows

__all__ = ["run", "split_dev", "Nsmc"]

STAGE_VERSION = 9  # bump when the same request's bytes change; history: docs/artifacts.md


def one_class(path, read: list, carved: list, train: list, cfg) -> None:
    """Refuse training rows of one label: the classifier can only learn to say it (a file of positive reviews
    trained to 100 % dev accuracy, every dev row carved from it positive too, and scored chance on the test).
    ``read``, ``carved``, ``train``: the labels of the file's rows, of those the dev split left, and of the
    training rows (``carved`` cut to ``max_train_examples``). The cap is named only where it cut rows of both
    labels to one: a cap that cut nothing, or rows of the one label the dev split left, is no cause."""
    labels = set(train)
    if len(labels) > 1 or not train:
        return
    label = next(iter(labels))
    if len(set(read)) == 1:
        raise FinetuneError(f"{path}: every training row has the label {label}; NSMC's classifier needs both 0 and 1")
    if len(set(carved)) > 1:
        n, left_by = len(train), f"max_train_examples={cfg.max_train_examples} and the dev split"
    else:
        n, left_by = len(carved), f"the dev split (dev_fraction={cfg.dev_fraction})"
    raise FinetuneError(f"{path}: the {n} training row(s) left by {left_by} all have the label {label}; "
                        "NSMC's classifier needs both 0 and 1")


class Nsmc(skeleton.Task):
    name = "nsmc"
    stats = ("accuracy", "accuracy_pct", "best_epoch", "dev_accuracy", "train_examples", "dev_examples",
             "test_examples")

    def __init__(self, eval_set: str = ""):
        self.eval_set = eval_set  # "": the file scored is NSMC's test set (or the user's own test file)

    def read(self, cfg, train_file, eval_file):
        # the files' rows as columns (id, text, label, line), carved and cut by row index (features.carve:
        # split_dev's carve), as the file tasks' are: no object a row (docs/finetune.md, "Memory and large task files")
        train_src, test_src = read_nsmc(train_file, cfg.max_bad_fraction), read_nsmc(eval_file, cfg.max_bad_fraction)
        said = (say_bad("nsmc", train_src.stats, "train_file", train_file.name)
                + say_bad("nsmc", test_src.stats, "test_file", eval_file.name))
        read = Rows(train_src.columns)
        train_at, dev_at = carve((text_key({"text": t}) for t in read["text"]), len(read), cfg.dev_fraction, cfg.seed)
        carved, dev, test = read.take(train_at), read.take(dev_at), Rows(test_src.columns)
        train = carved[:cfg.max_train_examples] if cfg.max_train_examples else carved
        one_class(train_file, read["label"], carved["label"], train["label"], cfg)
        carved = None
        dev, test = cap_eval_rows(cfg, dev, test, lambda line: progress(f"{self.name}: {line}"))
        if not test:
            raise FinetuneError(f"{eval_file}: no usable rows")
        progress(f"nsmc: {len(train)} train / {len(dev)} dev / {len(test)} {self.eval_set or 'test rows'}")
        facts = {"train_file": train_src.stats, "test_file": test_src.stats}
        # each part's Python columns are dropped before the next part's Arrow copy is made (the read's peak)
        parts = [train, dev, test]
        del read, train, dev, test
        train_src.columns = test_src.columns = None
        as_rows = []
        while parts:
            as_rows.append(rows(parts.pop(0).columns))
        return skeleton.Data(*as_rows, facts=facts, warnings=said)

    def encoder(self, tokenizer, cfg):
        def encode(batch: dict, indices: list[int]) -> dict:
            enc = tokenizer(batch["text"], truncation=True, max_length=cfg.max_length, return_token_type_ids=True)
            return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"], "labels": batch["label"],
                    "truncated": past_max_length(enc)}
        return encode

    def check(self, splits, data, cfg):
        say_truncated(self.name, splits, cfg)

    def model_config(self, data):
        # said, not inferred: a model directory's config.json naming another (a KorSTS model's "regression")
        # was kept, and the head trained on a squared error against the class ids
        return {"num_labels": 2, "problem_type": "single_label_classification"}

    def score(self, split, outputs, cfg):
        logits = np.stack(outputs["logits"]).astype(np.float64)
        labels, predicted = split.feats.per_row["labels"], logits.argmax(-1)
        probability = 1.0 / np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)  # softmax at the argmax
        return ({"accuracy": int((predicted == labels).sum()) / len(labels)},
                {"predicted": predicted, "probability": probability})

    def selection(self, scores):
        return scores["accuracy"]

    def health(self, splits, fit):
        return skeleton.majority_check(splits["dev"].feats.per_row["labels"], fit.dev.predictions["predicted"], "dev")

    def metrics(self, data, splits, fit):
        accuracy = fit.final.scores["accuracy"]
        return {"accuracy": accuracy, "accuracy_pct": percent(accuracy), "best_epoch": fit.epoch,
                "dev_accuracy": fit.dev.scores["accuracy"], "train_examples": len(data.train),
                "dev_examples": len(data.dev), "test_examples": len(data.test), **truncated_rows(splits),
                **({"eval_set": self.eval_set} if self.eval_set else {})}

    def write(self, out_dir, splits, fit):
        test, p = splits["test"].rows, fit.final.predictions
        write_jsonl(out_dir / "predictions.jsonl", (
            {"id": i, "text": t, "label": y, "predicted": int(k), "probability": round(float(q), 6)}
            for i, t, y, k, q in zip(test["id"], test["text"], test["label"], p["predicted"], p["probability"])))

    def table(self, metrics):
        return nsmc_table(metrics)


def run(cfg, model_dir, train_file, test_file, out_dir, cache_dir=None, eval_set: str = ""):
    """Fine-tune on ``train_file`` (dev carved from it), score ``test_file`` once, write to ``out_dir``;
    ``eval_set``: what ``test_file``'s rows are when they are not NSMC's test set."""
    return skeleton.run(Nsmc(eval_set), cfg, model_dir, train_file, test_file, out_dir, cache_dir)
