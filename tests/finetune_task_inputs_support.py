"""The helpers tests/test_finetune_task_inputs.py and tests/test_finetune_task_inputs_awkward.py share: a
file written as UTF-8 bytes (``write``), a TSV of topic labels (``topics``), the sample classify settings with
changes (``cls_cfg``) and a task's dev split and fit as its health reads them (``fitted``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from kolectra.finetune import config


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def topics(tmp_path: Path, name: str, labels: list[str]) -> Path:
    return write(tmp_path / name, "id\ttext\tlabel\n" + "".join(f"{i}\t문장 {i}\t{y}\n" for i, y in enumerate(labels)))


def cls_cfg(**kw):
    return dataclasses.replace(config.sample_classify(), **kw)


def fitted(labels, predictions: dict, scores: dict):
    split = SimpleNamespace(feats=SimpleNamespace(per_row={"labels": np.asarray(labels)}), rows=[None] * len(labels))
    return {"dev": split}, SimpleNamespace(dev=SimpleNamespace(predictions=predictions, scores=scores))
