"""NSMC's ``accuracy_pct`` was stored as ``100.0 * accuracy``: 52.800000000000004 for 528 of 1,000 rows in
metrics.json and the manifest's stats, and a ``--seeds`` summary's spread of 81.2 and 82.53 as
1.3299999999999983. Percentages are rounded to 4 decimals now (finetune/report.py percent); the fraction
``accuracy`` and the keys are as they were."""

from __future__ import annotations

import json
from types import SimpleNamespace

from kolectra.finetune import nsmc, seeds
from kolectra.finetune.report import percent


def test_nsmc_accuracy_pct_is_stored_without_binary_noise():
    fit = SimpleNamespace(final=SimpleNamespace(scores={"accuracy": 528 / 1000}), epoch=2,
                          dev=SimpleNamespace(scores={"accuracy": 0.6}))
    data = SimpleNamespace(train=[0] * 3, dev=[0] * 2, test=[0] * 1000)
    metrics = nsmc.Nsmc().metrics(data, {}, fit)
    assert metrics["accuracy"] == 0.528 and metrics["accuracy_pct"] == 52.8
    assert json.dumps(metrics["accuracy_pct"]) == "52.8"
    assert percent(2 / 3) == 66.6667 and percent(45_061 / 50_000) == 90.122  # a 50,000-row test's 0.002 % kept


def test_a_seeds_summary_of_accuracy_pct_is_rounded_as_a_run_is():
    runs = {1: {"accuracy": 0.812, "accuracy_pct": 81.2}, 2: {"accuracy": 0.8253, "accuracy_pct": 82.53}}
    summary = seeds.summarize("nsmc", runs)
    pct = summary["accuracy_pct"]
    assert (pct["spread"], pct["median"], pct["mean"], pct["iqr"]) == (1.33, 81.865, 81.865, 0.665), pct
    assert pct["per_seed"] == {"1": 81.2, "2": 82.53} and pct["n"] == 2
    assert summary["accuracy"]["spread"] == 0.8253 - 0.812  # the fraction's figures are as they were
