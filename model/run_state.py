"""What a pretraining run holds: :class:`Run`, everything its loop touches (the model pair, the data, the
optimizer, the metrics log, the standing health warning, its wall times), with the whole run's figures that
the health check reads (:meth:`Run.health_context`). Built by :func:`model.train.start`; stepped by
:mod:`model.train`'s loop and ended by :mod:`model.train_end`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import torch

from kolectra.model import data, health, objectives
from kolectra.model.config import PretrainConfig
from kolectra.model.device import Batches, Device
from kolectra.model.electra import ElectraPair
from kolectra.model.metrics import MetricsLog
from kolectra.model.pretrain_inputs import Inputs


@dataclasses.dataclass
class Run:
    """Everything the loop touches, built by :func:`model.train.start`."""

    cfg: PretrainConfig
    inputs: Inputs
    dev: Device
    model: ElectraPair
    loader: data.ExampleLoader
    batches: Batches
    optimizer: torch.optim.Optimizer
    params: list[torch.Tensor]
    step_fn: Callable
    log: MetricsLog
    first_step: int  # 0, or the checkpoint's step on resume
    flops_per_step: float
    flops_share: dict[str, float]  # of a step's FLOPs: body, generator_head, discriminator_head, mlm_head
    peak_flops: float
    where: str
    compile_mode: str | None  # torch.compile's mode for the step (the device's choice for "auto"), None: eager
    warned: bool = False  # the not-learning warning stands (printed; cleared by a recovery line)
    standing: dict | None = None  # the verdict that gave the warning standing (health_standing.final)
    expected_untrained: str | None = None  # why the caller expects it not to learn (health.warning_text)
    # wall seconds: this process started at t_start; earlier processes of a resumed run had spent
    # wall_before up to the checkpoint it resumed from (the time after that checkpoint is redone)
    t_start: float = 0.0
    wall_before: float = 0.0
    # the 0-based step on the device, for schedules computed there (objectives.knobs); None: nothing scheduled
    step_t: torch.Tensor | None = None
    # one update's device work, micro-batches -> (each one's metric sums, the update's): device_step,
    # or with train.compile_mode=whole-step that recorded once as a CUDA graph (model/step_graph.py)
    device_step: Callable | None = None
    # a resume at the run's last step, between log steps: the open window's rate, written as the run's
    # last line once every rank has started (the line's values are averaged over the ranks: a collective)
    last_window_lr: float | None = None

    def wall_seconds(self) -> float:
        """The whole run's wall time so far, earlier processes of a resumed run included."""
        return self.wall_before + time.perf_counter() - self.t_start

    def health_context(self) -> health.Context:
        """The run's whole, across resumes and ranks: its non-padding tokens (``MetricsLog.nonpad_tokens``)
        over the slots of every global batch up to the last written line."""
        t, index, log = self.cfg.train, self.inputs.index, self.log
        done = max(1, log.last.get("step", 0) - log.counted_from)
        slots = done * t.batch_size * index.max_seq_length
        nonpad = log.nonpad_tokens
        obj = self.cfg.objective
        return health.Context(obj.objective, self.inputs.specials.vocab_size, t.warmup_steps,
                              t.steps, t.lr, nonpad_tokens=nonpad,
                              padding_share=max(0.0, 1.0 - nonpad / slots) if nonpad else 0.0,
                              dropout=self.cfg.model.dropout, schedule=t.schedule,
                              rtd_from=objectives.mlm_steps(obj, t.steps) if obj.objective == "mlm_then_rtd" else 0,
                              disc_mlm_weight=obj.disc_mlm_weight)
