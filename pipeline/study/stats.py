"""The study's statistics: paired differences between arms with hierarchical bootstrap intervals.

A study point's score varies with the pretraining seed (initialisation, data order, masking),
the fine-tuning seed (head initialisation, training rows) and the particular held-out rows it is
scored on. Comparing two arms at one budget, the runs are paired: pretraining seed s of arm A
against seed s of arm B, fine-tuning seed f against f, on the same evaluation rows. The interval
resamples all three levels (Davison & Hinkley 1997, section 3.8; the "hierarchical bootstrap" of
Saravanan et al. 2020): pretraining seeds with replacement, fine-tuning seeds within each, and the
evaluation rows (the same rows for both arms, so the example-level noise they share cancels).
With only two or three seeds per level the seed levels contribute a coarse spread; the rows add
the test-set noise that a single split hides.

That coarse spread is too narrow: a bootstrap over S clusters estimates their variance (S-1)/S too
low and has no t-quantile, so with 2 pretraining seeds two equal arms were called different far
more often than the 5 % meant (simulated: docs/studies.md). A second interval
therefore judges the pretraining seeds alone: Student's t over the S paired per-seed differences
(S-1 degrees of freedom), exact for normal seed effects. A winner, and an arm's standing against
the floor, needs both intervals to exclude zero; with one pretraining seed only the bootstrap
exists, and it then holds no pretraining-seed noise.

numpy and scipy's t quantile: ``scores`` are ``[S, F]`` arrays (pretraining seed x fine-tuning seed); ``correct``,
when per-row predictions exist, are ``[S, F, N]`` 0/1 arrays over the N evaluation rows, and the
score of a replicate is the weighted mean of its rows.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Runs:
    """One arm's results at one budget for one readout."""

    scores: np.ndarray  # [S, F]
    correct: np.ndarray | None = None  # [S, F, N], 0/1, same rows and order in every arm


def replicates(a: Runs, b: Runs | None, n_boot: int, seed: int) -> np.ndarray:
    """``n_boot`` bootstrap replicates of mean(a) - mean(b) (or of mean(a) when b is None)."""
    rng = np.random.default_rng(seed)
    S, F = a.scores.shape
    use_rows = a.correct is not None and (b is None or b.correct is not None)
    out = np.empty(n_boot)
    n_rows = a.correct.shape[2] if use_rows else 0
    for i in range(n_boot):
        s = rng.integers(0, S, S)
        f = rng.integers(0, F, (S, F))
        if use_rows:
            w = rng.multinomial(n_rows, np.full(n_rows, 1.0 / n_rows)) / n_rows  # resampled rows
            diff = a.correct[s[:, None], f] @ w
            if b is not None:
                diff = diff - b.correct[s[:, None], f] @ w
        else:
            diff = a.scores[s[:, None], f] - (b.scores[s[:, None], f] if b is not None else 0.0)
        out[i] = diff.mean()
    return out


def compare(a: Runs, b: Runs | None, n_boot: int = 2000, seed: int = 0) -> dict:
    """``diff`` (mean of a minus mean of b over all paired runs) and its 95 % percentile interval."""
    if b is not None and a.scores.shape != b.scores.shape:
        # unequal seed grids: pair what both have
        S, F = min(a.scores.shape[0], b.scores.shape[0]), min(a.scores.shape[1], b.scores.shape[1])
        a, b = _crop(a, S, F), _crop(b, S, F)
    diff = float(a.scores.mean() - (b.scores.mean() if b is not None else 0.0))
    reps = replicates(a, b, n_boot, seed)
    lo, hi = np.percentile(reps, [2.5, 97.5])
    return {"diff": diff, "ci95": [float(lo), float(hi)], "seed_t95": seed_t_interval(a, b),
            "runs": int(a.scores.size),
            "rows_resampled": a.correct is not None and (b is None or b.correct is not None)}


def seed_t_interval(a: Runs, b: Runs | None) -> list[float] | None:
    """95 % Student-t interval of the mean paired difference over pretraining seeds (each seed's
    runs averaged first); None with one seed."""
    per_seed = a.scores.mean(axis=1) - (b.scores.mean(axis=1) if b is not None else 0.0)
    S = len(per_seed)
    if S < 2:
        return None
    import scipy.stats  # noqa: PLC0415 - here: `kolectra report` reads a verdict's words from this module

    half = float(scipy.stats.t.ppf(0.975, S - 1) * per_seed.std(ddof=1) / np.sqrt(S))
    return [float(per_seed.mean()) - half, float(per_seed.mean()) + half]


def _crop(r: Runs, S: int, F: int) -> Runs:
    return Runs(r.scores[:S, :F], None if r.correct is None else r.correct[:S, :F])


def excludes_zero(ci95: list[float]) -> bool:
    return ci95[0] > 0 or ci95[1] < 0


def side(c: dict) -> int:
    """+1 or -1 where both of a comparison's intervals (:func:`compare`) lie on that side of zero, else 0."""
    intervals = [c["ci95"]] + ([c["seed_t95"]] if c.get("seed_t95") is not None else [])
    if all(lo > 0 for lo, _ in intervals):
        return 1
    if all(hi < 0 for _, hi in intervals):
        return -1
    return 0


# an arm's standing against the untrained floor (:func:`side` of its comparison with it), in words
FLOOR_WORDS = {1: "is above the random-init floor", -1: "is below the random-init floor",
               0: "is not separable from the random-init floor"}


def floor_verdict(arm: str, vs_floor: dict) -> str:
    """Where ``arm`` stands against the floor, by both intervals of ``vs_floor``: "electra is not separable from
    the random-init floor". A study of one arm has no pair to name a winner of, and its standing against the
    floor was the interval alone (a user read "+1.2 [-0.8, +3.1]" as a gain)."""
    return f"{arm} {FLOOR_WORDS[side(vs_floor)]}"


def verdict(a: str, b: str, cmp: dict, a_vs_floor: dict, b_vs_floor: dict) -> str:
    """The report's sentence for one comparison. A winner is named only when the interval of the
    difference excludes zero and both arms are above the random-init floor (their own intervals
    against the floor exclude zero on the positive side). An arm clearly *below* the floor is said
    so: early pretraining can move features away from what a readout uses, and that is a finding,
    not a readout that cannot see."""
    if side(a_vs_floor) != 1 or side(b_vs_floor) != 1:
        return f"no winner named: {floor_verdict(a, a_vs_floor)}, {floor_verdict(b, b_vs_floor)}"
    if not excludes_zero(cmp["ci95"]):
        return "no winner: the 95 % interval of the difference includes zero"
    if side(cmp) == 0:
        lo, hi = cmp["seed_t95"]
        return (f"no winner: the pretraining seeds disagree (their t-interval, [{100 * lo:+.2f}, {100 * hi:+.2f}] "
                "points, includes zero)")
    winner, loser = (a, b) if cmp["diff"] > 0 else (b, a)
    return f"{winner} ahead of {loser}"
