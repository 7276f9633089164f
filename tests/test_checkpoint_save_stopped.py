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
from kolectra.pipeline.store.artifacts import Request, Resumable, Store


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
