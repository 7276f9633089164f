"""The fine-tuning loop and evaluation pass, on kolectra's one training runtime.

Every task trains through :func:`train_epochs` and reads model outputs through :func:`predict`;
both talk to a :class:`kolectra.model.device.Device` only (``to_device``, ``autocast``,
``step_done``, ``static_shapes``), the same runtime pretraining uses, with the optimizer and
schedule of :mod:`kolectra.model.optim`.  Nothing here knows which accelerator runs.

Batches are cut to their longest row (dynamic padding), or to ``max_length`` where the device
wants static shapes (XLA compiles one program per shape), or, when the model's forward is compiled
(``compile``: on CUDA by default, :mod:`finetune.loading`), padded up to the nearest of
:func:`bucket_widths`, a few fixed widths, so a compiled forward meets a handful of shapes and does
not recompile for each new longest row.  The attention bias hides the padding, so a width changes
no loss or prediction beyond float rounding.  Training visits the rows in a seeded
shuffle (a generator of its own, so dropout draws do not move the order); evaluation goes
shortest first (:func:`length_sorted_batches`), which leaves almost no padding and does not
change any result.  The loss is summed on the device and read back once per curve point.
Progress is :mod:`kolectra.core.bars`' (a bar per epoch, the evaluation's below it; plain lines
without a terminal).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Callable, Iterator

import numpy as np
import torch

from kolectra.core.bars import Bar
from kolectra.core.stage import progress
from kolectra.finetune.config import TaskConfig
from kolectra.finetune.features import Features
from kolectra.model import optim
from kolectra.model.device import Device
from kolectra.model.electra import attention_bias


def shuffled_batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[np.ndarray]:
    order = torch.randperm(n, generator=generator).numpy()
    for i in range(0, n, batch_size):
        yield order[i:i + batch_size]


def length_sorted_batches(lengths: np.ndarray, batch_size: int) -> Iterator[np.ndarray]:
    """Evaluation batches of similar lengths (shortest first): with per-batch padding this spends
    almost no compute on [PAD]; the order of examples does not change an evaluation's result."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    for i in range(0, len(order), batch_size):
        yield order[i:i + batch_size]


# Widths a compiled forward's batches are padded to: max_length halved BUCKETS - 1 times, each rounded
# up to a multiple of 8 (tensor cores' tile). Four shapes to compile (and, on CUDA, to record as graphs)
# for train and for evaluation, against one per distinct longest row.
BUCKETS = 4


def bucket_widths(max_length: int, buckets: int = BUCKETS) -> tuple[int, ...]:
    """The widths a compiled forward sees, ascending, the last ``max_length``: 128 -> (16, 32, 64, 128),
    512 -> (64, 128, 256, 512), 100 -> (16, 32, 56, 100)."""
    widths = {min(max_length, max(8, -(-max_length // 2**k // 8) * 8)) for k in range(buckets)}
    return tuple(sorted(widths | {max_length}))


def batch_width(longest: int, max_length: int, static: bool, bucketed: bool) -> int:
    """A batch's width: ``max_length`` for static shapes, the smallest bucket that holds the longest row
    when bucketed, else the longest row itself."""
    if static:
        return max_length
    if bucketed:
        return next(w for w in bucket_widths(max_length) if w >= longest)
    return longest


def compiled_forward(dev: Device, cfg: TaskConfig) -> bool:
    """Whether the model's forward runs compiled (``compile``: "auto" is the device's choice)."""
    return dev.compile_choice(cfg.compile) is not None


def inputs(feats: Features, idx: np.ndarray, dev: Device, cfg: TaskConfig, labels: bool = True) -> dict:
    """Rows ``idx`` on the device, cut to :func:`batch_width`.

    The padding mask goes in as a 4-D additive bias, which transformers passes through as it is
    (as in pretraining, ``model/electra.py``): a 2-D mask is turned into one per forward, with a
    host-side ``.all()`` check that would stop an XLA step."""
    width = batch_width(int(feats.lengths[idx].max()), cfg.max_length, dev.static_shapes, compiled_forward(dev, cfg))
    batch = dev.to_device(feats.batch(idx, width, labels))
    batch["attention_mask"] = attention_bias(batch["attention_mask"])
    return batch


@dataclasses.dataclass
class TrainLog:
    """What :func:`train_epochs` hands back.

    ``history``: one record per epoch (mean train loss + whatever ``after_epoch`` returned) and
    ``curve``: mean train loss over each window of ``log_every`` optimizer steps, both
    deterministic on the CPU, for the eval artifact (metrics, learning curve).
    ``timings``: wall-clock figures per epoch, kept apart so metrics.json bytes reproduce.
    """

    history: list[dict]
    curve: list[dict]
    timings: list[dict]
    steps_per_epoch: int
    log_every: int


def train_epochs(model: torch.nn.Module, dev: Device, feats: Features, cfg: TaskConfig,
                 after_epoch: Callable[[int], dict] | None = None, name: str = "train",
                 curve_points: int = 100) -> TrainLog:
    """``cfg.epochs`` of AdamW over seeded shuffled batches of ``feats`` (the model computes its loss).

    ``after_epoch(epoch)`` (dev evaluation) returns extra fields for that epoch's record.
    The loss curve gets about ``curve_points`` points whatever the run's length."""
    run = _Training(model, dev, feats, cfg, curve_points)
    for epoch in range(1, cfg.epochs + 1):
        t0 = time.perf_counter()
        with Bar(f"{name} epoch {epoch}/{cfg.epochs}", run.log.steps_per_epoch, "step") as bar:
            record = {"epoch": epoch, "train_loss": run.epoch(epoch, bar)}
            seconds = time.perf_counter() - t0  # train_loss was read from the device: the epoch is done
            if after_epoch is not None:
                record.update(after_epoch(epoch))  # its evaluation bar shows below this epoch's
        timing = {"epoch": epoch, "seconds": round(seconds, 3),
                  "train_examples_per_second": round(len(feats) / seconds, 2) if seconds > 0 else None}
        progress(f"epoch {epoch}: {json.dumps(record | timing, ensure_ascii=False)}")
        run.log.history.append(record)
        run.log.timings.append(timing)
    return run.log


class _Training:
    """The optimizer, schedule, batch order and loss log of one :func:`train_epochs` call."""

    def __init__(self, model: torch.nn.Module, dev: Device, feats: Features, cfg: TaskConfig, curve_points: int):
        self.model, self.dev, self.feats, self.cfg, o = model, dev, feats, cfg, cfg.optim
        steps_per_epoch = math.ceil(len(feats) / cfg.batch_size)
        self.total = max(1, steps_per_epoch * cfg.epochs)
        self.log = TrainLog([], [], [], steps_per_epoch, max(1, self.total // max(1, curve_points)))
        self.opt = optim.build(model, o.lr, o.weight_decay, tuple(o.adam_betas), o.adam_eps,
                               fused=dev.fused_optimizer, layerwise_decay=o.layerwise_lr_decay,
                               num_layers=int(model.config.num_hidden_layers))
        self.warmup = int(round(o.warmup_fraction * self.total))
        self.order = torch.Generator().manual_seed(cfg.seed)  # its own: dropout draws do not move it
        self.done = 0
        self.compiled = compiled_forward(dev, cfg)

    def epoch(self, epoch: int, bar: Bar) -> float:
        """One pass over the rows; the epoch's mean loss, rounded for metrics.json."""
        self.model.train()
        log, zero = self.log, lambda: self.dev.zeros_like(torch.zeros(()))
        # summed on the device: a float() per step would wait for the device every step
        loss_sum, window, in_window = zero(), zero(), 0
        for idx in shuffled_batches(len(self.feats), self.cfg.batch_size, self.order):
            t0 = time.perf_counter()
            loss_sum, window = self.step(idx, (loss_sum, window))
            if self.compiled and self.done == 1:  # one wait for the device, once per run: what compiling cost
                float(loss_sum)
                progress(f"fine-tuning: step 1 took {time.perf_counter() - t0:.2f} s (with compilation)")
            bar.advance()
            in_window += 1
            if in_window == log.log_every or self.done == epoch * log.steps_per_epoch:
                mean = float(window) / in_window
                log.curve.append({"step": self.done, "epoch": round(self.done / log.steps_per_epoch, 6),
                                  "train_loss": round(mean, 6)})
                window, in_window = zero(), 0
                # a bar shows every point; without a terminal a line every 50 steps or so
                if bar.bar is not None or self.done % max(50, log.log_every) < log.log_every:
                    bar.report(f"loss {mean:.4f}")
        # float() waits for the device (CUDA/XLA run asynchronously), so the timing is honest
        return round(float(loss_sum) / log.steps_per_epoch, 6)

    def step(self, idx: np.ndarray, sums: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """One update; the loss added to the running ``sums`` inside the step's graph (on XLA one
        program for every step, the first of an epoch included)."""
        o = self.cfg.optim
        optim.set_lr(self.opt, self.done, optim.lr_scale(self.done, self.warmup, self.total))
        with self.dev.autocast():
            loss = self.model(**inputs(self.feats, idx, self.dev, self.cfg)).loss
        loss.backward()
        if o.max_grad_norm > 0:
            # the device's clipping: torch's ops without a .to per parameter (host time between steps)
            self.dev.clip_grads(list(self.model.parameters()), o.max_grad_norm)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        sums = tuple(s + loss.detach().float() for s in sums)
        self.dev.step_done()
        self.done += 1
        return sums


@torch.no_grad()
def predict(model: torch.nn.Module, dev: Device, feats: Features, cfg: TaskConfig, outputs: dict[str, bool],
            name: str = "evaluate") -> dict[str, list[np.ndarray]]:
    """The model's ``outputs`` (name -> per token?) for every row, in row order, as float32 arrays:
    per token cut to the row's length (``[len]`` or ``[len, C]``), else one per row (e.g. ``[C]``)."""
    model.eval()
    got: dict[str, list] = {k: [None] * len(feats) for k in outputs}
    batches = list(length_sorted_batches(feats.lengths, cfg.eval_batch_size))
    with Bar(name, len(batches), "batch") as bar:
        for idx in batches:
            with dev.autocast():
                result = model(**inputs(feats, idx, dev, cfg, labels=False))
            dev.step_done()
            for key, per_token in outputs.items():
                values = getattr(result, key).float().cpu().numpy()
                for row, i in enumerate(idx):
                    got[key][i] = values[row, :feats.lengths[i]] if per_token else values[row]
            bar.advance()
    return got
