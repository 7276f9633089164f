"""A local worker process of the corpus job dies (issue 27): ``kill -9`` on one of the
``--direct_num_workers 2`` processes, as soon as it starts (Beam's runner then waited for it
forever, at 0 records) and while it works (Beam printed its traceback, then a gRPC error). The
command must end within seconds, in one line, exit status 2, leaving no worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from kolectra.corpus import runners, worker_watch
from tests.test_corpus_reliability import _in_session


def _workers(parent: int) -> list[int]:
    return runners._proc_children(parent)  # noqa: SLF001 - the runner's own way of finding them


@pytest.mark.parametrize("when", [0.0, 4.0])  # seconds after the first worker appeared
def test_a_dead_worker_fails_the_job_in_one_line(tmp_path, when):
    src = tmp_path / "many.txt"
    src.write_text("".join(f"{i}번째 리뷰입니다 이 영화 정말 재밌었어요 배우들 연기도 최고 {i}\n" for i in range(60_000)),
                   encoding="utf-8")
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "corpus", "--input", str(src), "--out", str(tmp_path / "a"),
           "--direct_num_workers", "2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (workers := _workers(proc.pid)) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert workers, "no worker process started"
        time.sleep(when)
        os.kill(workers[0], signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=60)  # before the fix: no end (the test's timeout)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.decode()
    assert proc.returncode == 2, text[-3000:]
    assert "Traceback" not in text and "RpcError" not in text, text[-3000:]
    last = text.strip().splitlines()[-1]
    assert last.startswith("kolectra corpus: error: a Beam worker process was killed by SIGKILL"), last
    assert "nothing published" in last and out.decode() == ""
    assert took < 20, took  # about 1-2 s measured; bounded however the runner waits
    assert _in_session(proc.pid) == []  # the other worker was stopped too


def test_exit_codes_are_worded():
    assert worker_watch.exit_status(-9)[0] == "was killed by SIGKILL"
    assert worker_watch.exit_status(3) == ("exited with status 3", "")
    assert worker_watch.worker_exit_code(RuntimeError("Worker subprocess exited with return code -11")) == -11
    assert worker_watch.worker_exit_code(ValueError("Worker subprocess exited with return code 1")) is None
