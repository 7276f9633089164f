"""The local runner's data channel to its worker processes: a bundle's input many times what the
channel holds unread reaches its worker and gives the right groups (``corpus/beam_local.py``
sends it while the bundle runs; sent before the bundle started, as Beam's runner orders it, it
filled the channel's bounded queues and the job hung)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests import local_send_job

REPO = Path(__file__).resolve().parents[1]


def test_a_bundle_larger_than_the_channel_holds_reaches_its_worker(tmp_path):
    out = tmp_path / "sizes.txt"
    proc = subprocess.Popen([sys.executable, "-m", "tests.local_send_job", str(out)], cwd=REPO, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        _, err = proc.communicate(timeout=150)  # about 10 s; sent before the bundle started, it hung
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the job and its worker
        proc.communicate()
        raise AssertionError("the job hung: the runner waits to send a bundle's input the worker cannot take yet") from None
    assert proc.returncode == 0, err[-2000:]
    sizes = sorted(out.read_text().split("\n")[:-1], key=lambda line: int(line.split()[0]))
    assert sizes == [f"{k} {local_send_job.GROUP_BYTES}" for k in range(local_send_job.GROUPS)]
