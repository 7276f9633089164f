"""``kolectra artifacts gc`` of the root whose own folder a ``.work`` is, another root (b) linking its ``.work`` to it:
b's runs there (marked with b's root in their request.json) are b's, whatever a's gc is asked. Only a's gc sweeps that
folder (b's says its .work is a symlink, not swept), so a's gc --interrupted is the one that could lose them."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.fault_child import toy_request
from tests.faults_publish_support import _no_half_artifact, _writes, child
from tests.test_faults_private_areas import _shared_work


def _gc(root: Path, capsys, *flags: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["artifacts", "gc", "--out", str(root), *flags]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def _read(seen: list):
    def produce(out: Path) -> StageOutput:
        seen.append((out / "data" / "a.txt").read_text() if (out / "data" / "a.txt").is_file() else None)
        (out / "data").mkdir(exist_ok=True)
        (out / "data" / "a.txt").write_text("resumed")
        return StageOutput(stats={"n": 7})
    return produce


def test_gc_interrupted_of_the_root_owning_the_work_leaves_another_roots_interrupted_run(tmp_path, capsys):
    """b's build killed (kill -9) in its stage, its run kept in a's .work for b's --resume: a's `gc --interrupted`
    deleted it ('removed .../corpus-<id>', '1 removed, 0 interrupted run(s) kept'), b's --resume then started afresh.
    Now kept and counted, named as b's in one line; a's own interrupted run still goes."""
    a, b = _shared_work(tmp_path)
    assert child("toy", str(b), "produced", "--resumable", "--text", "b's").returncode == -signal.SIGKILL
    (theirs,) = (a / ".work").iterdir()
    assert child("toy", str(a), "produced", "--resumable", "--text", "a's").returncode == -signal.SIGKILL
    (ours,) = set((a / ".work").iterdir()) - {theirs}
    out, err = _gc(a, capsys, "--interrupted")
    assert f"removed {ours}" in out and not ours.exists(), out
    assert f"removed {theirs}" not in out and (theirs / "out" / "data" / "a.txt").read_text() == "b's", out
    made = json.loads((theirs / "request.json").read_text())["root"]
    (line,) = [x for x in out.splitlines() if str(theirs) in x]
    assert line.startswith(f"kept interrupted run {theirs} (toy, ") and f"names root {made}), from which --resume" in line
    assert "this root's gc leaves it, with --interrupted too" in line and "gc --interrupted removes it" not in line
    assert "1 interrupted run(s) kept" in err, err
    seen: list = []
    Store(b).build(toy_request("b's"), _read(seen), resumable=True, resume=True)
    assert seen == ["b's"], "b's interrupted run was lost"


def test_gc_interrupted_leaves_another_roots_sealed_build_to_that_root(tmp_path, capsys):
    """b's resumable --force killed between its renames left its new build sealed in its run in a's .work: a's
    `gc --interrupted` deleted it (b's rebuild gone, its old copy put back). Now kept; b's next build publishes it."""
    (a, b), calls = _shared_work(tmp_path), []
    assert child("toy", str(b), "none", "--resumable", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(b))
    time.sleep(1.1)
    assert child("toy", str(b), "old_moved", "--force", "--resumable", "--text", "same").returncode == -signal.SIGKILL
    run = a / ".work" / f"corpus-{first.id}"
    newer = json.loads((run / "out" / "manifest.json").read_text())
    out, err = _gc(a, capsys, "--interrupted")
    assert f"removed {run}" not in out and (run / "out" / "manifest.json").is_file(), out
    assert f"kept interrupted run {run} " in out and "1 interrupted run(s) kept" in err, (out, err)
    art = Store(b).build(toy_request("same"), _writes("never built", calls), resumable=True)
    assert calls == [] and art.manifest == newer and Store(b).verify(art) == []


def test_gc_of_a_root_that_published_the_same_id_since_leaves_another_roots_run(tmp_path, capsys):
    """A run is dead once its id was published after it started, but a's copy is not b's: a's plain gc (and the
    sweep of each of a's builds) deleted b's interrupted run once a held a copy of that id newer than it. Now kept."""
    a, b = _shared_work(tmp_path)
    assert child("toy", str(b), "produced", "--resumable", "--text", "same").returncode == -signal.SIGKILL
    (run,) = (a / ".work").iterdir()
    art = Store(a).build(toy_request("same"), _writes("same", []))  # a's own copy of the id, built in .tmp
    later = (run / "request.json").stat().st_mtime + 5  # written after b's run started (or by a clock ahead)
    os.utime(art.path / "manifest.json", (later, later))
    out, err = _gc(a, capsys)
    assert (run / "out" / "data" / "a.txt").read_text() == "same" and f"kept interrupted run {run} " in out, out
    assert "from which --resume continues it;" in out, out  # (a's copy is not b's: not --force --resume)
    Store(a).build(toy_request("same"), _writes("never built", []))  # a's sweep at the start of a build: the same
    assert (run / "out" / "data" / "a.txt").is_file()


def test_gc_interrupted_never_removes_a_run_in_progress_of_either_root(tmp_path, capsys):
    """A run whose builder is alive (b's in the .work it shares with a, and a's own) holds its build lock: a's
    `gc --interrupted` leaves both, names neither as kept, and both builds then publish."""
    a, b = _shared_work(tmp_path)
    go = tmp_path / "go"
    builds = [child("toy", str(r), "none", "--resumable", "--hold", str(go), "--text", t, wait=False)
              for r, t in ((b, "b's"), (a, "a's"))]
    deadline = time.time() + 60
    while len([r for r in (a / ".work").iterdir() if (r / "out" / "data" / "a.txt").is_file()]) < 2:
        assert time.time() < deadline and all(p.poll() is None for p in builds), "the builds did not start"
        time.sleep(0.05)
    live = sorted((a / ".work").iterdir())
    out, err = _gc(a, capsys, "--interrupted")
    assert all(str(r) not in out for r in live) and "0 interrupted run(s) kept" in err, (out, err)
    assert all((r / "out" / "data" / "a.txt").is_file() for r in live)
    go.write_text("go")
    for p in builds:
        assert p.wait(timeout=60) == 0, p.stderr.read()
    assert [x.manifest["stats"] for x in _no_half_artifact(Store(b)) + _no_half_artifact(Store(a))] == [
        {"n": 3}, {"n": 3}]
