"""The fine-tuning tasks kolectra knows: one entry per task, read by the CLI, the stages and ``--seeds``.

Torch-free (the CLI builds its ``finetune TASK`` commands from this table without importing the
runtime).  A task is a module under ``kolectra.finetune`` with ``run(cfg, model_dir, train_file,
eval_file, out_dir, cache_dir=None) -> StageOutput`` (the tasks with ``dev_flag`` also take
``dev_file=None``) and a ``STAGE_VERSION`` (usually a
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
    # of those, the ones metrics.json holds as fractions (tables show them in percent)
    fractions: tuple[str, ...] = ()
    # what ``kolectra report REF REF ...`` shows of the task in its table across tasks
    headline: tuple[str, ...] = ()
    # CLI flags that are shortcuts for config keys: (flag, key, help)
    flags: tuple[tuple[str, str, str], ...] = ()
    dev_flag: bool = False  # an optional --dev FILE (else a dev set carved from train)

    @property
    def module_name(self) -> str:
        return f"kolectra.finetune.{self.module}"

    def load(self):
        """The task's module (imports torch, transformers and datasets)."""
        return importlib.import_module(self.module_name)


TEXT_FLAGS = (("text-column", "text_column", "column holding the text (default: text)"),
              ("text-pair-column", "text_pair_column", "column holding the second text of a pair (default: none)"),
              ("label-column", "label_column", "column holding the label (default: label); dotted names reach "
                                               "nested fields, e.g. labels.label"))
NER_FLAGS = (("tokens-column", "tokens_column", "JSONL / saved datasets: the list of tokens (default: tokens)"),
             ("tags-column", "tags_column", "JSONL / saved datasets: the list of BIO tags (default: ner_tags)"))

TASKS: dict[str, TaskEntry] = {
    "nsmc": TaskEntry("nsmc", config.NSMC_PRESETS, "NSMC sentiment classification (accuracy)", "test",
                      ("accuracy", "accuracy_pct"), fractions=("accuracy",), headline=("accuracy",)),
    "korquad": TaskEntry("korquad", config.KORQUAD_PRESETS, "KorQuAD 1.0 extractive QA (exact match, F1)", "dev",
                         ("exact_match", "f1"), headline=("exact_match", "f1")),
    "classify": TaskEntry("classify", config.CLASSIFY_PRESETS, "text or text-pair classification from TSV, CSV, "
                          "JSONL or a saved dataset (accuracy, macro-F1)", "test", ("accuracy", "macro_f1"),
                          fractions=("accuracy", "macro_f1"), headline=("accuracy",), flags=TEXT_FLAGS,
                          dev_flag=True),
    "regress": TaskEntry("regress", config.REGRESS_PRESETS, "text-pair regression, e.g. KorSTS (Pearson, "
                         "Spearman)", "test", ("spearman", "pearson"), fractions=("spearman", "pearson"),
                         headline=("spearman",), flags=TEXT_FLAGS, dev_flag=True),
    "ner": TaskEntry("ner", config.NER_PRESETS, "named-entity recognition from CoNLL-style BIO files "
                     "(entity-level F1)", "test", ("f1", "precision", "recall"),
                     fractions=("f1", "precision", "recall"), headline=("f1",), flags=NER_FLAGS, dev_flag=True),
}
