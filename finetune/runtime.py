"""Device, seeding, model loading and the shared training loop of the fine-tuning stage.

The task modules (``finetune.nsmc``, ``finetune.korquad``) are thin: they turn their data into
tensors and call :func:`train_epochs`; this module owns what is common — loading a HF ELECTRA
discriminator directory with a fresh, seeded task head, AdamW with layer-wise LR decay and the
warm-up + linear decay schedule from :mod:`kolectra.model.optim` (shared with pretraining), bf16 autocast on CUDA, and the compute record for the eval artifact.
"""

from __future__ import annotations

import dataclasses
import json
import math
import platform
import random
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch

from kolectra.finetune.config import OptimConfig
from kolectra.model import optim
from kolectra.core.stage import progress


class FinetuneError(ValueError):
    """Bad input to the fine-tuning stage; the message names the file (and line)."""


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def resolve_device(name: str) -> torch.device:
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise FinetuneError("device 'cuda' asked for but torch sees no CUDA device")
        return torch.device("cuda")
    if name == "xla":
        import torch_xla.core.xla_model as xm  # noqa: PLC0415 - optional backend

        return xm.xla_device()
    raise FinetuneError(f"unknown device {name!r} (cpu, cuda or xla)")


def load_tokenizer(model_dir: Path):
    from transformers import AutoTokenizer  # noqa: PLC0415 - heavy import

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FinetuneError(f"{model_dir}: not a HF model directory (no config.json)")
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    if not tok.is_fast:
        raise FinetuneError(f"{model_dir}: a fast tokenizer (tokenizer.json) is needed for offsets")
    return tok


def load_model(model_cls, model_dir: Path, seed: int, **kwargs) -> torch.nn.Module:
    """Encoder weights from ``model_dir``; the new task head initialised from ``seed``."""
    torch.manual_seed(seed)  # the head's init draws from the global generator
    model = model_cls.from_pretrained(str(model_dir), **kwargs)
    return model


def num_layers(model: torch.nn.Module) -> int:
    return int(model.config.num_hidden_layers)


def batches(n: int, batch_size: int, generator: torch.Generator | None) -> Iterator[np.ndarray]:
    """Index batches; shuffled by ``generator`` (seeded by the caller) or in order."""
    order = torch.randperm(n, generator=generator).numpy() if generator is not None else np.arange(n)
    for i in range(0, n, batch_size):
        yield order[i:i + batch_size]


def length_sorted_batches(lengths: list[int], batch_size: int) -> Iterator[np.ndarray]:
    """Evaluation batches of similar lengths (shortest first): with per-batch padding this
    spends almost no compute on [PAD].  Only for evaluation, where the order of examples does
    not change the result; training keeps its seeded shuffle."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    for i in range(0, len(order), batch_size):
        yield order[i:i + batch_size]


def fixed_width(device: torch.device, max_length: int) -> int | None:
    """XLA compiles one graph per input shape: pad every batch to ``max_length`` there.
    Elsewhere batches are padded to their longest row (None), which is faster on CPU/GPU."""
    return max_length if device.type == "xla" else None


def autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return torch.autocast(device_type="cpu", enabled=False)


@dataclasses.dataclass
class TrainLog:
    """What :func:`train_epochs` hands back.

    ``history``: one record per epoch (mean train loss + whatever ``after_epoch`` returned) and
    ``curve``: mean train loss over each window of ``log_every`` optimizer steps — both
    deterministic on CPU, they go into the eval artifact (metrics, learning curve).
    ``timings``: wall-clock figures per epoch, kept apart so metrics.json bytes reproduce.
    """

    history: list[dict]
    curve: list[dict]
    timings: list[dict]
    steps_per_epoch: int
    log_every: int


def train_epochs(model: torch.nn.Module, cfg_optim: OptimConfig, n_examples: int,
                 batch_size: int, epochs: int, seed: int, device: torch.device,
                 loss_fn: Callable[[np.ndarray], torch.Tensor],
                 after_epoch: Callable[[int], dict] | None = None,
                 curve_points: int = 100) -> TrainLog:
    """Run ``epochs`` of AdamW over shuffled index batches; ``loss_fn(idx)`` returns the loss.

    ``after_epoch(epoch)`` (e.g. dev evaluation) returns extra fields for that epoch's record.
    The loss curve gets about ``curve_points`` points whatever the run's length.
    """
    steps_per_epoch = math.ceil(n_examples / batch_size)
    total = max(1, steps_per_epoch * epochs)
    log_every = max(1, total // max(1, curve_points))
    opt = optim.build(model, cfg_optim.lr, cfg_optim.weight_decay, tuple(cfg_optim.adam_betas), cfg_optim.adam_eps,
                      layerwise_decay=cfg_optim.layerwise_lr_decay, num_layers=num_layers(model))
    warmup = int(round(cfg_optim.warmup_fraction * total))
    gen = torch.Generator().manual_seed(seed)
    log = TrainLog([], [], [], steps_per_epoch, log_every)
    step = 0
    for epoch in range(1, epochs + 1):
        model.train()
        t0 = time.perf_counter()
        # summed on the device: a float() per step would force a host sync on CUDA/XLA; the
        # window sum is read once per ``log_every`` steps
        loss_sum = torch.zeros((), dtype=torch.float32, device=device)
        window_sum = torch.zeros((), dtype=torch.float32, device=device)
        window_steps = 0
        for idx in batches(n_examples, batch_size, gen):
            optim.set_lr(opt, step, optim.lr_scale(step, warmup, total))
            with autocast(device):
                loss = loss_fn(idx)
            loss.backward()
            if cfg_optim.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg_optim.max_grad_norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
            if device.type == "xla":
                import torch_xla.core.xla_model as xm  # noqa: PLC0415

                xm.mark_step()
            loss_sum += loss.detach().float()
            window_sum += loss.detach().float()
            window_steps += 1
            step += 1
            if window_steps == log_every or step == epoch * steps_per_epoch:
                mean = float(window_sum) / window_steps
                log.curve.append({"step": step, "epoch": round(step / steps_per_epoch, 6),
                                  "train_loss": round(mean, 6)})
                window_sum.zero_()
                window_steps = 0
                if step % max(50, log_every) < log_every:
                    progress(f"epoch {epoch} step {step}/{total} loss {mean:.4f}")
        # float() waits for the device (CUDA/XLA run asynchronously), so the timing is honest
        record = {"epoch": epoch, "train_loss": round(float(loss_sum) / max(1, steps_per_epoch), 6)}
        seconds = time.perf_counter() - t0
        timing = {"epoch": epoch, "seconds": round(seconds, 3),
                  "train_examples_per_second": round(n_examples / seconds, 2) if seconds > 0 else None}
        if after_epoch is not None:
            record.update(after_epoch(epoch))
        progress(f"epoch {epoch}: {json.dumps(record | timing, ensure_ascii=False)}")
        log.history.append(record)
        log.timings.append(timing)
    return log


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def compute_record(model: torch.nn.Module, device: torch.device, wall_seconds: float,
                   **extra) -> dict:
    out = {"parameters": count_parameters(model), "wall_seconds": round(wall_seconds, 3),
           "device": str(device.type), "host_cpu": platform.processor() or platform.machine(),
           "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        out["device_name"] = torch.cuda.get_device_name(device)
        out["precision"] = "bf16-autocast"
    else:
        out["precision"] = "fp32"
    out.update(extra)
    return out


def write_json(path: Path, obj) -> None:
    """Sorted keys, UTF-8, trailing newline: the same result gives the same bytes."""
    Path(path).write_text(json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n",
                          encoding="utf-8")
