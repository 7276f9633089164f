"""NSMC sentiment fine-tuning: the first task of the last stage of the chain.

``run`` loads an ELECTRA discriminator directory (our checkpoint's ``hf/discriminator/`` or a
downloaded KoELECTRA) with a fresh binary classification head, carves a dev set out of the
train file with the seed, trains, picks the epoch with the best *dev* accuracy, and only then
scores the test file once.  Writes ``metrics.json`` (``accuracy`` as a fraction,
``accuracy_pct``, dev accuracy per epoch, reader counts) and ``learning_curve.{png,json}``,
and prints the results table; the CLI turns the directory into an ``eval`` artifact.
"""

from __future__ import annotations

import copy
import random
import time
from pathlib import Path

import numpy as np
import torch

from kolectra.finetune.config import NsmcConfig
from kolectra.finetune.nsmc_reader import NsmcRow, read_nsmc
from kolectra.finetune.report import nsmc_table, write_learning_curve
from kolectra.finetune.runtime import (FinetuneError, autocast, compute_record, fixed_width, length_sorted_batches,
                              load_model, load_tokenizer, resolve_device, seed_everything, train_epochs,
                              write_json)
from kolectra.core.config import to_dict
from kolectra.core.stage import StageOutput, progress


def split_dev(rows: list[NsmcRow], dev_fraction: float, seed: int) -> tuple[list[NsmcRow], list[NsmcRow]]:
    """Seeded shuffle of the train rows; the first ``dev_fraction`` become dev."""
    if not 0.0 < dev_fraction < 1.0:
        raise FinetuneError(f"dev_fraction must be in (0, 1), got {dev_fraction}")
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_dev = max(1, int(round(dev_fraction * len(rows))))
    if n_dev >= len(rows):
        raise FinetuneError(f"train file has {len(rows)} rows: too few to carve a dev set")
    dev = [rows[i] for i in sorted(order[:n_dev])]
    train = [rows[i] for i in order[n_dev:]]  # keeps the shuffled order for max_train_examples
    return train, dev


class Encoded:
    """Token ids of a list of rows; a batch is cut to its longest row (dynamic padding)."""

    def __init__(self, tokenizer, rows: list[NsmcRow], max_length: int):
        enc = tokenizer([r.document for r in rows], truncation=True, max_length=max_length)
        self.ids = enc["input_ids"]
        self.labels = torch.tensor([r.label for r in rows], dtype=torch.long)
        self.pad_id = tokenizer.pad_token_id
        self.max_length = max_length
        # padded once up front: a batch is then a row selection and a column cut, no Python loop
        self.lengths = np.array([len(x) for x in self.ids], dtype=np.int64)
        self.ids_NL = torch.full((len(self.ids), max(1, int(self.lengths.max(initial=1)))), self.pad_id,
                                 dtype=torch.long)
        for row, x in enumerate(self.ids):
            self.ids_NL[row, :len(x)] = torch.tensor(x, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, idx: np.ndarray, device: torch.device) -> dict[str, torch.Tensor]:
        sel = torch.as_tensor(idx)
        width = fixed_width(device, self.max_length) or int(self.lengths[idx].max())
        ids_BL = self.ids_NL[sel, :width]
        if ids_BL.shape[1] < width:  # fixed width (XLA) wider than the longest row
            ids_BL = torch.nn.functional.pad(ids_BL, (0, width - ids_BL.shape[1]), value=self.pad_id)
        return {"input_ids": ids_BL.to(device), "attention_mask": (ids_BL != self.pad_id).long().to(device),
                "labels": self.labels[sel].to(device)}


@torch.no_grad()
def accuracy(model, data: Encoded, batch_size: int, device: torch.device) -> float:
    model.eval()
    correct = 0
    for idx in length_sorted_batches([len(x) for x in data.ids], batch_size):
        b = data.batch(idx, device)
        with autocast(device):
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        correct += int((logits.argmax(-1) == b["labels"]).sum())
    return correct / max(1, len(data))


def run(cfg: NsmcConfig, model_dir: Path, train_file: Path, test_file: Path, out_dir: Path) -> StageOutput:
    from transformers import AutoModelForSequenceClassification  # noqa: PLC0415

    t_start = time.perf_counter()
    seed_everything(cfg.seed)
    device = resolve_device(cfg.device)
    train_src = read_nsmc(Path(train_file), cfg.max_bad_fraction)
    test_src = read_nsmc(Path(test_file), cfg.max_bad_fraction)
    train_rows, dev_rows = split_dev(train_src.rows, cfg.dev_fraction, cfg.seed)
    test_rows = test_src.rows
    if cfg.max_train_examples:
        train_rows = train_rows[:cfg.max_train_examples]
    if cfg.max_eval_examples:
        dev_rows, test_rows = dev_rows[:cfg.max_eval_examples], test_rows[:cfg.max_eval_examples]
    if not test_rows:
        raise FinetuneError(f"{test_file}: no usable rows")
    progress(f"nsmc: {len(train_rows)} train / {len(dev_rows)} dev / {len(test_rows)} test rows")

    tokenizer = load_tokenizer(Path(model_dir))
    train, dev, test = (Encoded(tokenizer, r, cfg.max_length) for r in (train_rows, dev_rows, test_rows))
    model = load_model(AutoModelForSequenceClassification, Path(model_dir), cfg.seed, num_labels=2).to(device)

    best = {"dev_accuracy": -1.0, "epoch": 0, "state": None}

    def loss_fn(idx: np.ndarray) -> torch.Tensor:
        return model(**train.batch(idx, device)).loss

    def after_epoch(epoch: int) -> dict:
        acc = accuracy(model, dev, cfg.eval_batch_size, device)
        if acc > best["dev_accuracy"]:  # strict: ties keep the earlier epoch
            best.update(dev_accuracy=acc, epoch=epoch,
                        state=copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()}))
        return {"dev_accuracy": acc}

    log = train_epochs(model, cfg.optim, len(train), cfg.batch_size, cfg.epochs, cfg.seed,
                       device, loss_fn, after_epoch)
    train_seconds = sum(t["seconds"] for t in log.timings)  # per-epoch timings leave dev evaluation out
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    t_eval = time.perf_counter()
    test_acc = accuracy(model, test, cfg.eval_batch_size, device)
    eval_seconds = time.perf_counter() - t_eval

    metrics = {
        "task": "nsmc",
        "accuracy": test_acc,
        "accuracy_pct": 100.0 * test_acc,
        "best_epoch": best["epoch"],
        "dev_accuracy": best["dev_accuracy"],
        "epochs": log.history,
        "train_examples": len(train), "dev_examples": len(dev), "test_examples": len(test),
        "train_file": train_src.stats, "test_file": test_src.stats,
        "config": to_dict(cfg),
    }
    write_json(Path(out_dir) / "metrics.json", metrics)
    write_learning_curve(Path(out_dir), "nsmc", metrics, log)
    for line in nsmc_table(metrics).splitlines():
        progress(line)
    compute = compute_record(
        model, device, time.perf_counter() - t_start,
        train_examples=len(train), train_seconds=round(train_seconds, 3),
        train_examples_per_second=round(len(train) * cfg.epochs / train_seconds, 2) if train_seconds else None,
        eval_examples=len(test), eval_examples_per_second=round(len(test) / eval_seconds, 2) if eval_seconds else None,
        epochs=log.timings,
        # ~6 FLOPs per parameter per trained token (Kaplan et al. 2020); padding not counted
        flops=6 * sum(p.numel() for p in model.parameters()) * sum(len(x) for x in train.ids) * cfg.epochs,
    )
    stats = {k: metrics[k] for k in ("accuracy", "accuracy_pct", "best_epoch", "dev_accuracy",
                                     "train_examples", "dev_examples", "test_examples")}
    return StageOutput(stats=stats, compute=compute)
