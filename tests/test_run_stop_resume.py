"""``kolectra run`` stopped in its pretraining (SIGTERM, a hangup) said '... saved as the checkpoint
step-00000021; checkpoint: its working state is kept in ...; --resume continues it', but ``kolectra run``
has no --resume, and the next ``kolectra run`` said 'checkpoint: discarding the interrupted run in ...' and
trained from step 0. It now continues that run (this request's alone), and the line says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Request, Resumable
from kolectra.pipeline.store.factory import open_store
from tests.test_run_command import _standins


def test_a_stop_in_pretraining_is_continued_by_the_next_kolectra_run(tmp_path, monkeypatch, capsys):
    from kolectra.pipeline import run

    _standins(monkeypatch)
    found: list[list[str]] = []  # the working state each call of the stage found

    def pretrain(store, examples, *, force=False, name=None, resume=False, **kwargs):
        def produce(out: Path) -> StageOutput:
            steps = out / "checkpoints"
            found.append(sorted(p.name for p in steps.glob("step-*")))
            if len(found) == 1:  # the first run is stopped after its step 21 was saved
                (steps / "step-00000021").mkdir(parents=True)
                raise Terminated("terminated (SIGTERM) after step 21 of 600, saved as the checkpoint step-00000021")
            (out / "metrics.json").write_text("{}")
            return StageOutput(stats={})
        return store.build(Request(kind="checkpoint", name=name, stage_version=1, config={}, parents=(examples,)),
                           produce, force, resumable=Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",)),
                           resume=resume)

    monkeypatch.setattr(stages, "pretrain", pretrain)
    store = open_store(tmp_path)
    with pytest.raises(Terminated) as stopped:
        run.run_sample(store)
    assert "nothing to resume" not in capsys.readouterr().err  # a first run: nothing was asked for (no --resume)
    notes = "; ".join(stopped.value.__notes__)
    assert "--resume" not in notes and "kolectra run again continues it" in notes, notes  # before: --resume
    run.run_sample(store)
    assert found == [[], ["step-00000021"]]  # before: [[], []], 'discarding the interrupted run'
    assert "checkpoint: resuming in" in capsys.readouterr().err
