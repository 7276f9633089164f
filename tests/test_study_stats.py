"""The study's statistics: paired bootstrap intervals and the verdict's rules (pure numpy, no training)."""

import numpy as np

from kolectra.pipeline.study_stats import Runs, compare, verdict


def _runs(mean: float, rows: int = 400, seed: int = 0) -> Runs:
    rng = np.random.default_rng(seed)
    correct = (rng.random((2, 3, rows)) < mean).astype(np.float64)
    return Runs(correct.mean(-1), correct)


def test_interval_excludes_zero_only_for_a_real_gap():
    floor, better, same = _runs(0.60, seed=1), _runs(0.75, seed=2), _runs(0.60, seed=3)
    gap = compare(better, floor, 500, 0)
    assert gap["ci95"][0] > 0 and abs(gap["diff"] - 0.15) < 0.03 and gap["rows_resampled"]
    level = compare(same, floor, 500, 0)
    assert level["ci95"][0] < 0 < level["ci95"][1]


def test_verdict_names_a_winner_only_above_the_floor_and_says_where_each_arm_stands():
    above, below, level = {"ci95": [0.01, 0.05]}, {"ci95": [-0.06, -0.02]}, {"ci95": [-0.01, 0.02]}
    clear = {"diff": 0.03, "ci95": [0.01, 0.05]}
    assert verdict("electra", "mlm", clear, above, above) == "electra ahead of mlm"
    assert verdict("electra", "mlm", {"diff": -0.03, "ci95": [-0.05, -0.01]}, above, above) == "mlm ahead of electra"
    assert verdict("electra", "mlm", {"diff": 0.0, "ci95": [-0.01, 0.01]}, above, above).startswith("no winner")
    said = verdict("electra", "mlm", {"diff": -0.06, "ci95": [-0.08, -0.04]}, below, above)
    assert said == ("no winner named: electra is below the random-init floor, "
                    "mlm is above the random-init floor")
    assert "not separable" in verdict("electra", "mlm", clear, level, above)
