"""Rough edges a user meets: Ctrl-C pressed again while a corpus job's stop hangs, an artifact ref on a
store root that finds the wrong kind or two ids, and a ``text_field`` that no JSONL record or Parquet
column has."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kolectra.corpus import runners

REPO = Path(__file__).resolve().parents[1]


# ---- Ctrl-C again while the job is stopping ---------------------------------------------------
def _in_session(sid: int) -> list[int]:
    """Live processes of session ``sid`` (the command started its own), from /proc."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append(int(entry))
    return found


def _lines(stream, into: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        into.put(line.rstrip("\n"))
    into.put(None)


def _wait_for(lines: queue.Queue, seen: list[str], text: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if line is None:
            return False
        seen.append(line)
        if text in line:
            return True
    return False


def test_ctrl_c_again_while_a_stop_hangs_says_so_then_quits(tmp_path):
    """The real corpus command and Beam job, whose one worker process does not end when stopped
    (``tests/stubborn_worker.py``: it suspends itself), so Beam's teardown waits for ever. The first
    Ctrl-C stops the job, the second says a third quits, the third quits: status 130, no worker
    left. Before, every Ctrl-C after the first was ignored and the command could not be quit."""
    src = tmp_path / "many.txt"
    src.write_text("".join(f"{i}번째 리뷰입니다 이 영화 정말 재밌었어요 배우들 연기도 최고 {i}\n" for i in range(20_000)),
                   encoding="utf-8")
    ready = tmp_path / "worker-ready"
    code = ("import sys; from kolectra.corpus import runners; runners.WORKER_MODULE = 'tests.stubborn_worker'; "
            "from kolectra.pipeline.cli import main; sys.exit(main(sys.argv[1:]))")
    cmd = [sys.executable, "-c", code, "corpus", "--input", str(src), "--out", str(tmp_path / "a"),
           "--direct_num_workers=1", "--direct_running_mode=multi_processing"]
    proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO),
                                            "KOLECTRA_TEST_WORKER_READY": str(ready)})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"the worker did not start: {seen}"
        time.sleep(1)  # the job is running
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group (workers ignore it)
        time.sleep(1.5)
        assert proc.poll() is None, "the stop did not hang: the test proves nothing"
        assert not any(runners.STOPPING_NOTICE in line for line in seen)  # the first Ctrl-C alone says nothing
        os.killpg(proc.pid, signal.SIGINT)
        assert _wait_for(lines, seen, runners.STOPPING_NOTICE, 20), seen
        time.sleep(0.5)
        assert proc.poll() is None, seen + list(lines.queue)  # the notice alone quits nothing
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=20) == 130
    finally:
        with_cleanup = _in_session(proc.pid)
        for pid in with_cleanup:  # a test that failed: nothing left behind, the suspended worker included
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    assert with_cleanup == [], f"left running: {with_cleanup}"
    assert "Traceback" not in "\n".join(seen)
    assert seen[-2:] == [f"[kolectra] {runners.STOPPING_NOTICE}", runners.QUIT_LINE], seen
    assert proc.stdout.read() == ""


_ONE_THEN_ANOTHER = """
import os, signal, sys, time
from kolectra.corpus import runners
raised = 0
with runners.Interruption() as ctrl_c:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        raised += 1
    time.sleep(5 * runners.STOP_SWEEP_S)  # SIGINTs the relay sent meanwhile come back to it, as its own
    print("after one:", raised, ctrl_c.happened, flush=True)
    sys.stderr.write("-- second\\n")
    os.kill(os.getpid(), signal.SIGINT)  # raises nothing now: counted by the relay's thread
    time.sleep(1)
print("after two:", raised, flush=True)
"""


def test_one_ctrl_c_raises_once_and_says_nothing_more():
    """One SIGINT is one KeyboardInterrupt and no notice, however many times the relay woke the main
    thread for it; a second one (the job stopping) raises nothing and is the notice."""
    proc = subprocess.run([sys.executable, "-c", _ONE_THEN_ANOTHER], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.splitlines() == ["after one: 1 True", "after two: 1"], proc.stdout + proc.stderr[-2000:]
    assert proc.stderr.splitlines() == ["-- second", f"[kolectra] {runners.STOPPING_NOTICE}"], proc.stderr[-2000:]
