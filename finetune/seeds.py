"""Summaries over fine-tuning runs that differ only in their seed.

Fine-tuning scores vary with the seed (head init, dev split, batch order) by about as much as
the differences between pretrained models one wants to compare (Dodge et al. 2020; the ELECTRA
paper reports medians of 10 runs for that reason).  The CLI's ``--seeds`` runs one eval
artifact per seed and reduces their ``metrics.json`` with :func:`summarize` (pure function, no
I/O): median, spread (max - min), interquartile range, mean and standard deviation per metric.
:func:`run_seeds` / :func:`write_summary` add the loop and ``seeds.json`` (with ``runs``, each seed's
eval artifact, where its predictions are: the summary holds figures only); :func:`seeds_table`
is the text table; :func:`parse_seeds` reads ``--seeds 1,2,3`` / ``1-5``.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from kolectra.core.errors import UserInputError
from kolectra.core.stage import progress
from kolectra.finetune.tasks import TASKS

# the --seeds summary's (pipeline/stages.py finetune_seeds); bump when its bytes change; history: docs/artifacts.md
STAGE_VERSION = 4

# metrics worth summarising per task (higher is better for all)
TASK_METRICS = {name: task.metrics for name, task in TASKS.items()}
# per task, the metrics held in percent (those not among its fractions: NSMC's accuracy_pct, KorQuAD's exact_match
# and f1), rounded as a run's are (finetune/report.py percent): a summary's spread of 81.2 and 82.53 was
# 1.3299999999999983
PERCENTS = {name: tuple(m for m in task.metrics if m not in task.fractions) for name, task in TASKS.items()}
HEADERS = {"accuracy_pct": "accuracy %", "exact_match": "EM", "f1": "F1", "macro_f1": "macro-F1",
           "spearman": "Spearman", "pearson": "Pearson"}


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
        if name in PERCENTS[task]:
            out[name] = _rounded(out[name])
    return out


def _rounded(value):
    """``value``'s floats (in dicts too) at :data:`finetune.report.PERCENT_DECIMALS` decimals."""
    from kolectra.finetune.report import PERCENT_DECIMALS  # noqa: PLC0415 - as seeds_table imports it

    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return round(value, PERCENT_DECIMALS) if isinstance(value, float) else value


def seeds_table(summary: Mapping) -> str:
    """Per-seed scores, then median / spread / IQR / mean +- sd: the table the CLI prints."""
    from kolectra.finetune.report import format_table  # noqa: PLC0415

    names = TASK_METRICS[summary["task"]]
    fractions = set(TASKS[summary["task"]].fractions)  # shown as percent, like the other columns
    scale = {n: 100.0 for n in fractions}
    cols = [n for n in names if not (n == "accuracy" and "accuracy_pct" in names)]
    rows = [[f"seed {s}"] + [summary[n]["per_seed"][str(s)] * scale.get(n, 1.0) for n in cols]
            for s in summary["seeds"]]
    for stat in ("median", "spread", "iqr", "mean", "stdev"):
        rows.append([stat] + [summary[n][stat] * scale.get(n, 1.0) for n in cols])
    header = ["run"] + [HEADERS.get(n, n) + (" %" if n in fractions else "") for n in cols]
    n = len(summary["seeds"])
    return f"{summary['task']} over {n} seed{'s' if n != 1 else ''}\n" + format_table(header, rows)


def seed_warnings(warnings: Mapping[int, Sequence[str]]) -> list[str]:
    """Each distinct warning the runs recorded (seed -> its manifest's ``stats.warnings``), once, with how many seeds
    had it: ``in 2 of 3 seeds: korquad: 1 training question(s) ...``, in the order the seeds first say them. For the
    summary's own ``stats.warnings``, which ``artifacts show`` lists (before 2026-12-02 the summary recorded none)."""
    order: dict[str, int] = {}
    for seed in sorted(warnings):
        for w in dict.fromkeys(warnings[seed]):  # a line twice in one run counts one seed
            order[w] = order.get(w, 0) + 1
    return [f"in {n} of {len(warnings)} seeds: {w}" for w, n in order.items()]


def write_summary(task: str, runs: Mapping[int, Mapping], out_path: Path,
                  artifacts: Mapping[int, str] | None = None) -> tuple[dict, str]:
    """:func:`summarize` written to ``out_path`` (``seeds.json``); returns it and its table. ``artifacts``:
    seed -> its run's eval artifact (``eval/NAME-ID``), recorded as ``runs``: a KorQuAD summary holds no
    ``predictions.json`` (a median has none), and the official evaluate script reads each run's."""
    summary = summarize(task, runs)
    if artifacts is not None:
        summary["runs"] = {str(s): artifacts[s] for s in summary["seeds"]}
    Path(out_path).write_text(json.dumps(summary, ensure_ascii=False, indent=2, sort_keys=True) + "\n",
                              encoding="utf-8")
    return summary, seeds_table(summary)


def run_seeds(task: str, seeds: Sequence[int], run_one: Callable[[int], Mapping],
              out_path: Path | None = None) -> tuple[dict, str]:
    """Call ``run_one(seed)`` (one fine-tuning run -> its metrics.json dict) for every seed, then
    summarise.  The CLI passes a ``run_one`` that builds one eval artifact per seed."""
    if not seeds or len(set(seeds)) != len(seeds):
        raise UserInputError(f"seeds must be distinct and non-empty, got {list(seeds)}")
    runs = {}
    for seed in seeds:
        progress(f"{task}: seed {seed} ({len(runs) + 1}/{len(seeds)})")
        runs[int(seed)] = run_one(int(seed))
    if out_path is not None:
        return write_summary(task, runs, out_path)
    summary = summarize(task, runs)
    return summary, seeds_table(summary)


# One fine-tuning run per seed, each a few minutes to hours: the ELECTRA paper takes medians of 10,
# and 100 already bounds the spread estimate well; a range typed with extra digits would otherwise
# be expanded (100 M seeds: gigabytes of list) before the first run starts.
MAX_SEEDS = 100


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` or ``"1-5"`` (or a mix) -> distinct non-negative seeds in the given order,
    at most :data:`MAX_SEEDS`."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise UserInputError(f"--seeds: cannot read {part!r} (expected e.g. 1,2,3 or 1-5)")
        if hi and int(hi) < int(lo):  # else an empty range, reported as "need distinct seeds"
            raise UserInputError(f"--seeds: the range {part!r} runs backwards (write {hi}-{lo})")
        if len(out) + int(hi or lo) - int(lo) + 1 > MAX_SEEDS:  # counted before the range is expanded
            raise UserInputError(f"--seeds: {text!r} asks for more than {MAX_SEEDS} seeds (one fine-tuning run each; "
                             "the ELECTRA paper reports medians of 10)")
        out.extend(range(int(lo), int(hi or lo) + 1))
    if not out or len(set(out)) != len(out):
        raise UserInputError(f"--seeds: need distinct seeds, got {text!r}")
    return out
