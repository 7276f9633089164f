"""A stop (a real Ctrl-C) while a resumed run's metrics log opens leaves none of its files open.

On resume the log rewrites TensorBoard's event file from the lines kept (a long run's thousands of lines:
seconds), after opening metrics.jsonl for its new lines. A Ctrl-C then (or a full disk in the rewrite) left
metrics.jsonl open and the event writer's thread running for as long as the error was kept (in-process: a
notebook's last traceback, a caller that catches it): the log never reached the trainer, whose clean-up
(MetricsLog.abandon) closes them. Real files, a real SIGINT."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from kolectra.model import metrics, runtime


def _open_files() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return found


def _event_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if type(t).__name__ == "_AsyncWriterThread" and t.is_alive()]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads this process's open files in /proc")
def test_a_ctrl_c_as_a_resume_rewrites_the_event_file_leaves_no_file_open(tmp_path):
    path = tmp_path / "metrics.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for step in range(1, 20001):
            f.write(json.dumps({"step": step, "loss": 1.0 / step, "disc_acc": 0.5, "lr": 1e-4}) + "\n")
    events, threads_before = tmp_path / metrics.EVENT_DIR, len(_event_threads())

    def stop_once_rewriting():
        deadline = time.monotonic() + 60
        while not any(events.glob(metrics.EVENT_GLOB)) and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=stop_once_rewriting, daemon=True)
    watcher.start()
    with pytest.raises(KeyboardInterrupt) as stopped:
        metrics.MetricsLog(path, runtime.resolve("cpu"), 30000, resume_step=20000)
        time.sleep(30)  # (the rewrite ended before the stop: the test fails below)
    watcher.join()
    assert "restart_events" in "".join(str(f) for f in stopped.traceback), "the stop landed outside the rewrite"
    assert str(path) not in _open_files()  # before: open while the error is held
    assert len(_event_threads()) == threads_before  # before: the event writer's thread ran on
