"""The score table's columns are the evals' names: a ``--seeds`` summary's default name (``nsmc-seeds``) is its
task's column, as its runs' (``nsmc``), but a name the user gave is kept whole. Before, every name ending in
``-seeds`` lost it: ``--name rev0-seeds`` was the column ``rev0`` (an audit's table), and beside a run named
``rev0`` of the same model the report refused, saying both scored on ``rev0`` and to tell them apart with
--name, which they were."""

from __future__ import annotations

import json
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline.scores import score_table
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request


def _eval(store: Store, name: str, config: dict, metrics: dict):
    def produce(out: Path) -> StageOutput:
        (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
        return StageOutput(stats={})

    return store.build(Request(kind="eval", name=name, stage_version=1, config=config), produce)


def test_a_name_given_to_a_seeds_summary_is_its_column_and_the_default_name_is_the_tasks(tmp_path):
    store = Store(tmp_path / "root")
    run = _eval(store, "rev0", {"task": "nsmc", "seed": 1}, {"task": "nsmc", "accuracy": 0.5, "test_examples": 300})
    named = _eval(store, "rev0-seeds", {"task": "nsmc", "seeds": [1, 2]},
                  {"task": "nsmc", "seeds": [1, 2], "statistic": "median over seeds", "accuracy": 0.52})
    lines, _ = score_table(store, [run, named])
    assert lines[0] == "| model | rev0 (acc) | rev0-seeds (acc) |", lines

    default = _eval(store, "nsmc-seeds", {"task": "nsmc", "seeds": [1, 2], "k": 2},
                    {"task": "nsmc", "seeds": [1, 2], "statistic": "median over seeds", "accuracy": 0.51})
    lines, _ = score_table(store, [default])
    assert lines[0] == "| model | nsmc (acc) |", lines
