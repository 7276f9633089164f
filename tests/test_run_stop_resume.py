"""``kolectra run`` stopped in its pretraining (SIGTERM, a hangup) said '... saved as the checkpoint
step-00000021; checkpoint: its working state is kept in ...; --resume continues it', but ``kolectra run``
has no --resume, and the next ``kolectra run`` said 'checkpoint: discarding the interrupted run in ...' and
trained from step 0. It now continues that run (this request's alone), and the line says so.

``kolectra run --force`` after such a stop said 'checkpoint: discarding the interrupted run in ... (--resume
would continue it)' (and a stop under --force, 'kolectra run again continues it': --force again discards
it); both now name what continues it: the same ``kolectra run`` without --force."""

from __future__ import annotations

from pathlib import Path

import pytest

from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Request, Resumable
from kolectra.pipeline.store.factory import open_store
from tests.test_run_command import _standins

AGAIN = "the same `kolectra run` without --force"


def _pretrain_standin(monkeypatch, found: list[list[str]]) -> None:
    """stages.pretrain: the first call is stopped after its step 21 was saved; the store's part is real."""
    def pretrain(store, examples, *, force=False, name=None, resume=False, again="--resume", **kwargs):
        def produce(out: Path) -> StageOutput:
            steps = out / "checkpoints"
            found.append(sorted(p.name for p in steps.glob("step-*")))
            if len(found) == 1:  # the first run is stopped after its step 21 was saved
                (steps / "step-00000021").mkdir(parents=True)
                raise Terminated("terminated (SIGTERM) after step 21 of 600, saved as the checkpoint step-00000021")
            (out / "metrics.json").write_text("{}")
            return StageOutput(stats={})
        return store.build(Request(kind="checkpoint", name=name, stage_version=1, config={}, parents=(examples,)),
                           produce, force, resumable=Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",),
                                                               again=again), resume=resume)

    monkeypatch.setattr(stages, "pretrain", pretrain)


def test_a_stop_in_pretraining_is_continued_by_the_next_kolectra_run(tmp_path, monkeypatch, capsys):
    from kolectra.pipeline import run

    _standins(monkeypatch)
    found: list[list[str]] = []  # the working state each call of the stage found
    _pretrain_standin(monkeypatch, found)
    store = open_store(tmp_path)
    with pytest.raises(Terminated) as stopped:
        run.run_sample(store)
    assert "nothing to resume" not in capsys.readouterr().err  # a first run: nothing was asked for (no --resume)
    notes = "; ".join(stopped.value.__notes__)
    assert "--resume" not in notes and f"{AGAIN} continues it" in notes, notes  # before: --resume
    run.run_sample(store)
    assert found == [[], ["step-00000021"]]  # before: [[], []], 'discarding the interrupted run'
    assert "checkpoint: resuming in" in capsys.readouterr().err


@pytest.mark.parametrize("first_force", [False, True])
def test_kolectra_run_force_after_a_stop_names_what_would_have_continued_it(tmp_path, monkeypatch, capsys,
                                                                             first_force):
    from kolectra.pipeline import run

    _standins(monkeypatch)
    found: list[list[str]] = []
    _pretrain_standin(monkeypatch, found)
    store = open_store(tmp_path)
    with pytest.raises(Terminated) as stopped:
        run.run_sample(store, force=first_force)
    notes = "; ".join(stopped.value.__notes__)
    # before, under --force: 'kolectra run again continues it', and kolectra run --force again discarded it
    assert "--resume" not in notes and f"{AGAIN} continues it" in notes, notes
    assert f"({AGAIN} reuses them)" in notes, notes  # before: 'kolectra run again', which --force rebuilt
    capsys.readouterr()
    run.run_sample(store, force=True)
    assert found == [[], []]  # --force: trained afresh
    err = capsys.readouterr().err
    assert "checkpoint: discarding the interrupted run in" in err, err
    assert f"({AGAIN} would continue it)" in err and "--resume" not in err, err  # before: (--resume would ...)


def test_a_study_point_stopped_in_pretraining_names_the_study_as_what_continues_it(tmp_path, monkeypatch):
    """A study point's stop said '--resume continues it': ``kolectra study`` has none, and runs its points
    with resume="exact", so the same study again continues it."""
    from kolectra.pipeline.study import runner
    from kolectra.pipeline.study.plan import StudyPlan

    _standins(monkeypatch)
    found: list[list[str]] = []
    _pretrain_standin(monkeypatch, found)
    monkeypatch.setattr(runner, "flops_per_step", lambda examples, plan, arm: 1)
    store = open_store(tmp_path)
    examples = stages.examples(store, name="ex")
    with pytest.raises(Terminated) as stopped:
        runner.pretrain_point(store, examples, StudyPlan(flops=100.0), "electra", 100.0, 1)
    notes = "; ".join(stopped.value.__notes__)
    assert "--resume" not in notes and "the same `kolectra study` continues it" in notes, notes  # before: --resume
    runner.pretrain_point(store, examples, StudyPlan(flops=100.0), "electra", 100.0, 1)
    assert found == [[], ["step-00000021"]]
