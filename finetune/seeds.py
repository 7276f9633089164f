"""Summaries over fine-tuning runs that differ only in their seed.

Fine-tuning scores vary with the seed (head init, dev split, batch order) by about as much as
the differences between pretrained models one wants to compare (Dodge et al. 2020; the ELECTRA
paper reports medians of 10 runs for that reason).  The CLI's ``--seeds`` runs one eval
artifact per seed and reduces their ``metrics.json`` with :func:`summarize` (pure function, no
I/O): median, spread (max - min), interquartile range, mean and standard deviation per metric.
"""

from __future__ import annotations

import statistics
from typing import Iterable, Mapping

# metrics worth summarising per task (higher is better for all)
TASK_METRICS = {"nsmc": ("accuracy", "accuracy_pct"), "korquad": ("exact_match", "f1")}


def describe(values: Iterable[float]) -> dict:
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("no values to summarise")
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else (xs[0],) * 3
    return {"n": len(xs), "median": statistics.median(xs), "min": xs[0], "max": xs[-1],
            "spread": xs[-1] - xs[0], "iqr": q3 - q1, "mean": statistics.fmean(xs),
            "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0}


def summarize(task: str, runs: Mapping[int, Mapping]) -> dict:
    """``runs`` maps seed -> that run's metrics.json; returns per-metric statistics."""
    if task not in TASK_METRICS:
        raise ValueError(f"unknown task {task!r}")
    seeds = sorted(runs)
    out = {"task": task, "seeds": seeds}
    for name in TASK_METRICS[task]:
        missing = [s for s in seeds if name not in runs[s]]
        if missing:
            raise ValueError(f"metric {name!r} missing from the run(s) with seed {missing}")
        out[name] = describe(runs[s][name] for s in seeds) | {"per_seed": {str(s): runs[s][name] for s in seeds}}
    return out
