"""The local runner's stream to a worker process flushes on a timer too (Beam's
``DATA_BUFFER_TIME_LIMIT_MS``): with the channel full, that flush waits for room between taking
the stream's bytes and clearing them, and what ``corpus/beam_local.py``'s send thread wrote
meanwhile was dropped, whole groups of a shuffle lost without an error. Found with the corpus job
on 128 review files (16 copies of 8) on 2 worker processes: 2 of 512 dedup groups lost (2,612
documents and their 39,708 copies), and the job stopped at its count check (docs/scale.md). Each
write now takes the flush's lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests import local_flush_job

REPO = Path(__file__).resolve().parents[1]


def test_every_group_reaches_a_worker_whose_channel_is_full_while_the_timed_flush_runs(tmp_path):
    out = tmp_path / "sizes.txt"
    proc = subprocess.Popen([sys.executable, "-m", "tests.local_flush_job", str(out)], cwd=REPO, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        _, err = proc.communicate(timeout=150)  # about 7 s
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the job and its worker
        proc.communicate()
        raise AssertionError("the job hung") from None
    assert proc.returncode == 0, err[-2000:]
    sizes = sorted(out.read_text().split("\n")[:-1], key=lambda line: int(line.split()[0]))
    assert len(sizes) == local_flush_job.GROUPS, f"{local_flush_job.GROUPS - len(sizes)} of {local_flush_job.GROUPS} groups lost"
    assert sizes == [f"{k} {local_flush_job.GROUP_BYTES}" for k in range(local_flush_job.GROUPS)]
