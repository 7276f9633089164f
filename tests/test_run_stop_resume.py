"""``kolectra run`` stopped in its pretraining (SIGTERM, a hangup) said '... saved as the checkpoint
step-00000021; checkpoint: its working state is kept in ...; --resume continues it', but ``kolectra run``
has no --resume, and the next ``kolectra run`` said 'checkpoint: discarding the interrupted run in ...' and
trained from step 0. It now continues that run (this request's alone), and the line says so.

``kolectra run --force`` after such a stop said 'checkpoint: discarding the interrupted run in ... (--resume
would continue it)' (and a stop under --force, 'kolectra run again continues it': --force again discards
it); both now name what continues it: the same ``kolectra run`` without --force."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Resumable
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)
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


def _gc_lines(root: str, capsys) -> list[str]:
    from kolectra.pipeline.cli import main

    capsys.readouterr()
    assert main(["artifacts", "gc", "--out", root]) == 0
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("kept interrupted run")]


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_gc_lists_an_interrupted_run_with_the_command_that_continues_it(tmp_path, monkeypatch, capsys, where,
                                                                        request):
    """``kolectra artifacts gc`` listed every interrupted run with '--resume continues it; gc --interrupted
    removes it', the runs ``kolectra run`` and ``kolectra study`` left too (neither has --resume); each run
    now records its command's words in its request.json (disk, and the bucket's copy), and gc names them."""
    from kolectra.pipeline import run
    from kolectra.pipeline.study import runner
    from kolectra.pipeline.study.plan import StudyPlan

    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    root = str(tmp_path / "root") if where == "disk" else f"{request.getfixturevalue('bucket')}/gc"
    _standins(monkeypatch)
    found: list[list[str]] = []
    _pretrain_standin(monkeypatch, found)
    monkeypatch.setattr(runner, "flops_per_step", lambda examples, plan, arm: 1)
    store = open_store(root)
    with pytest.raises(Terminated):
        run.run_sample(store)
    found.clear()
    with pytest.raises(Terminated):
        runner.pretrain_point(store, stages.examples(store, name="ex"), StudyPlan(flops=100.0), "electra", 100.0, 1)
    found.clear()
    with pytest.raises(Terminated):  # kolectra pretrain's own: --resume continues it
        stages.pretrain(store, stages.examples(store, name="ex2"), name="p")
    lines = _gc_lines(root, capsys)
    assert len(lines) == 3, lines
    by_name = {line.split(" (")[1].split(",")[0]: line for line in lines}
    # before: '--resume continues it' on all three
    assert by_name["sample"].endswith(f": {AGAIN} continues it; gc --interrupted removes it"), by_name
    assert by_name["study-electra"].endswith(": the same `kolectra study` continues it; gc --interrupted removes it")
    assert by_name["p"].endswith(": --resume continues it; gc --interrupted removes it"), by_name


def test_gc_words_a_run_started_before_runs_recorded_their_command_neutrally(tmp_path, monkeypatch, capsys):
    """A run an earlier kolectra left has no words of its command in request.json: one named as ``kolectra run``
    or a study name theirs may be theirs, and gc does not say '--resume' alone for it; kolectra pretrain's
    request.json is as it was (no new field)."""
    import json

    from kolectra.pipeline.store import workspace

    _standins(monkeypatch)
    _pretrain_standin(monkeypatch, [])
    store = open_store(tmp_path)
    with pytest.raises(Terminated):
        stages.pretrain(store, stages.examples(store, name="ex"), name="p")
    (plain,) = workspace.runs(tmp_path)
    record = json.loads((plain.path / workspace.REQUEST).read_text())
    assert "again" not in record  # --resume's run: request.json as before
    for name in ("sample", "study-mlm"):  # as an earlier kolectra left kolectra run's and a study's
        old = tmp_path / ".work" / f"checkpoint-{name}-0123456789abcde{len(name) % 10}"
        (old / "out" / "checkpoints" / "step-00000001").mkdir(parents=True)
        (old / workspace.REQUEST).write_text(json.dumps({**record, "name": name, "id": old.name[-16:]}))
    lines = {line.split(" (")[1].split(",")[0]: line for line in _gc_lines(str(tmp_path), capsys)}
    assert lines["p"].endswith(": --resume continues it; gc --interrupted removes it"), lines
    assert ("--resume continues it, or the same `kolectra run` without --force if that started it (a run started "
            "before 2026-12-01 does not say which)") in lines["sample"], lines
    assert "or the same `kolectra study` if that started it" in lines["study-mlm"], lines


@pytest.mark.parametrize("where", ["disk", "bucket"])
def test_gc_lists_a_stopped_forced_rebuild_with_force_resume(tmp_path, monkeypatch, capsys, where, request):
    """A ``--force`` rebuild of a published checkpoint, stopped, is kept by gc (started after that copy); gc said
    '--resume continues it', but --resume alone reuses the published copy and leaves the run (its stop's line
    says '--force --resume continues it')."""
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))
    root = str(tmp_path / "root") if where == "disk" else f"{request.getfixturevalue('bucket')}/forced"
    _standins(monkeypatch)
    found: list[list[str]] = [["a first call"]]  # the first build finishes
    _pretrain_standin(monkeypatch, found)
    store = open_store(root)
    examples = stages.examples(store, name="ex")
    stages.pretrain(store, examples, name="p")
    found.clear()
    time.sleep(1.1)  # the rebuild's run starts in a later second than the copy (a bucket's times are whole seconds)
    with pytest.raises(Terminated) as stopped:
        stages.pretrain(store, examples, name="p", force=True)
    assert "--force --resume continues it" in "; ".join(stopped.value.__notes__)
    (line,) = _gc_lines(root, capsys)
    assert line.endswith(": --force --resume continues it (--resume alone reuses the copy published before); "
                         "gc --interrupted removes it"), line  # before: '--resume continues it'


def test_a_kolectra_run_s_run_continued_by_another_request_s_resume_is_listed_as_resume_s(tmp_path, monkeypatch,
                                                                                         capsys):
    """``kolectra pretrain --resume`` of other settings continues the newest interrupted run of the same inputs,
    one ``kolectra run`` left too; stopped, its line says '--resume continues it' (its checkpoint now holds the
    other settings, which ``kolectra run`` refuses to continue), but gc kept naming the words request.json had
    from ``kolectra run``: 'the same `kolectra run` without --force continues it'. The run's words follow its
    continuation now."""
    from kolectra.pipeline import run

    _standins(monkeypatch)
    _pretrain_standin(monkeypatch, [])
    store = open_store(tmp_path)
    with pytest.raises(Terminated):
        run.run_sample(store)

    def produce(out: Path) -> StageOutput:
        raise Terminated("terminated (SIGTERM) after step 30 of 2000, saved as the checkpoint step-00000030")

    with pytest.raises(Terminated) as stopped:
        store.build(Request(kind="checkpoint", name="longer", stage_version=1, config={"steps": 2000}), produce,
                    resumable=Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",)), resume=True)
    notes = "; ".join(stopped.value.__notes__)
    assert "continuing it if its checkpoint's settings allow" in capsys.readouterr().err  # the sample's run
    assert "; --resume continues it" in notes, notes
    (line,) = _gc_lines(str(tmp_path), capsys)
    assert "(sample," in line and line.endswith(": --resume continues it; gc --interrupted removes it"), line
