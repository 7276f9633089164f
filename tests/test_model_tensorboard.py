"""TensorBoard event files of a real pretrain run, read back with TensorBoard's own reader
(``EventAccumulator``): scalars against metrics.jsonl before and after a resume, the file's fixed
name, the progress lines the run prints without a terminal, and a crashed run's files closed."""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from kolectra.model import metrics, train
from tests.model_support import stop_in_step
from tests.test_model_checkpoint import _cfg, inputs  # noqa: F401  (inputs: a module fixture)


def test_every_metric_has_a_tag_of_its_own():
    keys = set(metrics.MEAN_KEYS) | set(metrics.RATIOS) | {"disc_auc", "lr", "tokens_per_s", "mfu"}
    assert keys <= set(metrics.TAGS)
    assert len(set(metrics.TAGS.values())) == len(metrics.TAGS)
    assert metrics.scalars({"step": 3, "loss": 2, "gen_acc": None, "xla_compiles": 2}) == {
        "loss/total": 2.0, "device/xla_compiles": 2.0}


def read_events(path) -> list[tuple[int, float, dict[str, float]]]:
    """(step, wall time, {tag: value}) per step, in step order, as TensorBoard reads the file."""
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    by_step: dict[int, tuple[float, dict]] = {}
    for tag in acc.Tags()["scalars"]:
        for ev in acc.Scalars(tag):
            wall, values = by_step.setdefault(ev.step, (ev.wall_time, {}))
            assert ev.wall_time == wall  # one wall time per line
            values[tag] = ev.value
    return [(step, wall, values) for step, (wall, values) in sorted(by_step.items())]


def _event_files(out):
    return sorted((out / "tensorboard").iterdir())


def _assert_events_match_metrics(path, out):
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    events = read_events(path)
    assert [e[0] for e in events] == [r["step"] for r in rows]
    for (_, _, values), row in zip(events, rows):
        expected = {metrics.TAGS[k]: v for k, v in row.items() if k != "step" and v is not None}
        assert {"loss/total", "loss/discriminator", "disc/auc", "train/lr", "perf/tokens_per_s"} <= set(expected)
        assert values == pytest.approx(expected, rel=1e-6, abs=1e-30)  # stored as float32
    return events


def test_pretrain_events_match_metrics_before_and_after_resume(inputs, tmp_path, monkeypatch, capsys):  # noqa: F811
    examples, tok = inputs
    cfg = _cfg(steps=12, save_every=6, log_every=3)
    # fails inside step 10: lines 3, 6, 9 written, checkpoint at step 6
    resume_step = stop_in_step(monkeypatch, 10, RuntimeError("simulated crash"))
    with pytest.raises(RuntimeError, match="simulated crash"):
        train.pretrain(cfg, examples, tok, tmp_path)
    [crashed] = _event_files(tmp_path)  # never closed: still under SummaryWriter's own name
    before = _assert_events_match_metrics(crashed, tmp_path)
    assert [e[0] for e in before] == [3, 6, 9]
    crashed.write_bytes(crashed.read_bytes()[:-7])  # a record cut by the crash: the rest still serves
    capsys.readouterr()

    resume_step()
    result = train.pretrain(cfg, examples, tok, tmp_path, resume=True)
    assert result.stats["resumed_from_step"] == 6
    assert [p.name for p in _event_files(tmp_path)] == ["events.out.tfevents.kolectra"]  # one file, fixed name
    after = _assert_events_match_metrics(tmp_path / metrics.EVENT_FILE, tmp_path)
    assert [e[0] for e in after] == [3, 6, 9, 12]  # step 9 once, not twice
    assert [e[1] for e in after[:2]] == [e[1] for e in before[:2]]  # the kept steps keep their wall times
    assert min(e[1] for e in after[2:]) > max(e[1] for e in before)

    # Without a terminal: one plain line per logged step, from the resumed position, no carriage returns.
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("[kolectra] pretrain ") and " tok/s" in ln]
    assert [re.match(r"\[kolectra\] pretrain (\d+)/12 \[", ln).group(1) for ln in lines] == ["9", "12"]
    assert all(re.search(r"<\d\d:\d\d, .*step.*\] loss \d+\.\d{4} \(gen", ln) for ln in lines), lines


def _open_under(folder) -> list[str]:
    """The files under ``folder`` this process holds open (Linux: /proc/self/fd)."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("needs /proc/self/fd")
    held = []
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            target = os.readlink(fd)
            if target.startswith(str(folder)):
                held.append(target)
    return held


def test_a_crashed_run_leaves_neither_its_metrics_log_nor_its_event_file_open(inputs, tmp_path, monkeypatch):  # noqa: F811
    """A run ended by an error kept metrics.jsonl (and the event file) open for as long as the error's
    traceback was kept: CI's 'ResourceWarning: unclosed file metrics.jsonl' once it was collected."""
    examples, tok = inputs
    stop_in_step(monkeypatch, 4, RuntimeError("simulated crash"))
    with pytest.raises(RuntimeError, match="simulated crash") as crash:  # (the traceback kept, as a caller may)
        train.pretrain(_cfg(steps=6, save_every=0, log_every=2), examples, tok, tmp_path)
    assert crash.traceback and (tmp_path / "metrics.jsonl").read_text().count("\n") == 1  # step 2's line, flushed
    assert _open_under(tmp_path.resolve()) == []
