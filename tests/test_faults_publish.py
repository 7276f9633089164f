"""Fault injection on the publish protocol: a SIGKILL after every step, identical builds racing,
refused and interrupted builds, what is left behind and who cleans it.

Each killed build runs in a child process (tests/fault_child.py) that SIGKILLs itself right after
one of the store's steps: no ``finally`` runs, as with ``kill -9``. The next build of the same
request must then reuse, recover or rebuild, and never find half an artifact. A stopped or killed
``--force`` (the copy it moved aside put back, stale copies, what list and gc say): tests/test_faults_publish_force.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.model.checkpoint import CheckpointWriteError
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Resumable, Store
from kolectra.pipeline.store.request import Request
from tests.fault_child import toy_request
from tests.faults_publish_support import REPO, _no_half_artifact, _private, _writes, child


@pytest.mark.parametrize("point", ["prepared", "produced", "sealed", "published"])
def test_kill_at_each_publish_step_then_the_next_build_recovers(tmp_path, point):
    proc = child("toy", str(tmp_path), point, "--text", "killed run")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    store = Store(tmp_path)
    assert len(_no_half_artifact(store)) == (1 if point == "published" else 0)

    calls = []
    art = store.build(toy_request("killed run"), _writes("killed run", calls))
    # sealed: the killed run's complete build is published as it is, not produced again
    assert len(calls) == (0 if point in ("sealed", "published") else 1)
    assert (art.path / "data" / "a.txt").read_text() == "killed run"
    assert [a.path for a in _no_half_artifact(store)] == [art.path]
    assert _private(tmp_path) == {".tmp": [], ".work": [], ".locks": []}


def test_kill_between_moving_the_old_copy_and_renaming_the_new_one(tmp_path):
    """--force replaces a published artifact in two renames; a kill between them loses neither."""
    assert child("toy", str(tmp_path), "none", "--text", "same").returncode == 0
    proc = child("toy", str(tmp_path), "old_moved", "--force", "--text", "same")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    store = Store(tmp_path)
    assert _no_half_artifact(store) == []  # neither copy is in place ...
    calls = []
    art = store.build(toy_request("same"), _writes("same", calls))
    assert calls == []  # ... and the sealed new one is published from .tmp without rebuilding
    assert store.verify(art) == [] and _private(tmp_path)[".tmp"] == []


@pytest.mark.parametrize("point", ["old_moved", "sealed"])
def test_gc_publishes_a_complete_build_it_finds_unpublished(tmp_path, point, capsys):
    """A kill between --force's two renames left the old copy and the new build in .tmp, both sealed;
    `kolectra artifacts gc` (and any other build's sweep) deleted both: no copy of the artifact
    remained. So did a plain build killed between sealing and publishing lose hours of work."""
    assert child("toy", str(tmp_path), "none", "--text", "same").returncode == 0
    store = Store(tmp_path)
    (first,) = _no_half_artifact(store)
    old_finished = first.manifest["provenance"]["finished"]
    if point == "sealed":
        shutil.rmtree(first.path)
    time.sleep(1.1)  # the new build finishes in a later second
    proc = child("toy", str(tmp_path), point, *(["--force"] if point == "old_moved" else []), "--text", "same")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert _no_half_artifact(store) == [] and len(_private(tmp_path)[".tmp"]) == (2 if point == "old_moved" else 1)
    assert main(["artifacts", "gc", "--out", str(tmp_path), "--dry-run"]) == 0
    assert "would publish" in capsys.readouterr().err and len(_private(tmp_path)[".tmp"]) >= 1
    assert main(["artifacts", "gc", "--out", str(tmp_path)]) == 0
    (published,) = _no_half_artifact(store)
    assert published.manifest["provenance"]["finished"] > old_finished  # the newer build, not the copy it replaced
    assert _private(tmp_path)[".tmp"] == []


def test_identical_builds_racing_publish_once_and_all_get_it(tmp_path):
    calls, go = tmp_path / "calls.txt", tmp_path / "go"
    procs = [child("toy", str(tmp_path / "root"), "none", "--sleep", "1.5", "--calls", str(calls),
                   "--start-after", str(go), wait=False) for _ in range(3)]
    deadline = time.time() + 120
    while time.time() < deadline and len(list(tmp_path.glob("go.ready-*"))) < 3:
        time.sleep(0.01)
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e[-1500:] for _, e in results]
    paths = {out.strip().splitlines()[-1] for out, _ in results}
    assert len(paths) == 1  # one directory, printed by all three
    assert len(calls.read_text().splitlines()) == 1  # produced once
    waited = [e for _, e in results if "is building the same request" in e]
    assert len(waited) == 2 and all("waiting" in e for e in waited)
    assert len(_no_half_artifact(Store(tmp_path / "root"))) == 1


def test_a_waiting_run_builds_itself_when_the_holder_dies(tmp_path):
    """The lock dies with its holder (kill -9): the run waiting on it takes over, no stale lock to clear."""
    release, calls, log = tmp_path / "release", tmp_path / "calls.txt", tmp_path / "waiter.err"
    holder = child("toy", str(tmp_path / "root"), "produced", "--hold", str(release), "--calls", str(calls), wait=False)
    deadline = time.time() + 60
    while time.time() < deadline and not calls.exists():
        time.sleep(0.01)
    with open(log, "w") as err:
        waiter = subprocess.Popen([sys.executable, "-m", "tests.fault_child", "toy", str(tmp_path / "root"), "none",
                                   "--calls", str(calls)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                                  stdout=subprocess.PIPE, stderr=err, text=True)
        while time.time() < deadline and "waiting" not in log.read_text():  # it waits on the holder
            time.sleep(0.01)
        release.touch()
        assert holder.wait(timeout=60) == -signal.SIGKILL
        out, _ = waiter.communicate(timeout=120)
    assert waiter.returncode == 0, log.read_text()[-2000:]
    assert "is building the same request" in log.read_text() and len(calls.read_text().splitlines()) == 2
    assert [str(a.path) for a in _no_half_artifact(Store(tmp_path / "root"))] == [out.strip()]
    assert _private(tmp_path / "root") == {".tmp": [], ".work": [], ".locks": []}


def test_a_live_build_is_never_swept_and_a_dead_ones_leftovers_are(tmp_path):
    release = tmp_path / "release"
    live = child("toy", str(tmp_path), "none", "--hold", str(release), "--text", "live", wait=False)
    deadline = time.time() + 60
    while time.time() < deadline and not _private(tmp_path)[".tmp"]:
        time.sleep(0.05)
    dead = child("toy", str(tmp_path), "produced", "--text", "dead")  # its build sweeps: the live one stays
    assert dead.returncode == -signal.SIGKILL
    names = _private(tmp_path)[".tmp"]
    assert len(names) == 2 and any(toy_request("live").id() in n for n in names)
    Store(tmp_path).build(toy_request("other"), _writes("other", []))  # any build sweeps what is dead
    names = _private(tmp_path)[".tmp"]
    assert len(names) == 1 and toy_request("live").id() in names[0]  # the live one is untouched
    release.touch()
    assert live.wait(timeout=60) == 0
    assert len(_no_half_artifact(Store(tmp_path))) == 2


def test_same_request_under_another_name_is_the_same_directory(tmp_path, capsys):
    store = Store(tmp_path)
    first = store.build(Request(kind="vocab", name="a", stage_version=1, config={}), _writes("x", []))
    calls = []
    second = store.build(Request(kind="vocab", name="b", stage_version=1, config={}), _writes("x", calls))
    assert second.path == first.path and calls == []
    err = capsys.readouterr().err
    # b may be the stage's default name, not a --name the user gave: the line names no flag as given (m4)
    assert "the name b (--name, else the stage's default) names only new builds" in err and "--name b" not in err
    forced = store.build(Request(kind="vocab", name="b", stage_version=1, config={}), _writes("y", []), force=True)
    assert forced.path == first.path and len(list((tmp_path / "vocab").iterdir())) == 1
    # a root that already holds one id under two names (an older kolectra): refs stay unambiguous
    shutil.copytree(first.path, first.path.with_name(f"zz-{first.id}"))
    assert store.resolve(first.id).id == first.id and store.resolve(first.id[:8]).id == first.id
    assert store.build(Request(kind="vocab", name="c", stage_version=1, config={}), _writes("z", [])).id == first.id
    assert len(list((tmp_path / "vocab").iterdir())) == 2


def test_refused_and_interrupted_builds_leave_only_what_can_be_resumed(tmp_path):
    store = Store(tmp_path)
    run = Resumable(family={"kind": "checkpoint", "examples": "e"}, scratch=("state",))

    def refuses(out: Path) -> StageOutput:
        raise ValueError("bad setting x")

    def interrupted(out: Path) -> StageOutput:
        (out / "state").mkdir()
        (out / "state" / "step-1").write_text("s")
        raise KeyboardInterrupt

    req = Request(kind="checkpoint", name="p", stage_version=1, config={"a": 1})
    with pytest.raises(ValueError) as refused:
        store.build(req, refuses, resumable=run)
    assert not getattr(refused.value, "__notes__", None)  # no "rerun with --resume" for a refusal
    assert _private(tmp_path) == {".tmp": [], ".work": [], ".locks": []}
    with pytest.raises(KeyboardInterrupt) as stopped:
        store.build(req, interrupted, resumable=run)
    assert "kept in" in stopped.value.__notes__[0] and "--resume continues it" in stopped.value.__notes__[0]
    assert _private(tmp_path)[".work"] == [f"checkpoint-{req.id()}"]

    def disk_full(out: Path) -> StageOutput:  # the environment failed, not the request: worth resuming once mended
        raise CheckpointWriteError(errno.ENOSPC, "no space left on the device (checkpoint not written)",
                                   str(out / "state" / "step-2"))

    with pytest.raises(CheckpointWriteError) as full:
        store.build(req, disk_full, resumable=run, resume=True)
    # was: no note (a KolectraError is a ValueError, taken for a refused request), though the state was kept
    assert "kept in" in full.value.__notes__[0] and "--resume continues it" in full.value.__notes__[0]
    assert _private(tmp_path)[".work"] == [f"checkpoint-{req.id()}"]

    # gc keeps what --resume could continue unless told; --dry-run removes nothing
    root = ["--out", str(tmp_path)]
    assert main(["artifacts", "gc", *root]) == 0
    assert _private(tmp_path)[".work"] == [f"checkpoint-{req.id()}"]
    assert main(["artifacts", "gc", "--interrupted", "--dry-run", *root]) == 0
    assert _private(tmp_path)[".work"] == [f"checkpoint-{req.id()}"]
    assert main(["artifacts", "gc", "--interrupted", *root]) == 0
    assert _private(tmp_path)[".work"] == []

    # the interrupted run, resumed, publishes without its working state and then drops it
    with pytest.raises(KeyboardInterrupt):
        store.build(req, interrupted, resumable=run)

    def finishes(out: Path) -> StageOutput:
        assert (out / "state" / "step-1").is_file()  # handed back
        (out / "model.txt").write_text("m")
        return StageOutput(stats={})

    art = store.build(req, finishes, resumable=run, resume=True)
    assert [f["path"] for f in art.manifest["files"]] == ["model.txt"]
    assert _private(tmp_path) == {".tmp": [], ".work": [], ".locks": []}


def test_an_interrupted_forced_rebuild_keeps_its_checkpoints_past_gc(tmp_path):
    """A --force'd (or stale-parent) rebuild of a published checkpoint, interrupted, holds the only
    copy of its training so far; its id being published, every sweep (gc, or the start of any other
    build on the root) deleted it as 'published since'."""
    store = Store(tmp_path)
    run = Resumable(family={"kind": "checkpoint", "examples": "e"}, scratch=("state",))
    req = Request(kind="checkpoint", name="p", stage_version=1, config={"a": 1})

    def finishes(out: Path) -> StageOutput:
        (out / "model.txt").write_text("m")
        return StageOutput(stats={})

    def interrupted(out: Path) -> StageOutput:
        (out / "state").mkdir(exist_ok=True)
        (out / "state" / "step-1").write_text("s")
        raise KeyboardInterrupt

    published = store.build(req, finishes, resumable=run)
    time.sleep(1.1)  # the rebuild starts in a later second than the copy finished
    with pytest.raises(KeyboardInterrupt):
        store.build(req, interrupted, resumable=run, force=True)
    assert _private(tmp_path)[".work"] == [f"checkpoint-{req.id()}"]
    store.build(Request(kind="corpus", name="other", stage_version=1, config={}), finishes)  # sweeps on start
    assert main(["artifacts", "gc", "--out", str(tmp_path)]) == 0
    assert _private(tmp_path)[".work"] == [f"checkpoint-{req.id()}"]  # kept, as any interrupted run
    assert store.build(req, finishes, resumable=run).path == published.path  # a plain build reuses the copy ...
    assert _private(tmp_path)[".work"] == [f"checkpoint-{req.id()}"]  # ... and leaves the rebuild's run
    assert store.verify(published) == []

    def resumes(out: Path) -> StageOutput:
        assert (out / "state" / "step-1").read_text() == "s"  # the interrupted rebuild's state, handed back
        return finishes(out)

    rebuilt = store.build(req, resumes, resumable=run, force=True, resume=True)
    assert rebuilt.manifest["provenance"]["finished"] >= published.manifest["provenance"]["finished"]
    assert _private(tmp_path)[".work"] == []
    # and an interrupted rebuild of a copy written since: left to --interrupted
    with pytest.raises(KeyboardInterrupt):
        store.build(req, interrupted, resumable=run, force=True)
    assert main(["artifacts", "gc", "--interrupted", "--out", str(tmp_path)]) == 0
    assert _private(tmp_path)[".work"] == []


def test_a_follower_rank_never_takes_a_damaged_copy_that_rank_0_rebuilds(tmp_path, monkeypatch, capsys):
    """Ranks after the first decide as rank 0 does: a damaged published copy (which rank 0 rebuilds)
    was returned to them at once, untrained, and rank 0 waited for them in the training's collectives;
    after training they wait for the copy rank 0 publishes, not the older one still in place."""
    from kolectra.pipeline.store import followers, workspace
    from kolectra.pipeline.store.manifest import ArtifactError

    store = Store(tmp_path)
    req = Request(kind="checkpoint", name="p", stage_version=1, config={"a": 1})
    art = store.build(req, _writes("m", []))
    capsys.readouterr()
    assert store._follow(req, _writes("x", []), force=False, rank=1).path == art.path  # intact: reused
    assert "reusing" not in capsys.readouterr().err  # quiet: rank 0 says it
    (art.path / "data" / "a.txt").write_text("damaged")
    time.sleep(0.05)
    workspace.Run(tmp_path / ".work" / f"checkpoint-{req.id()}").create({"kind": "checkpoint"})  # rank 0's rebuild
    wait = followers.wait_for
    monkeypatch.setattr(followers, "wait_for", lambda what, ready, rank, seconds=0: wait(what, ready, rank, 1.0))
    trained = []
    with pytest.raises(ArtifactError, match="waiting for rank 0 to publish"):
        store._follow(req, _writes("x", trained), force=False, rank=1)
    assert trained  # it trained beside rank 0, and did not take the damaged copy afterwards


def test_gc_removes_dead_leftovers_and_reports_them(tmp_path, capsys):
    for point in ("produced", "sealed"):  # the second build already sweeps the first one's leftovers
        assert child("toy", str(tmp_path), point, "--text", point).returncode == -signal.SIGKILL
    assert len(_private(tmp_path)[".tmp"]) == 1
    (tmp_path / ".locks" / "corpus-0123456789abcdef.lock").write_text(json.dumps({"pid": 1}))  # a dead holder's
    assert main(["artifacts", "gc", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    # the sealed build is complete: published, not removed (test_gc_publishes_a_complete_build_...)
    assert captured.out.count("removed ") == 1 and "corpus-0123456789abcdef.lock" in captured.out
    assert "publishing" in captured.err and len(_no_half_artifact(Store(tmp_path))) == 1
    assert _private(tmp_path) == {".tmp": [], ".work": [], ".locks": []}


def test_resume_finds_the_family_s_interrupted_run_unless_exact(tmp_path, capsys):
    store = Store(tmp_path)
    run = Resumable(family={"kind": "checkpoint", "examples": "e", "preset": "tiny"}, scratch=("state",))
    first = Request(kind="checkpoint", name="p", stage_version=1, config={"steps": 12})
    other = Request(kind="checkpoint", name="p", stage_version=1, config={"steps": 16})

    def interrupted(out: Path) -> StageOutput:
        (out / "state").mkdir()
        (out / "state" / "step-8").write_text(json.dumps({"steps": 12}))
        raise KeyboardInterrupt

    seen = []

    def finishes(out: Path) -> StageOutput:
        seen.append(sorted(p.name for p in (out / "state").iterdir()) if (out / "state").is_dir() else [])
        (out / "model.txt").write_text("m")
        return StageOutput(stats={})

    with pytest.raises(KeyboardInterrupt):
        store.build(first, interrupted, resumable=run)
    store.build(other, finishes, resumable=run, resume="exact")  # a study's points: only their own runs
    assert seen == [[]] and _private(tmp_path)[".work"] == [f"checkpoint-{first.id()}"]
    err = capsys.readouterr().err
    assert "1 interrupted run(s) of the same inputs kept" in err and "the newest with other settings" in err, err
    art = store.build(Request(kind="checkpoint", name="p", stage_version=1, config={"steps": 20}), finishes,
                      resumable=run, resume=True)  # --resume: the family's interrupted run, whatever changed
    assert seen[-1] == ["step-8"] and art.manifest["provenance"]["continued_from"]["request"] == first.id()
    assert _private(tmp_path) == {".tmp": [], ".work": [], ".locks": []}


def test_a_live_run_of_the_family_is_not_called_interrupted(tmp_path, capsys):
    from kolectra.pipeline.store import workspace

    store = Store(tmp_path)
    run = Resumable(family={"kind": "checkpoint", "examples": "e", "preset": "tiny"}, scratch=("state",))
    first = Request(kind="checkpoint", name="p", stage_version=1, config={"steps": 12})

    def interrupted(out: Path) -> StageOutput:
        (out / "state").mkdir()
        (out / "state" / "step-8").write_text("{}")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.build(first, interrupted, resumable=run)
    capsys.readouterr()
    other = Request(kind="checkpoint", name="p", stage_version=1, config={"steps": 16})
    with workspace.try_lock(tmp_path, "checkpoint", first.id()) as free:  # as if a process were training it now
        assert free
        store.build(other, lambda out: StageOutput(stats={}), resumable=run)
    assert "interrupted run(s)" not in capsys.readouterr().err
