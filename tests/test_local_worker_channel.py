"""The local runner's data channel to its worker processes (``corpus/beam_local.py``):

- a bundle's input many times what the channel holds unread reaches its worker and gives the right
  groups (sent while the bundle runs; sent before the bundle started, as Beam's runner orders it,
  it filled the channel's bounded queues and the job hung);
- no group is lost to the runner's timed flush (Beam's ``DATA_BUFFER_TIME_LIMIT_MS``): with the
  channel full, that flush waits for room between taking the stream's bytes and clearing them, and
  what the send thread wrote meanwhile was cleared unsent, whole groups of a shuffle lost without
  an error. Found with the corpus job on 128 review files (16 copies of 8) on 2 worker processes:
  2 of 512 dedup groups lost (2,612 documents and their 39,708 copies), and the job stopped at its
  count check (docs/scale.md). Each write now takes the flush's lock;
- a job stopped while that send waits on a full channel (its worker killed, or Ctrl-C) ends: Beam's
  teardown closes the channel by queueing one more message behind the send's, and it waited for
  ever for the stopped worker to read them;
- an error in the thread that sends a bundle's input (a MemoryError, say) fails the job: the
  worker waited for the rest of its input for ever, and the runner for the bundle."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.corpus import interruption
from tests import local_flush_job, local_send_error_job, local_send_job

REPO = Path(__file__).resolve().parents[1]


def _sizes(job: str, out: Path, hung: str) -> list[str]:
    """Run ``python -m tests.JOB OUT`` (a process of its own) and return its lines by group key."""
    proc = subprocess.Popen([sys.executable, "-m", f"tests.{job}", str(out)], cwd=REPO, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        _, err = proc.communicate(timeout=150)  # about 10 s
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the job and its worker
        proc.communicate()
        raise AssertionError(hung) from None
    assert proc.returncode == 0, err[-2000:]
    return sorted(out.read_text().split("\n")[:-1], key=lambda line: int(line.split()[0]))


def test_a_bundle_larger_than_the_channel_holds_reaches_its_worker(tmp_path):
    sizes = _sizes("local_send_job", tmp_path / "sizes.txt",
                   "the job hung: the runner waits to send a bundle's input the worker cannot take yet")
    assert sizes == [f"{k} {local_send_job.GROUP_BYTES}" for k in range(local_send_job.GROUPS)]


def test_every_group_reaches_a_worker_whose_channel_is_full_while_the_timed_flush_runs(tmp_path):
    sizes = _sizes("local_flush_job", tmp_path / "sizes.txt", "the job hung")
    groups = local_flush_job.GROUPS
    assert len(sizes) == groups, f"{groups - len(sizes)} of {groups} groups lost"
    assert sizes == [f"{k} {local_flush_job.GROUP_BYTES}" for k in range(groups)]


@pytest.mark.parametrize("stop", ["kill -9", "Ctrl-C"])
def test_a_job_stopped_while_its_send_waits_on_a_full_channel_ends(tmp_path, stop):
    out = tmp_path / "sizes.txt"
    proc = subprocess.Popen([sys.executable, "-m", "tests.local_stop_job", str(out)], cwd=REPO, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 150
        while not Path(f"{out}.started").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = interruption._proc_children(proc.pid)  # noqa: SLF001 - the runner's own way of finding them
        assert workers and proc.poll() is None, "the worker never read a group"
        if stop == "kill -9":
            os.kill(workers[0], signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=45)  # 1-2 s; before: no end (Beam's teardown waited for the channel)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the job did not end after {stop} during its send") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    last = err.strip().splitlines()[-1]
    assert proc.returncode != 0
    assert last.startswith("KeyboardInterrupt" if stop == "Ctrl-C" else "kolectra.corpus.worker_watch.WorkerDied"), last
    assert not out.exists()  # nothing written: the job stopped in the middle of its one stage


def test_an_error_in_the_send_to_a_worker_fails_the_job(tmp_path):
    out = tmp_path / "sizes.txt"
    proc = subprocess.Popen([sys.executable, "-m", "tests.local_send_error_job", str(out)], cwd=REPO,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        _, err = proc.communicate(timeout=120)  # about 10 s; before: no end
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("the job hung: its worker waits for the rest of the bundle's input") from None
    assert proc.returncode != 0
    assert err.strip().splitlines()[-1] == "TypeError: object of type 'NoneType' has no len()", err[-2000:]
    assert not out.exists()
    assert local_send_error_job.SENT < local_send_error_job.GROUPS
