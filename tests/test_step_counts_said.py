"""A count of one step reads ``1 step``, not ``1 steps`` (core/words.py counted): the pretraining lines a user
reads of a one-step run, and the warm-up lines of short runs."""

from __future__ import annotations

import dataclasses

from kolectra.model.config import fit_warmup, warmup_warning
from kolectra.model.presets import preset
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.model_support import small_chain


def test_one_step_is_said_in_the_singular(tmp_path, capsys):
    small_chain(Store(tmp_path))
    ex = str(Store(tmp_path).list("examples")[0].path)
    assert main(["pretrain", "--examples", ex, "--out", str(tmp_path), "--preset", "tiny", "--steps", "1",
                 "--set", "train.batch_size=8", "--set", "train.warmup_steps=0", "--set", "train.cpu_threads=1"]) == 0
    err = capsys.readouterr().err
    assert "1 step of 8" in err and "pretrain done: 1 step in " in err, err
    assert "1 steps" not in err, err


def test_short_warm_ups_are_said_in_the_singular():
    cfg = preset("tiny")
    _, line = fit_warmup(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=10)), explicit=False)
    assert line.startswith("warm-up scaled to 1 step (10% of 10):"), line
    said = warmup_warning(dataclasses.replace(cfg.train, steps=1, warmup_steps=1))
    assert said.startswith("WARNING: warm-up (1 step) is not shorter than the run (1 step):"), said
    said = warmup_warning(dataclasses.replace(cfg.train, steps=4, warmup_steps=1))
    assert said.startswith("WARNING: warm-up (1 step) covers 25% of the run (4 steps)"), said
