"""SIGHUP and signals the caller ignores, with real processes and real signals (core/stops.py).

A dropped SSH session (the terminal's hangup) killed ``kolectra pretrain`` outright: no checkpoint of
its step, no line; it now stops as SIGTERM does, with status 129. Under ``nohup`` (SIGHUP ignored by
the caller) it runs on. A SIGTERM or SIGINT the caller ignored (``trap '' TERM``; a script's ``&``)
stayed ignored only while the command started (about 0.5 s), then its handlers took over; it now
stays ignored, and the corpus job's workers (which inherit it) are still stopped by a Ctrl-C."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.model import checkpoint
from tests.test_corpus_reliability import _in_session
from tests.test_faults_corpus_workers import _workers, corpus_on_two_workers
from tests.test_faults_interrupts import REPO
from tests.test_faults_pretrain import SETS, _copy, chain  # noqa: F401  (the chain fixture)
from tests.test_faults_sigterm import _ended, _one_line, _training


def _ignoring(*signums: int):
    """A child's start with ``signums`` ignored, as ``nohup`` or ``trap '' TERM`` leave them."""
    def start():
        for signum in signums:
            signal.signal(signum, signal.SIG_IGN)
    return start


def _pretrain(root: Path, ex: str, ignored: tuple[int, ...] = ()) -> subprocess.Popen:
    flags = [f"--set={s}" for s in SETS if not s.startswith(("train.steps", "train.save_every"))]
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "pretrain", "--examples", ex, "--out", str(root), *flags,
           "--steps", "100000", "--save-every", "50000"]
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ignoring(*ignored))


_HUNG_UP = re.compile(r"^kolectra pretrain: terminated \(SIGHUP\) after step (\d+) of 100000, saved as the "
                      r"checkpoint step-(\d{8}); checkpoint: its working state is kept in (\S+); --resume continues it$")


def test_a_hangup_while_pretraining_saves_the_step_and_ends_129(chain, tmp_path):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    proc = _pretrain(store.root, ex)
    seen = _training(proc)
    os.killpg(proc.pid, signal.SIGHUP)  # the terminal's hangup reaches its foreground group
    code, err = _ended(proc, seen)
    line = _one_line(err)
    assert code == 129 and (m := _HUNG_UP.match(line)), err[-3000:]  # before: -1, no line, no checkpoint
    step = int(m.group(1))
    assert checkpoint.latest(Path(m.group(3)) / "out").name == f"step-{step:08d}"


def test_a_terminal_that_hangs_up_while_pretraining_saves_the_step_and_ends_129(chain, tmp_path):  # noqa: F811
    """The real thing: the command on a terminal of its own (its controlling one), whose other end closes
    (an SSH session that drops). After the SIGHUP, every write to the terminal fails with EIO: the next
    progress line's raised OSError and ended the command with status 1, no step saved (d2ae8ac)."""
    store, ex = _copy(chain, tmp_path / "root")
    flags = [f"--set={s}" for s in SETS if not s.startswith(("train.steps", "train.save_every"))]
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "pretrain", "--examples", ex, "--out", str(store.root),
           *flags, "--steps", "100000", "--save-every", "50000"]
    pid, terminal = pty.fork()
    if pid == 0:  # the child: a session of its own, the terminal its controlling one
        os.chdir(REPO)
        os.execve(sys.executable, cmd, {**os.environ, "PYTHONPATH": str(REPO)})
    seen, deadline = b"", time.monotonic() + 120
    try:
        while b"step 1 took" not in seen and time.monotonic() < deadline:
            if select.select([terminal], [], [], 1.0)[0]:
                seen += os.read(terminal, 4096)
    finally:
        os.close(terminal)  # the terminal hangs up: SIGHUP to its foreground group, EIO on every write
    waited = time.monotonic() + 120
    while (ended := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < waited:
        time.sleep(0.1)
    if ended[0] == 0:
        os.kill(pid, signal.SIGKILL)
        ended = os.waitpid(pid, 0)
    assert b"step 1 took" in seen, seen[-2000:]
    assert os.waitstatus_to_exitcode(ended[1]) == 129  # before: 1 (EIO), -1 (no handler)
    assert [p.name for p in store.root.rglob("step-*")], "no checkpoint of the step"


def test_a_signal_the_caller_ignores_stays_ignored_while_pretraining(chain, tmp_path):  # noqa: F811
    """``nohup`` (SIGHUP ignored) and ``trap '' TERM`` in one run (each a child's start costs ~7 CPU s): both
    signals the caller ignored are sent, and the command trains on through both."""
    store, ex = _copy(chain, tmp_path / "root")
    proc = _pretrain(store.root, ex, (signal.SIGHUP, signal.SIGTERM))
    seen = _training(proc)  # well past the start (the first step alone takes over a second)
    os.killpg(proc.pid, signal.SIGHUP)
    os.killpg(proc.pid, signal.SIGTERM)
    time.sleep(2.0)
    # before (TERM): 143, stopped; a hangup's stop would be 129: the status says which signal stopped it
    assert proc.poll() is None, (proc.returncode, proc.communicate()[1][-3000:])
    os.killpg(proc.pid, signal.SIGINT)  # the stop the caller kept
    code, err = _ended(proc, seen)
    assert code == 130 and _one_line(err).startswith("kolectra pretrain: interrupted"), err[-3000:]


def _corpus(tmp_path, ignored: tuple[int, ...] = ()) -> subprocess.Popen:
    proc = subprocess.Popen(corpus_on_two_workers(tmp_path), cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ignoring(*ignored))
    deadline = time.monotonic() + 120
    while len(_workers(proc.pid)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(1.0)
    return proc


def _corpus_ended(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _in_session(proc.pid) == [], "a worker outlived the launcher"
    return proc.returncode, err


def test_a_hangup_during_the_corpus_job_is_one_line_with_status_129(tmp_path):
    proc = _corpus(tmp_path)
    os.killpg(proc.pid, signal.SIGHUP)
    code, err = _corpus_ended(proc)
    line = _one_line(err)
    assert code == 129, err[-3000:]  # before: -1, no line
    # before: 'terminated (read ...)', the hangup named only by the status (as pretrain's line names it)
    assert line.startswith("kolectra corpus: terminated (SIGHUP: its terminal hung up) (read ") and \
        "what it built is discarded" in line, line


@pytest.mark.parametrize("ignored, sent, stop, status", [
    (signal.SIGTERM, signal.SIGTERM, signal.SIGINT, 130),  # the workers inherit SIGTERM ignored: killed outright
    (signal.SIGINT, signal.SIGINT, signal.SIGTERM, 143),  # a script's `kolectra corpus ... &`
], ids=["trap '' TERM", "ignored SIGINT"])
def test_a_signal_the_caller_ignores_stays_ignored_during_the_corpus_job(tmp_path, ignored, sent, stop, status):
    proc = _corpus(tmp_path, (ignored,))
    os.killpg(proc.pid, sent)
    time.sleep(2.0)
    assert proc.poll() is None, proc.communicate()[1][-3000:]  # before: stopped (143, 130)
    assert len(_workers(proc.pid)) == 2
    os.kill(proc.pid, stop)  # the launcher alone: it stops its workers itself
    code, err = _corpus_ended(proc)
    assert code == status, err[-3000:]
    _one_line(err)
