"""The fine-tuning loop and evaluation pass, on kolectra's one training runtime.

Every task trains through :func:`train_epochs` and reads model outputs through :func:`predict`;
both talk to a :class:`kolectra.model.device.Device` only (``to_device``, ``autocast``,
``step_done``, ``static_shapes``), the same runtime pretraining uses, with the optimizer and
schedule of :mod:`kolectra.model.optim`.  Nothing here knows which accelerator runs.

Batches are cut to their longest row (dynamic padding), or to ``max_length`` where the device
wants static shapes (XLA compiles one program per shape).  Training visits the rows in a seeded
shuffle (a generator of its own, so dropout draws do not move the order); evaluation goes
shortest first (:func:`length_sorted_batches`), which leaves almost no padding and does not
change any result.  The loss is summed on the device and read back once per curve point.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Callable, Iterator

import numpy as np
import torch

from kolectra.core.stage import progress
from kolectra.finetune.config import TaskConfig
from kolectra.finetune.features import Features
from kolectra.finetune.progress import bar
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


def inputs(feats: Features, idx: np.ndarray, dev: Device, max_length: int, labels: bool = True) -> dict:
    """Rows ``idx`` on the device, cut to their longest row or, for static shapes, to ``max_length``.

    The padding mask goes in as a 4-D additive bias, which transformers passes through as it is
    (as in pretraining, ``model/electra.py``): a 2-D mask is turned into one per forward, with a
    host-side ``.all()`` check that would stop an XLA step."""
    width = max_length if dev.static_shapes else int(feats.lengths[idx].max())
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
    steps_per_epoch = math.ceil(len(feats) / cfg.batch_size)
    total = max(1, steps_per_epoch * cfg.epochs)
    log = TrainLog([], [], [], steps_per_epoch, max(1, total // max(1, curve_points)))
    o = cfg.optim
    opt = optim.build(model, o.lr, o.weight_decay, tuple(o.adam_betas), o.adam_eps, fused=dev.fused_optimizer,
                      layerwise_decay=o.layerwise_lr_decay, num_layers=int(model.config.num_hidden_layers))
    warmup = int(round(o.warmup_fraction * total))
    order = torch.Generator().manual_seed(cfg.seed)

    def step(idx: np.ndarray, k: int, sums: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """One update; the loss added to the running ``sums`` inside the step's graph (on XLA one
        program for every step, the first of an epoch included)."""
        optim.set_lr(opt, k, optim.lr_scale(k, warmup, total))
        with dev.autocast():
            loss = model(**inputs(feats, idx, dev, cfg.max_length)).loss
        loss.backward()
        if o.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sums = tuple(s + loss.detach().float() for s in sums)
        dev.step_done()
        return sums

    done = 0
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        # summed on the device: a float() per step would wait for the device every step
        loss_sum, window, in_window = dev.zeros_like(torch.zeros(())), dev.zeros_like(torch.zeros(())), 0
        with bar(steps_per_epoch, f"{name} epoch {epoch}/{cfg.epochs}") as pbar:
            for idx in shuffled_batches(len(feats), cfg.batch_size, order):
                loss_sum, window = step(idx, done, (loss_sum, window))
                in_window, done = in_window + 1, done + 1
                if in_window == log.log_every or done == epoch * steps_per_epoch:
                    mean = float(window) / in_window
                    log.curve.append({"step": done, "epoch": round(done / steps_per_epoch, 6),
                                      "train_loss": round(mean, 6)})
                    window, in_window = dev.zeros_like(torch.zeros(())), 0
                    pbar.set_postfix_str(f"loss {mean:.4f}", refresh=False)
                pbar.update(1)
        # float() waits for the device (CUDA/XLA run asynchronously), so the timing is honest
        record = {"epoch": epoch, "train_loss": round(float(loss_sum) / steps_per_epoch, 6)}
        seconds = time.perf_counter() - t0
        timing = {"epoch": epoch, "seconds": round(seconds, 3),
                  "train_examples_per_second": round(len(feats) / seconds, 2) if seconds > 0 else None}
        if after_epoch is not None:
            record.update(after_epoch(epoch))
        progress(f"epoch {epoch}: {json.dumps(record | timing, ensure_ascii=False)}")
        log.history.append(record)
        log.timings.append(timing)
    return log


@torch.no_grad()
def predict(model: torch.nn.Module, dev: Device, feats: Features, cfg: TaskConfig, outputs: dict[str, bool],
            name: str = "evaluate") -> dict[str, list[np.ndarray]]:
    """The model's ``outputs`` (name -> per token?) for every row, in row order, as float32 arrays:
    per token cut to the row's length (``[len]`` or ``[len, C]``), else one per row (e.g. ``[C]``)."""
    model.eval()
    got: dict[str, list] = {k: [None] * len(feats) for k in outputs}
    batches = list(length_sorted_batches(feats.lengths, cfg.eval_batch_size))
    with bar(len(batches), name, unit="batch") as pbar:
        for idx in batches:
            with dev.autocast():
                result = model(**inputs(feats, idx, dev, cfg.max_length, labels=False))
            dev.step_done()
            for key, per_token in outputs.items():
                values = getattr(result, key).float().cpu().numpy()
                for row, i in enumerate(idx):
                    got[key][i] = values[row, :feats.lengths[i]] if per_token else values[row]
            pbar.update(1)
    return got
