"""What a pretraining run keeps in memory does not grow with its steps: the metrics log holds the
last few lines (what a health verdict reads), and a resume reads metrics.jsonl and the TensorBoard
event file a line (an event) at a time. Real runs of the tiny preset and real files; the bounds are
counts and traced bytes, never seconds."""

from __future__ import annotations

import json
import tracemalloc

from torch.utils.tensorboard import SummaryWriter

from kolectra.model import checkpoint, health, metrics, runtime, train
from tests.test_model_checkpoint import _cfg, inputs  # noqa: F401  (inputs: a module fixture)


def test_the_log_keeps_the_last_lines_and_judges_as_on_all(inputs, tmp_path, monkeypatch):  # noqa: F811
    examples, tok = inputs
    seen, calls = [], []
    watch, verdict = train.watch_health, health.verdict

    def watching(run, lines):
        seen.append(len(lines))
        return watch(run, lines)

    def judging(lines, ctx):
        calls.append((list(lines), ctx))
        return verdict(lines, ctx)

    monkeypatch.setattr(train, "watch_health", watching)
    monkeypatch.setattr(health, "verdict", judging)
    result = train.pretrain(_cfg(steps=24, log_every=1, save_every=0, warmup_steps=4), examples, tok, tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 25))  # every line is in the file
    assert len(seen) == 24 and max(seen) == health.LINES_READ  # the old log handed over all 24
    assert max(len(lines) for lines, _ in calls) == health.LINES_READ
    # the final verdict read 3 lines; on every line of the run it is the same
    final_lines, ctx = calls[-1]
    assert final_lines == rows[-health.LINES_READ :]
    assert result.stats["health"] == verdict(rows, ctx)
    assert result.stats["health"]["figures"]["step"] == 24


def test_resume_reads_the_metrics_log_a_line_at_a_time(tmp_path):
    """A resumed run's metrics.jsonl (here 4,000 lines of 2.5 kB, 10 MB) is trimmed and kept without
    holding it: what is traced stays far below the file's size (the old code read it whole, split it
    and parsed every line: several times its size)."""
    path = tmp_path / "metrics.jsonl"
    pad = "x" * 2500
    with path.open("w", encoding="utf-8") as f:
        for step in range(1, 4001):
            f.write(json.dumps({"step": step, "loss": 1.0 / step, "note": pad}) + "\n")
    size = path.stat().st_size
    dev = runtime.resolve("cpu")
    tracemalloc.start()
    try:
        checkpoint.trim_log(path, 3000)
        trimmed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        log = metrics.MetricsLog(path, dev, 5000, resume_step=3000)
        kept = tracemalloc.get_traced_memory()[1]
        log.close()
    finally:
        tracemalloc.stop()
    assert trimmed < size / 20 and kept < size / 20, (trimmed, kept, size)
    assert [r["step"] for r in log.lines] == [2998, 2999, 3000] and log.last["step"] == 3000
    assert sum(1 for _ in metrics.read_lines(path)) == 3000


def _events(folder, steps: int, tags: int = 12) -> None:
    writer = SummaryWriter(log_dir=str(folder))
    for step in range(1, steps + 1):
        for k in range(tags):
            writer.add_scalar(f"t/{k}", float(k), global_step=step, walltime=1000.0 + step)
    writer.close()


def _traced_peak(fn):
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_wall_times_of_a_resumed_run_are_read_an_event_at_a_time(tmp_path):
    """The old file's wall times are read event by event, keeping one per step, not every event of every
    tag (TensorBoard's EventAccumulator held them all: 12 tags cost ~2.7 kB a step, against ~0.6 kB
    now: the step's wall time and the reader's buffer of the file, which it caps at 16 MiB)."""
    _events(tmp_path / "warm", 2)
    metrics.wall_times(tmp_path / "warm")  # the reader's modules imported outside the trace
    _events(tmp_path / "short", 500)
    _events(tmp_path / "long", 1000)
    short, peak_short = _traced_peak(lambda: metrics.wall_times(tmp_path / "short"))
    long, peak_long = _traced_peak(lambda: metrics.wall_times(tmp_path / "long"))
    assert short == {step: 1000.0 + step for step in range(1, 501)}
    assert long == {step: 1000.0 + step for step in range(1, 1001)}
    assert (peak_long - peak_short) / 500 < 1000, (peak_short, peak_long)  # bytes held per step
