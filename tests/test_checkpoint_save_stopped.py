"""A stop (Ctrl-C, a second SIGTERM) while a checkpoint is being saved: the partial ``.tmp-step-N`` goes.

``kolectra run`` (pretrain alike) sent SIGTERM, then Ctrl-C 0.05 s later while the step SIGTERM asked for
was being saved, said 'interrupted; checkpoint: its working state is kept in ROOT/.work/checkpoint-<id>;
the same `kolectra run` without --force continues it' with only ``checkpoints/.tmp-step-00000021`` in
that run (a save cut short, never loaded): the next run said 'resuming in ...', then 'no intact
checkpoint ...; starting fresh', and ``artifacts gc`` listed the run as one '--resume continues'. A save
that fails (a full disk) removed its partial folder already; a stopped one now does too, so the line says
what a plain Ctrl-C says there: nothing published, or the earlier checkpoint kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput
from kolectra.model import checkpoint
from kolectra.pipeline.store.artifacts import Resumable, Store
from kolectra.pipeline.store.request import Request


def _save(out: Path, step: int, save_fn=torch.save) -> Path:
    return checkpoint.save(out, step, {"w": torch.ones(3) * step}, {"state": {}, "param_groups": []},
                           {"config": {}}, {"rng": {}, "log": {}}, save_fn=save_fn)


def _stopped_at(write: int, stop: BaseException):
    """torch.save, stopped on its ``write``-th call (1: this rank's part; 2: the optimizer, in rank 0's publish)."""
    calls = []

    def save_fn(obj, path):
        calls.append(path)
        if len(calls) == write:
            raise stop
        torch.save(obj, path)
    return save_fn


@pytest.mark.parametrize("write", [1, 2], ids=["own-part", "publish"])
@pytest.mark.parametrize("stop", [KeyboardInterrupt(), Terminated()], ids=["ctrl-c", "second-sigterm"])
@pytest.mark.parametrize("earlier", [False, True], ids=["first-save", "after-a-checkpoint"])
def test_a_save_cut_short_by_a_stop_is_neither_kept_nor_called_the_working_state(tmp_path, write, stop, earlier):
    def produce(out: Path) -> StageOutput:
        if earlier:
            _save(out, 10)
        _save(out, 20, _stopped_at(write, stop))
        raise AssertionError("the stop ends the save")

    store = Store(tmp_path)
    request = Request(kind="checkpoint", name="c", stage_version=1, config={})
    with pytest.raises(KeyboardInterrupt) as stopped:
        store.build(request, produce, resumable=Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",)))
    notes = "; ".join(stopped.value.__notes__)
    run = tmp_path / ".work" / f"checkpoint-{request.id()}"
    if earlier:  # the complete checkpoint before it is what continues the run
        assert "its working state is kept in" in notes, notes
        assert sorted(p.name for p in (run / "out" / "checkpoints").iterdir()) == ["step-00000010"]
    else:  # before: 'its working state is kept in ...; --resume continues it', .tmp-step-00000020 alone in it
        assert "nothing published; its partial build" in notes and "working state" not in notes, notes
        assert not run.exists()


# A child killed (SIGKILL: out of memory, the grace period run out) inside its run's first save.
KILLED_IN_THE_FIRST_SAVE = """
import os, signal, sys
from pathlib import Path
from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import Resumable, Store
from kolectra.pipeline.store.request import Request

def produce(out):
    partial = out / "checkpoints" / ".tmp-step-00000004"
    partial.mkdir(parents=True)
    (partial / "rank-0.pt").write_bytes(b"cut")
    os.kill(os.getpid(), signal.SIGKILL)

Store(Path(sys.argv[1])).build(Request(kind="checkpoint", name="c", stage_version=1, config={}), produce,
                               resumable=Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",)))
"""


def test_a_run_killed_in_its_first_save_is_no_run_to_continue(tmp_path, capsys):
    """Its ``.tmp-step-N`` alone was its working state: ``artifacts gc`` kept it as 'interrupted run ...: --resume
    continues it', and --resume said 'resuming in ...', then 'no intact checkpoint ...; starting fresh'."""
    import os
    import signal
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", KILLED_IN_THE_FIRST_SAVE, str(tmp_path)], cwd=repo, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(repo)}, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = Store(tmp_path)
    request = Request(kind="checkpoint", name="c", stage_version=1, config={})
    removed, kept = store.collect(dry_run=True)
    assert kept == [] and removed == [tmp_path / ".work" / f"checkpoint-{request.id()}"], (removed, kept)  # before: kept
    store.build(request, lambda out: StageOutput(stats={}), resumable=Resumable(family={"kind": "checkpoint"},
                                                                                scratch=("checkpoints",)), resume=True)
    err = capsys.readouterr().err
    assert "checkpoint: nothing to resume for this request; starting fresh" in err and "resuming in" not in err, err
