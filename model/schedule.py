"""The learning-rate schedule's factor, and what it reaches in a run: torch-free, so the settings
(:mod:`model.config`), the optimizer (:mod:`model.optim`) and the health verdict (:mod:`model.health`)
share one formula. The schedules are described in :mod:`model.optim`."""

from __future__ import annotations

import math


def lr_scale(step: int, warmup: int, total: int, schedule: str = "warmup_then_decay") -> float:
    """The schedule's factor for optimizer update ``step`` (0-based) of ``total``."""
    if schedule == "warmup_times_decay":  # the reference: both factors at once
        return min(1.0, (step + 1) / warmup if warmup else 1.0) * max(0.0, 1.0 - step / max(1, total))
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def peak_scale(warmup: int, total: int, schedule: str = "warmup_then_decay") -> float:
    """The largest factor of the run's ``total`` updates: 1 where warm-up ends inside the run (or with
    it); below 1 where it is longer. Each piece of either schedule is monotone or a concave quadratic
    (warmup_times_decay before the warm-up's end: (t + 1)(T - t) / (W T), largest at t = (T - 1) / 2),
    so the largest factor is at one of these steps."""
    if total < 1:
        return 0.0
    steps = {0, total - 1, min(warmup, total) - 1, (total - 1) // 2, total // 2}
    return max(lr_scale(s, warmup, total, schedule) for s in steps if 0 <= s < total)


def warmup_end(warmup: int, total: int, schedule: str = "warmup_then_decay") -> str:
    """Where the learning rate stands for a warm-up not shorter than the run, in words."""
    share = peak_scale(warmup, total, schedule)
    if share >= 1.0:
        return "its last step is at the peak learning rate, before any decay"
    return f"its learning rate never reaches train.lr (at most {percent_below_one(share)} of it)"


def percent_below_one(share: float) -> str:
    """``share`` (0 < share < 1) in percent, two significant digits, never written as 100 %: 199 steps
    of a 200-step warm-up reach 99.5 % of the rate, which ``.2g`` printed as "1e+02%"."""
    pct = 100 * share
    if pct >= 99.5:  # two digits would round it to 100: to the hundredth above it, at most 99.99
        return f"{min(math.ceil(pct * 100) / 100, 99.99):g}%"
    return f"{pct:.2g}%"
