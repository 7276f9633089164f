"""The fine-tuning tasks kolectra knows: one entry per task, read by the CLI, the stages and ``--seeds``.

Torch-free (the CLI builds its ``finetune TASK`` commands from this table without importing the
runtime).  A task is a module under ``kolectra.finetune`` with ``run(cfg, model_dir, train_file,
eval_file, out_dir, cache_dir=None) -> StageOutput`` and a ``STAGE_VERSION`` (usually a
:class:`kolectra.finetune.skeleton.Task` handed to :func:`kolectra.finetune.skeleton.run`), plus its
presets in :mod:`kolectra.finetune.config`.  Adding a task is that module and one line here.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Callable

from kolectra.finetune import config


@dataclasses.dataclass(frozen=True)
class TaskEntry:
    module: str  # under kolectra.finetune
    presets: dict[str, Callable]
    help: str
    eval_flag: str  # the CLI flag naming the scored file: "test" or "dev"
    metrics: tuple[str, ...]  # headline metrics (higher is better), summarised over --seeds

    def load(self):
        """The task's module (imports torch, transformers and datasets)."""
        return importlib.import_module(f"kolectra.finetune.{self.module}")


TASKS: dict[str, TaskEntry] = {
    "nsmc": TaskEntry("nsmc", config.NSMC_PRESETS, "NSMC sentiment classification (accuracy)", "test",
                      ("accuracy", "accuracy_pct")),
    "korquad": TaskEntry("korquad", config.KORQUAD_PRESETS, "KorQuAD 1.0 extractive QA (exact match, F1)", "dev",
                         ("exact_match", "f1")),
}
