"""What every fine-tuning task does, written once: :func:`run` drives a :class:`Task` through seven steps.

1. check the settings (``cfg.validate()``) and that the training file is not the scored one;
2. read the files into rows (``task.read``), a dev set carved from train where the task has none;
3. tokenise every split with ``datasets.map`` (``task.encode``; cached, :mod:`finetune.features`);
4. load the model on the device (:mod:`finetune.loading`, :func:`kolectra.model.runtime.resolve`),
   re-initialising its top ``reinit_top_layers`` encoder layers (:mod:`finetune.reinit`);
5. train the epochs, evaluating dev after each; keep the best dev epoch's weights (``task.select``)
   or the last epoch's;
6. score the test rows once with the kept weights (a task whose scored file is its dev set,
   ``Data.test is None``, reports the last dev evaluation and never selects on it);
7. write ``metrics.json`` (the task's figures, per-epoch records, ``health``, config), the task's
   predictions, the learning curve; print the results table and any health warning.

A task module is a :class:`Task` subclass (its files, its tokenising, its scores, its outputs)
and ``run = functools.partial(skeleton.run, TheTask())``; see ``finetune/nsmc.py``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kolectra.core.config import ConfigError, to_dict
from kolectra.core.errors import UserInputError
from kolectra.core.stage import StageOutput, progress, warn
from kolectra.finetune.config import TaskConfig
from kolectra.finetune.features import Features, tokenize, tokenizer_key
from kolectra.finetune.files import FinetuneError, same_content, write_json
from kolectra.finetune.leakage import Keys, overlap
from kolectra.finetune.loading import compute_record, load_model, load_tokenizer
from kolectra.finetune.loop import TrainLog, predict, train_epochs
from kolectra.finetune.progress import quiet_libraries
from kolectra.finetune.reinit import reinit_top_layers
from kolectra.finetune.report import write_learning_curve
from kolectra.finetune.unknown import warn_unknown
from kolectra.model import runtime
from kolectra.model.device import Device
from kolectra.model.electra import count_parameters


@dataclasses.dataclass
class Data:
    """A task's rows (``datasets.Dataset``): ``dev`` is evaluated after every epoch, ``test`` scored
    once; ``test`` None: the dev rows are the scored ones.  ``facts``: what reading found out
    (reader counts per file, what the scored set is), copied into metrics.json.  ``warnings``: what reading
    warned of (a file's bad rows left out), said already, for the artifact's ``stats.warnings``."""

    train: Any
    dev: Any
    test: Any | None
    facts: dict
    warnings: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Split:
    rows: Any  # as read
    encoded: Any  # as tokenised (one row per model input: a KorQuAD question has several windows)
    feats: Features
    derived: dict = dataclasses.field(default_factory=dict)  # a task's objects built once per split


@dataclasses.dataclass
class Scored:
    scores: dict  # the task's figures on a split, e.g. {"accuracy": 0.9}
    predictions: Any  # what the task writes out (per-row predictions)
    seconds: float


@dataclasses.dataclass
class Fit:
    log: TrainLog | None = None
    epoch: int = 0  # the epoch whose weights were scored
    dev: Scored | None = None  # that epoch's dev evaluation
    final: Scored | None = None  # the scored split's evaluation


class Task:
    """A fine-tuning task: override the hooks below; :func:`run` does the rest."""

    name = "task"
    auto_model = "AutoModelForSequenceClassification"  # transformers' class for the task head
    per_token = ("input_ids", "token_type_ids")  # encoded columns padded per token
    per_row = ("labels",)  # encoded columns with one value per row (targets)
    outputs = {"logits": False}  # model outputs read at evaluation -> per token?
    select = True  # keep the best dev epoch (by ``selection``); False: the last epoch
    stats = ()  # metrics.json keys copied into the artifact's manifest

    def read(self, cfg: TaskConfig, train_file: Path, eval_file: Path) -> Data:
        raise NotImplementedError

    def pairs(self, cfg: TaskConfig) -> bool:
        """Whether the model reads a pair of texts (a second segment)."""
        return False

    def encoder(self, tokenizer, cfg: TaskConfig) -> Callable[[dict, list[int]], dict]:
        """A batched ``map`` function: rows (with their indices) -> encoded columns."""
        raise NotImplementedError

    def encoding(self, cfg: TaskConfig) -> dict:
        """The settings that decide :meth:`encoder`'s output (for the tokenisation cache key)."""
        return {"max_length": cfg.max_length}

    def check(self, splits: dict[str, Split], data: Data, cfg: TaskConfig) -> None:
        """Refuse encoded data that cannot train (e.g. no target inside any window)."""

    def model_config(self, data: Data) -> dict:
        """Extra config for the model, e.g. ``num_labels``."""
        return {}

    def score(self, split: Split, outputs: dict[str, list[np.ndarray]], cfg: TaskConfig) -> tuple[dict, Any]:
        """(figures, predictions) from the model's outputs on a split."""
        raise NotImplementedError

    def evaluate_after(self, epoch: int, cfg: TaskConfig) -> bool:
        return True

    def epoch_record(self, scores: dict) -> dict:
        """Fields of an epoch's record (metrics.json ``epochs``) from its dev figures."""
        return {f"dev_{k}": v for k, v in scores.items()}

    def selection(self, scores: dict) -> float:
        """Higher is better; the first epoch reaching the maximum is kept."""
        raise NotImplementedError

    def health(self, splits: dict[str, Split], fit: Fit) -> tuple[list[str], dict]:
        """(problems in plain words, the figures checked): a run that finished but learned nothing."""
        return [], {}

    def metrics(self, data: Data, splits: dict[str, Split], fit: Fit) -> dict:
        raise NotImplementedError

    def write(self, out_dir: Path, splits: dict[str, Split], fit: Fit) -> None:
        """The task's prediction files."""

    def table(self, metrics: dict) -> str:
        raise NotImplementedError


def run(task: Task, cfg: TaskConfig, model_dir: Path, train_file: Path, eval_file: Path, out_dir: Path,
        cache_dir: Path | None = None) -> StageOutput:
    """Fine-tune ``model_dir`` on ``train_file``, score ``eval_file``, write the eval files to ``out_dir``.

    ``cache_dir``: where tokenised splits are kept between runs (None: in memory only)."""
    t_start = time.perf_counter()
    cfg.validate()
    if same_content(train_file, eval_file) and not cfg.train_on_eval:
        raise ConfigError(f"train_on_eval: the training file {train_file} is the file scored ({eval_file}); "
                          "pass --set train_on_eval=true to measure memorisation on purpose")
    dev = runtime.resolve(cfg.device, cfg.bf16, cfg.cpu_threads)
    try:
        dev.seed(cfg.seed)
        data = task.read(cfg, Path(train_file), Path(eval_file))
        # a file's bad rows left out first (before 2026-12-02 on stderr alone: the report and run's summary
        # said nothing of a test file short of rows)
        warnings = list(data.warnings)
        warnings += [] if cfg.train_on_eval else warn_overlap(task, data, Path(train_file), Path(eval_file))
        warnings += warn_small_dev(task, data, cfg)
        tokenizer = load_tokenizer(Path(model_dir))
        splits = encode(task, data, tokenizer, cfg, Path(model_dir), cache_dir)
        warnings += warn_unknown(task.name, data, splits, tokenizer, Path(model_dir))
        task.check(splits, data, cfg)
        with quiet_libraries():
            model = load_model(task.auto_model, Path(model_dir), cfg, dev, tokenizer, pairs=task.pairs(cfg),
                               **task.model_config(data))
        if reinit_top_layers(model, cfg.reinit_top_layers, cfg.seed):
            progress(f"{task.name}: the top {cfg.reinit_top_layers} encoder layer(s) re-initialised (seed {cfg.seed})")
        fit = train(task, model, dev, splits, cfg)
        return finish(task, cfg, data, splits, fit, model, dev, Path(out_dir), t_start, warnings)
    finally:
        dev.close()


# A dev split this small moves by over 3 points a row: the epoch it picks is close to a coin toss.
MIN_DEV_ROWS = 30


def warn_small_dev(task: Task, data: Data, cfg: TaskConfig) -> list[str]:
    """One warning when the epoch is chosen on fewer than :data:`MIN_DEV_ROWS` dev rows (a 27-row
    training file gave a 3-row dev split, silently); returned for the artifact's stats too."""
    if data.test is None or not task.select or not 0 < len(data.dev) < MIN_DEV_ROWS:  # none: encode refuses it
        return []
    dev_file = getattr(task, "dev_file", None)
    remedy = (f"give a --dev file with more rows than {dev_file}" if dev_file is not None else
              f"give more training rows, raise dev_fraction (now {getattr(cfg, 'dev_fraction', '?')}) or, where the "
              "task takes one, --dev FILE")
    text = (f"{task.name}: the epoch is chosen on {len(data.dev)} dev rows (fewer than {MIN_DEV_ROWS}; one row is "
            f"{1 / len(data.dev):.0%} of them), so the choice is close to chance; {remedy}")
    warn(text)
    return [text]


def warn_overlap(task: Task, data: Data, train_file: Path, eval_file: Path) -> list[str]:
    """One warning when scored rows also appear, as text, in the training file (leakage.py);
    returned too, for the artifact's stats (``kolectra run``'s summary lists them)."""
    # with a test split, the dev rows were read for training too (carved from the training file or a --dev file)
    seen, scored = ([data.train, data.dev], data.test) if data.test is not None else ([data.train], data.dev)
    keys = Keys()
    n, total = overlap(seen, scored, keys)
    if not n:
        return warn_dev_overlap(task, data, train_file, keys)
    dev_file = getattr(task, "dev_file", None) if data.test is not None else None
    if dev_file is not None and overlap([data.train], scored, keys)[0] < n:  # some only in the --dev file
        where = f"training file {train_file} or the dev file {dev_file}"
    else:
        where = f"training file {train_file}"
    text = (f"{task.name}: {n} of {total} scored rows ({n / total:.1%}) of {eval_file} also appear in the "
            f"{where} (same text after NFC and whitespace normalisation): the score "
            "overstates what the model learned; remove them from one of the files")
    warn(text)
    return [text] + warn_dev_overlap(task, data, train_file, keys)


def warn_dev_overlap(task: Task, data: Data, train_file: Path, keys: Keys | None = None) -> list[str]:
    """One warning when a ``--dev`` file's rows are also training rows: the epoch is then chosen partly
    on memorised rows (a carved dev split keeps every text on one side: ``features.split_dev``)."""
    if data.test is None or not task.select:
        return []
    n, total = overlap([data.train], data.dev, keys or Keys())
    if not n:
        return []
    text = (f"{task.name}: {n} of {total} dev rows ({n / total:.1%}) also appear in the training file {train_file} "
            "(same text after NFC and whitespace normalisation): the epoch is chosen partly on rows the model "
            "trained on; remove them from one of the files")
    warn(text)
    return [text]


def encode(task: Task, data: Data, tokenizer, cfg: TaskConfig, model_dir: Path,
           cache_dir: Path | None) -> dict[str, Split]:
    # the task module's STAGE_VERSION moves whenever its bytes change, encoding included
    version = getattr(sys.modules[type(task).__module__], "STAGE_VERSION", 0)
    settings = {"task": task.name, "version": version, "tokenizer": tokenizer_key(model_dir), **task.encoding(cfg)}
    splits = {}
    for name, rows in (("train", data.train), ("dev", data.dev), ("test", data.test)):
        if rows is None:
            continue
        if len(rows) == 0:
            raise FinetuneError(f"{task.name}: no {name} rows left to use")
        encoded = tokenize(rows, task.encoder(tokenizer, cfg), desc=f"{task.name}: tokenising {name}",
                           settings=settings, cache_dir=cache_dir)
        splits[name] = Split(rows, encoded, Features.of(encoded, tokenizer.pad_token_id, task.per_token,
                                                        task.per_row))
    return splits


def evaluate(task: Task, model, dev: Device, split: Split, cfg: TaskConfig, name: str) -> Scored:
    t0 = time.perf_counter()
    scores, predictions = task.score(split, predict(model, dev, split.feats, cfg, task.outputs, name), cfg)
    return Scored(scores, predictions, time.perf_counter() - t0)


def train(task: Task, model, dev: Device, splits: dict[str, Split], cfg: TaskConfig) -> Fit:
    """Epochs with dev evaluation; then the kept weights scored once on the test split."""
    if task.select and "test" not in splits:
        raise UserInputError(f"{task.name}: selecting an epoch on the scored split would overstate it")
    fit, best = Fit(), {"state": None}

    def after_epoch(epoch: int) -> dict:
        if not task.evaluate_after(epoch, cfg):
            return {}
        scored = evaluate(task, model, dev, splits["dev"], cfg, f"{task.name} dev, epoch {epoch}")
        if not task.select or fit.dev is None or task.selection(scored.scores) > task.selection(fit.dev.scores):
            fit.epoch, fit.dev = epoch, scored  # strict: ties keep the earlier epoch
            if task.select:
                best["state"] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        return task.epoch_record(scored.scores)

    fit.log = train_epochs(model, dev, splits["train"].feats, cfg, after_epoch, name=task.name)
    if "test" not in splits:
        fit.final = fit.dev
        return fit
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    fit.final = evaluate(task, model, dev, splits["test"], cfg, f"{task.name} test")
    return fit


def finish(task: Task, cfg: TaskConfig, data: Data, splits: dict[str, Split], fit: Fit, model, dev: Device,
           out_dir: Path, t_start: float, warnings: list[str] | tuple = ()) -> StageOutput:
    """metrics.json, the task's predictions, the learning curve; the table and warnings on stderr.
    ``warnings`` (printed already) go into the stats only: metrics.json keeps its bytes."""
    problems, figures = task.health(splits, fit)
    diverged = [r["epoch"] for r in fit.log.history if not math.isfinite(r.get("train_loss", 0.0))]
    if diverged:  # then whatever else health saw follows from it
        problems = [f"training diverged: the train loss is not a number from epoch {diverged[0]} on; try a "
                    f"lower optim.lr (now {cfg.optim.lr:g})", *problems]
    # the shape of pretraining's verdict (kolectra.model.health): status ok / not_learning
    health = {"status": "not_learning", "problems": problems, "figures": figures} if problems else \
        {"status": "ok", "figures": figures}
    metrics = {"task": task.name, **data.facts, **task.metrics(data, splits, fit), "epochs": fit.log.history,
               "health": health, "config": to_dict(cfg)}
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "metrics.json", metrics)
    task.write(out_dir, splits, fit)
    write_learning_curve(out_dir, task.name, metrics, fit.log)
    for line in task.table(metrics).splitlines():
        progress(line)
    for problem in problems:
        progress(f"WARNING: {problem}")
    train, final = splits["train"].feats, splits["test" if "test" in splits else "dev"].feats
    train_seconds = sum(t["seconds"] for t in fit.log.timings)  # epoch timings leave dev evaluation out
    compute = compute_record(
        model, dev, cfg, time.perf_counter() - t_start, train_rows=len(data.train), train_examples=len(train),
        train_seconds=round(train_seconds, 3),
        train_examples_per_second=round(len(train) * cfg.epochs / train_seconds, 2) if train_seconds else None,
        eval_examples=len(final),
        eval_examples_per_second=round(len(final) / fit.final.seconds, 2) if fit.final.seconds else None,
        epochs=fit.log.timings,
        # ~6 FLOPs per parameter per trained token (Kaplan et al. 2020); padding not counted
        flops=6 * count_parameters(model) * train.tokens * cfg.epochs)
    stats = {k: metrics[k] for k in (*task.stats, "health")}
    return StageOutput(stats={**stats, "warnings": list(warnings)} if warnings else stats, compute=compute)


def majority_check(labels: np.ndarray, predicted: np.ndarray, where: str) -> tuple[list[str], dict]:
    """Classification's "learned nothing": one class predicted for every row, or no better than that."""
    classes, counts = np.unique(labels, return_counts=True)
    top, share = int(classes[counts.argmax()]), float(counts.max() / len(labels))
    accuracy = float((labels == predicted).mean())
    said = np.unique(predicted)
    figures = {f"{where}_accuracy": accuracy, f"{where}_majority_class": top, f"{where}_majority_share": share,
               f"{where}_predicted_classes": len(said)}
    if len(said) == 1:
        return [f"the model predicts class {said[0]} for all {len(labels)} {where} rows: it learned nothing "
                f"({where} accuracy {accuracy:.2%} is just the share of that class)"], figures
    if accuracy <= share:
        return [f"{where} accuracy {accuracy:.2%} is no better than always predicting the majority class "
                f"{top} ({share:.2%} of the {where} rows): the model learned nothing useful"], figures
    return [], figures
