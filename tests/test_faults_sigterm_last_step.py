"""SIGTERM or SIGHUP during ``kolectra pretrain``'s last step or after it (core/ctrl_c.py's FINISH, as for a
Ctrl-C there): real children, real signals.

Before 2026-12-02 a preemption's SIGTERM (or a hangup) that came while the finished run was exported,
hashed and published stopped at once and threw the run away (its last ``--save-every`` checkpoint kept, or
nothing), and one in the last step saved a checkpoint of it to ``--resume`` only to export it. Now the
export and publish finish (a third of a checkpoint's bytes: within the grace a checkpoint's save would
have had) and the command ends as that signal's stop, 143 or 129, naming the published artifact; the
artifact verifies and holds an uninterrupted run's weights. A second SIGTERM stops at once, as mid-run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from kolectra.model import checkpoint
from kolectra.pipeline.cli import main
from tests.faults_publish_support import REPO, _private, child
from tests.test_faults_pretrain import SETS, _copy, _published_cleanly, chain, straight  # noqa: F401
from tests.test_faults_sigterm import _one_line

NO_SAVES = [*(s for s in SETS if not s.startswith("train.save_every")), "train.save_every=0"]  # nothing else to keep


def _child(store, ex: str, point: str, sets: list[str], ignore_sigint: bool = False) -> subprocess.CompletedProcess:
    """The fault child through the command line; ``ignore_sigint``: started as a script's ``cmd &`` starts it."""
    if not ignore_sigint:
        return child("pretrain", str(store.root), ex, point, *(f"--set={s}" for s in sets))
    return subprocess.run([sys.executable, "-m", "tests.fault_child", "pretrain", str(store.root), ex, point,
                           *(f"--set={s}" for s in sets)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


@pytest.mark.parametrize("point, name, status, ignore_sigint", [
    ("sigterm12", "SIGTERM", 143, False),  # in the last step: before, 143 with a checkpoint of step 12, nothing published
    ("term_export", "SIGTERM", 143, False),  # as the export begins: before, 143, nothing kept (no --save-every)
    ("term_export", "SIGTERM", 143, True),  # the same where the caller ignores SIGINT (no Ctrl-C handler of ours)
    ("hup_export", "SIGHUP", 129, False),  # the terminal hung up: its own status, as mid-run
])
def test_a_stop_signal_in_the_last_step_or_after_it_publishes_the_run_then_stops(
        chain, straight, tmp_path, capsys, point, name, status, ignore_sigint):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    proc = _child(store, ex, point, NO_SAVES, ignore_sigint)
    line = _one_line(proc.stderr)
    assert proc.returncode == status, proc.stderr[-3000:]
    assert (f"[kolectra] {name}: training is done; exporting and publishing the run first, then stopping; {name} "
            f"again to stop at once\n") in proc.stderr, proc.stderr[-3000:]
    [art] = store.list("checkpoint")
    assert line == (f"kolectra pretrain: terminated ({name}) after the last step (12 of 12): the run was done, so it "
                    f"was exported and published first; checkpoint: published as {art.path}"), line
    assert main(["artifacts", "verify", str(art.path), "--out", str(store.root)]) == 0
    assert capsys.readouterr().out.startswith("ok "), "kolectra artifacts verify"
    _published_cleanly(store, art, straight)  # an uninterrupted run's weights; no checkpoint, .tmp or .work left


def test_a_second_sigterm_during_the_export_stops_at_once_keeping_the_last_checkpoint(chain, tmp_path):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    proc = _child(store, ex, "term_export_twice", SETS)  # the first as the export begins, the second as it returns
    line = _one_line(proc.stderr)
    assert proc.returncode == 143 and store.list("checkpoint") == [], proc.stderr[-3000:]
    assert "[kolectra] SIGTERM: training is done; exporting and publishing the run first" in proc.stderr
    assert re.fullmatch(r"kolectra pretrain: terminated; checkpoint: its working state is kept in \S+; --resume "
                        r"continues it", line), line
    assert _private(store.root)[".tmp"] == []
    [run] = (store.root / ".work").iterdir()
    assert checkpoint.latest(run / "out").name == "step-00000008"
