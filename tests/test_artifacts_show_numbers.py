"""``kolectra artifacts show``'s stats line rounds a float's binary noise away at display: an NSMC eval stores
``accuracy_pct`` as ``100.0 * accuracy`` (52.800000000000004 for 528 of 1,000 rows), and a ``--seeds`` spread
as 1.000000000000007; the line printed those digits raw. The stored bytes (stats, ``--json``) stay as they are."""

from __future__ import annotations

import json
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request

STATS = {"accuracy": 0.528, "accuracy_pct": 100.0 * 0.528, "spread": 1.000000000000007, "lr": 5e-05,
         "small": 1.25e-07, "test_examples": 1000, "name": "x"}


def test_the_stats_line_shows_floats_without_their_binary_noise_and_json_keeps_the_bytes(tmp_path, capsys):
    store = Store(tmp_path / "root")

    def produce(out: Path) -> StageOutput:
        (out / "metrics.json").write_text(json.dumps(STATS), encoding="utf-8")
        return StageOutput(stats=dict(STATS))

    art = store.build(Request(kind="eval", name="nsmc", stage_version=1, config={}), produce)
    capsys.readouterr()
    assert main(["artifacts", "show", art.id, "--out", str(store.root)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  stats "))
    assert json.loads(line.split(None, 1)[1]) == {**STATS, "accuracy_pct": 52.8, "spread": 1.0}
    assert "52.8," in line and "52.800000000000004" not in line

    assert main(["artifacts", "show", art.id, "--json", "--out", str(store.root)]) == 0
    stored = json.loads(capsys.readouterr().out)["stats"]
    assert stored["accuracy_pct"] == 100.0 * 0.528 != 52.8 and stored["spread"] == 1.000000000000007
