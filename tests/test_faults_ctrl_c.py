"""Ctrl-C during ``kolectra pretrain`` (core/ctrl_c.py, model/preempt.py): real children, real SIGINTs.

Once a step is done, a first Ctrl-C ends that step, saves a checkpoint of it and stops with status 130
(before: it stopped at once, keeping only the last ``--save-every`` checkpoint: every step of a run
without one was lost); ``--resume`` then ends with an uninterrupted run's weights. After the last step
(or during it) it lets the export and publish finish and stops with 130 saying where the artifact is
(before: the finished run was thrown away). A second Ctrl-C stops at once, a save included. Two ranks
under torchrun, which sends every rank the signal once more, stop together at one log step.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from kolectra.model import checkpoint
from kolectra.pipeline import stages
from tests.faults_publish_support import _private, child
from tests.test_faults_pretrain import SETS, _copy, _published_cleanly, _weights, chain, straight  # noqa: F401
from tests.test_faults_sigterm import _ended, _one_line, _pretrain, _training

NO_SAVES = [*(s for s in SETS if not s.startswith("train.save_every")), "train.save_every=0"]  # a run without --save-every: before, a Ctrl-C lost every step
_STOPPED = re.compile(r"^kolectra pretrain: interrupted \(Ctrl-C\) after step (\d+) of (\d+), saved as the checkpoint "
                      r"step-(\d{8}); checkpoint: its working state is kept in (\S+); --resume continues it$")


def _child(store, ex: str, point: str, sets: list[str]) -> subprocess.CompletedProcess:
    return child("pretrain", str(store.root), ex, point, *(f"--set={s}" for s in sets))


def test_ctrl_c_in_a_step_saves_that_step_and_resume_ends_with_the_straight_run_s_weights(
        chain, straight, tmp_path):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    proc = _child(store, ex, "int5", NO_SAVES)  # a real SIGINT in training step 5
    line = _one_line(proc.stderr)
    assert proc.returncode == 130 and (m := _STOPPED.match(line)), proc.stderr[-3000:]  # before: 130, nothing kept
    assert m.groups()[:3] == ("5", "12", "00000005"), line
    assert "[kolectra] Ctrl-C: finishing step 5 and saving a checkpoint of it; Ctrl-C again to stop at once\n" \
        in proc.stderr
    assert checkpoint.latest(Path(m.group(4)) / "out").name == "step-00000005"
    art = stages.pretrain(store, ex, preset="tiny", sets=NO_SAVES, resume=True)
    assert art.manifest["stats"]["resumed_from_step"] == 5
    _published_cleanly(store, art, straight)


def test_a_ctrl_c_from_outside_after_a_step_saves_it(chain, tmp_path):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    proc = _pretrain(store.root, ex)  # 100,000 steps, no checkpoint before the signal
    seen = _training(proc)
    proc.send_signal(signal.SIGINT)
    code, err = _ended(proc, seen)
    line = _one_line(err)
    assert code == 130 and (m := _STOPPED.match(line)), err[-3000:]
    assert m.group(2) == "100000" and m.group(3) == f"{int(m.group(1)):08d}", line
    assert checkpoint.latest(Path(m.group(4)) / "out").name == f"step-{m.group(3)}"


def test_a_second_ctrl_c_cuts_the_save_short_and_the_last_checkpoint_stands(chain, tmp_path):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    proc = _child(store, ex, "int6_save", SETS)  # the second as step 6's checkpoint begins to be written
    line = _one_line(proc.stderr)
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert "Ctrl-C: finishing step 6 and saving a checkpoint of it" in proc.stderr
    m = re.fullmatch(r"kolectra pretrain: interrupted; checkpoint: its working state is kept in (\S+); --resume "
                     r"continues it", line)
    assert m, line
    kept = Path(m.group(1)) / "out" / "checkpoints"
    assert sorted(p.name for p in kept.iterdir()) == ["step-00000004"]  # the cut save's .tmp-step-6 removed


def test_ctrl_c_in_the_last_step_or_at_the_export_publishes_the_run_then_stops(chain, straight, tmp_path):  # noqa: F811
    for point, said in [("int12", "Ctrl-C: finishing the last step (12), then exporting and publishing the run"),
                        ("int_export", "Ctrl-C: training is done; exporting and publishing the run first, then stopping")]:
        store, ex = _copy(chain, tmp_path / point)
        proc = _child(store, ex, point, NO_SAVES)
        line = _one_line(proc.stderr)
        assert proc.returncode == 130, proc.stderr[-3000:]  # before: 130, the finished run thrown away
        assert f"[kolectra] {said}; Ctrl-C again to stop at once\n" in proc.stderr, proc.stderr[-3000:]
        [art] = store.list("checkpoint")
        assert line == (f"kolectra pretrain: interrupted (Ctrl-C) after the last step (12 of 12): the run was done, so "
                        f"it was exported and published first; checkpoint: published as {art.path}"), line
        assert store.verify(art) == []
        _published_cleanly(store, art, straight)


def test_a_second_ctrl_c_at_the_export_stops_at_once_keeping_the_last_checkpoint(chain, tmp_path):  # noqa: F811
    store, ex = _copy(chain, tmp_path / "root")
    proc = _child(store, ex, "int12_export", SETS)
    line = _one_line(proc.stderr)
    assert proc.returncode == 130 and store.list("checkpoint") == [], proc.stderr[-3000:]
    assert re.fullmatch(r"kolectra pretrain: interrupted; checkpoint: its working state is kept in \S+; --resume "
                        r"continues it", line), line
    assert _private(store.root)[".tmp"] == []
    [run] = (store.root / ".work").iterdir()
    assert checkpoint.latest(run / "out").name == "step-00000008"


def test_a_terminal_s_ctrl_c_under_torchrun_stops_both_ranks_at_one_log_step(chain, tmp_path):  # noqa: F811
    """The terminal sends SIGINT to its foreground process group (torchrun and both ranks), and torchrun
    then sends each rank SIGINT again: that second one is no second press (it cut the save short)."""
    store, ex = _copy(chain, tmp_path / "root")
    py = Path(sys.executable)
    flags = [f"--set={s}" for s in SETS if not s.startswith(("train.steps", "train.save_every", "train.log_every"))]
    proc = subprocess.Popen([str(py.with_name("torchrun")), "--standalone", "--nproc-per-node=2", "--no-python",
                             str(py.with_name("kolectra")), "pretrain", "--examples", ex, "--out", str(store.root),
                             "--preset", "tiny", *flags, "--set=train.log_every=5", "--steps", "100000",
                             "--save-every", "50000"],
                            env={**os.environ, "OMP_NUM_THREADS": "1", "KOLECTRA_PROGRESS": "lines"},
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = _training(proc, "pretrain 5/100000 ")  # both ranks are past their first step
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal
    code, err = _ended(proc, seen)
    # torchrun's own traceback (its SignalException: its behaviour, as under SIGTERM), none of a rank's
    assert code != 0 and err.count("Traceback") == 1 and "SignalException: Process" in err, err[-3000:]
    assert "internal error" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("kolectra pretrain: ")]
    assert len(lines) == 2, err[-3000:]  # one line a rank (torchrun's own traceback follows: its behaviour)
    m = next(filter(None, map(_STOPPED.match, lines)), None)  # rank 0's, with where its run is kept
    assert m and int(m.group(1)) % 5 == 0 and int(m.group(3)) == int(m.group(1)), err[-3000:]
    other = next(ln for ln in lines if not _STOPPED.match(ln))
    assert other == f"kolectra pretrain: interrupted (Ctrl-C) after step {m.group(1)} of 100000, saved as the " \
        f"checkpoint step-{m.group(3)}", other
    saved = checkpoint.latest(Path(m.group(4)) / "out")
    assert saved.name == f"step-{m.group(3)}" and (saved / "rank-1.pt").is_file()
