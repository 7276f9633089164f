"""``kolectra report`` on a long run: the training curves are read from metrics.jsonl a line at a
time and each series thinned as it comes (core.plot.Thinned: first, lowest, highest and last point
of each of at most COLUMNS runs), so the report's memory and points do not grow with the lines; a
run of up to COLUMNS lines is drawn from every point, as before."""

from __future__ import annotations

import json
import math
import random
import tracemalloc
from pathlib import Path

from kolectra.core import plot
from kolectra.core.jsonl import read_lines
from kolectra.core.stage import StageOutput
from kolectra.pipeline import report
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request


def rows(n: int, spike: int | None = None) -> list[dict]:
    rnd = random.Random(n)
    return [
        {
            "step": (i + 1) * 10,
            "loss": 30 * math.exp(-i / n) + rnd.random() + (50 if i == spike else 0),
            "gen_loss": 3 + rnd.random(),
            "disc_auc": 0.9,
            "lr": 1e-4,
            "tokens_per_s": 1000 + rnd.random(),
            "gen_acc": 0.3,
            "mlm_acc": None,
        }
        for i in range(n)
    ]


def test_a_thinned_series_keeps_every_point_up_to_its_columns_then_the_envelope():
    pts = [(float(i), math.sin(i / 7) + (9 if i == 6_123 else 0) - (9 if i == 8_000 else 0)) for i in range(10_000)]
    short = plot.Thinned(16)
    for x, y in pts[:16]:
        short.add(x, y)
    assert short.points() == pts[:16]
    thinned = plot.Thinned(16)
    for x, y in pts:
        thinned.add(x, y)
    kept = thinned.points()
    assert len(thinned.runs) <= 16 and len(kept) <= 4 * 16
    assert kept[0] == pts[0] and kept[-1] == pts[-1] and kept == sorted(kept)
    assert max(pts, key=lambda p: p[1]) in kept and min(pts, key=lambda p: p[1]) in kept  # both spikes
    again = plot.Thinned(16)
    for x, y in [*pts[:5], (5.0, None), (5.5, float("nan")), *pts[5:]]:  # left out, as finite() leaves them
        again.add(x, y)
    assert again.points() == kept


def test_the_report_draws_a_short_run_from_every_point_and_a_long_one_from_a_bounded_few():
    short = rows(report.plot.COLUMNS)
    panels = {p.title: p for p in report.training_panels(short)}
    assert panels["total loss (generator + disc_weight x discriminator)"].series["total"] == [
        (r["step"], r["loss"]) for r in short
    ]
    assert "MLM accuracy" not in panels["generator"].series  # None values are no series
    long = rows(6 * plot.COLUMNS, spike=4_000)
    panels = report.training_panels(long)
    assert all(len(pts) <= 4 * plot.COLUMNS for p in panels for pts in p.series.values())
    assert (4_001 * 10, long[4_000]["loss"]) in panels[0].series["total"]  # the spike is drawn


def _checkpoint(store: Store, n: int):
    def produce(out: Path) -> StageOutput:
        with (out / "metrics.jsonl").open("w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows(n))
        return StageOutput(stats={})

    return store.build(Request(kind="checkpoint", name=f"c{n}", stage_version=1, config={"n": n}), produce)


def test_the_reports_memory_does_not_grow_with_the_lines(tmp_path):
    """The curves of 2,000 and 6,000 lines, read from metrics.jsonl and thinned: the same traced peak
    within 0.5 MB (the old code held every line parsed and every point: 5.8 MB more at 6,000, drawing
    included); the section then draws them and tables the last line."""
    store = Store(tmp_path / "root")
    peaks = {}
    for n in (2_000, 6_000):
        art = _checkpoint(store, n)
        tracemalloc.start()
        panels = report.training_panels(read_lines(art.path / "metrics.jsonl"))
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert panels[0].series["total"][-1][0] == n * 10
    assert peaks[6_000] - peaks[2_000] < 500_000, peaks
    out = report.checkpoint_section(art, tmp_path)
    assert f"| step | {6_000 * 10:,} |" in "\n".join(out) and (tmp_path / f"{art.path.name}-training.png").is_file()
