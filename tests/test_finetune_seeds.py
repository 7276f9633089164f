"""Seed summaries: median and spread over runs that differ only in the seed."""

import pytest

from finetune.seeds import describe, summarize


def test_describe_median_spread_iqr():
    d = describe([0.80, 0.84, 0.81, 0.90, 0.82])
    assert d["n"] == 5 and d["median"] == 0.82
    assert d["spread"] == pytest.approx(0.10) and d["min"] == 0.80 and d["max"] == 0.90
    assert d["iqr"] == pytest.approx(0.84 - 0.81)
    single = describe([0.5])
    assert single["spread"] == 0.0 and single["stdev"] == 0.0 and single["median"] == 0.5
    with pytest.raises(ValueError):
        describe([])


def test_summarize_per_task_metrics():
    runs = {3: {"exact_match": 50.0, "f1": 60.0}, 1: {"exact_match": 40.0, "f1": 70.0},
            2: {"exact_match": 45.0, "f1": 65.0}}
    s = summarize("korquad", runs)
    assert s["seeds"] == [1, 2, 3]
    assert s["exact_match"]["median"] == 45.0 and s["f1"]["spread"] == 10.0
    assert s["f1"]["per_seed"] == {"1": 70.0, "2": 65.0, "3": 60.0}
    with pytest.raises(ValueError, match="accuracy"):
        summarize("nsmc", {1: {"exact_match": 1.0}})
