"""Roots sharing a private area, seen from the root that links to the other's (b's ``.work`` a link to a's):
the owner's runs carry no root mark, and b must not take them for its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.store.artifacts import ArtifactError, Store
from kolectra.pipeline.store.workspace import Resumable
from tests.fault_child import toy_request
from tests.test_faults_private_areas import _shared_work
from tests.test_faults_publish import _no_half_artifact, _writes, child

FAMILY = Resumable({"kind": "corpus", "name": "toy"}, scratch=("ckpt",))


def _interrupted(root: Path, text: str = "same", step: str = "step 7") -> None:
    def stops(out: Path) -> StageOutput:
        (out / "ckpt").write_text(step)
        raise OSError("stopped")
    with pytest.raises(OSError):
        Store(root).build(toy_request(text), stops, resumable=FAMILY)


def _resumes(seen: list):
    def produce(out: Path) -> StageOutput:
        seen.append((out / "ckpt").read_text() if (out / "ckpt").is_file() else None)
        return _writes("resumed", [])(out)
    return produce


@pytest.mark.parametrize("resume", [False, True])
def test_a_build_of_a_root_linking_its_work_leaves_the_owning_roots_interrupted_run_alone(tmp_path, resume):
    """a's interrupted run (unmarked: a's .work is its own folder) in the .work b links to: b's plain build of the
    same request said 'discarding the interrupted run' and deleted a's checkpoint; b's --resume continued it and
    published it into b. Now both are refused in one line naming the folder and the way out; a's --resume
    continues it."""
    a, b = _shared_work(tmp_path)
    _interrupted(a)
    (run,) = (a / ".work").iterdir()
    seen = []
    with pytest.raises(ArtifactError, match=f"{run.name} is the run of this request of another root sharing .*"
                                            "names no root.*add \"root\": \"r[0-9a-f]{8}\""):
        Store(b).build(toy_request("same"), _resumes(seen), resumable=FAMILY, resume=resume)
    assert seen == [] and (run / "out" / "ckpt").read_text() == "step 7"
    assert Store(b).scan() == ([], [])
    Store(a).build(toy_request("same"), _resumes(seen), resumable=FAMILY, resume=True)
    assert seen == ["step 7"]


def test_a_build_of_a_root_linking_its_work_leaves_the_owning_roots_sealed_run_to_that_root(tmp_path):
    """a's resumable --force killed between its renames left its new build sealed in a/.work: b's build of the
    same request published it into b (a's gc then put back only the old copy). Now refused; a publishes it."""
    (a, b), calls = _shared_work(tmp_path), []
    assert child("toy", str(a), "none", "--resumable", "--text", "same").returncode == 0
    (first,) = _no_half_artifact(Store(a))
    time.sleep(1.1)
    assert child("toy", str(a), "old_moved", "--force", "--resumable", "--text", "same").returncode == -signal.SIGKILL
    run = a / ".work" / f"corpus-{first.id}"
    newer = json.loads((run / "out" / "manifest.json").read_text())
    with pytest.raises(ArtifactError, match="another root sharing"):
        Store(b).build(toy_request("same"), _writes("b's", calls), resumable=True)
    assert calls == [] and Store(b).find("corpus", first.id) is None
    art = Store(a).build(toy_request("same"), _writes("never built", calls), resumable=True)
    assert calls == [] and art.manifest == newer and Store(a).verify(art) == []


def test_a_resume_with_other_settings_continues_no_run_of_another_root_sharing_this_work(tmp_path, capsys):
    """--resume of a request with other settings continues the newest interrupted run of its family: in a .work
    roots share, it took another root's run (its checkpoint continued into this root, gone from that one). Now
    only this root's runs, either way round."""
    a, b = _shared_work(tmp_path)
    _interrupted(b, step="b's step 7")
    _interrupted(a, text="a's", step="a's step 3")
    seen = []
    Store(a).build(toy_request("other"), _resumes(seen), resumable=FAMILY, resume=True)
    assert seen == ["a's step 3"]
    Store(b).build(toy_request("more"), _resumes(seen), resumable=FAMILY, resume=True)  # a's run went
    assert seen == ["a's step 3", "b's step 7"]
    _interrupted(a, text="a's", step="a's step 4")
    Store(b).build(toy_request("again"), _resumes(seen), resumable=FAMILY, resume=True)
    assert seen[-1] is None, "b continued a's run"
    assert any((r / "out" / "ckpt").is_file() for r in (a / ".work").iterdir())


def _shared_tmp(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / ".tmp").mkdir(parents=True)
    b.mkdir()
    (b / ".tmp").symlink_to(a / ".tmp")
    return a, b


def test_a_root_moved_after_a_kill_publishes_its_complete_build_left_in_a_shared_tmp(tmp_path, capsys):
    """b's --force killed between its renames left its copies in the .tmp b links to, marked with a hash of b's
    real path; b then moved (renamed) to b2: b2's list said '(no artifacts ...)' and nothing else, its gc and a's
    left both copies there for ever (another root's mark to each). b keeps its mark in ROOT/.kolectra-root.json:
    b2's list names the copy, its gc publishes it; a copy of b2 beside it takes a mark of its own."""
    from kolectra.pipeline.cli import main

    a, b = _shared_tmp(tmp_path)
    assert child("toy", str(b), "none", "--text", "same").returncode == 0
    assert child("toy", str(b), "old_moved", "--force", "--text", "same").returncode == -signal.SIGKILL
    assert Store(b).scan() == ([], []) and len(list((a / ".tmp").iterdir())) == 2
    b2 = b.rename(tmp_path / "b2")
    capsys.readouterr()
    assert main(["artifacts", "list", "--out", str(b2)]) == 0
    assert "corpus/toy-" in capsys.readouterr().err
    assert main(["artifacts", "gc", "--out", str(b2)]) == 0
    assert "published " in capsys.readouterr().out
    (art,) = _no_half_artifact(Store(b2))
    assert art.manifest["config"] == {"text": "same"} and list((a / ".tmp").iterdir()) == []
    copy = tmp_path / "c"
    copy.mkdir()
    (copy / ".kolectra-root.json").write_text((b2 / ".kolectra-root.json").read_text())
    from kolectra.pipeline.store.shared_areas import mark
    assert mark(copy) != mark(b2) and mark(b2) == json.loads((b2 / ".kolectra-root.json").read_text())["mark"]


def test_a_root_moved_after_a_stop_resumes_its_run_in_a_shared_work(tmp_path):
    """b's interrupted run in the .work b links to names b's mark; b moved to b2: b2's --resume was refused as
    'the run of this request of another root' (its mark followed the new path). Now b2 continues it."""
    a, b = _shared_work(tmp_path)
    _interrupted(b, step="b's step 7")
    b2, seen = b.rename(tmp_path / "b2"), []
    Store(b2).build(toy_request("same"), _resumes(seen), resumable=FAMILY, resume=True)
    assert seen == ["b's step 7"]


def test_gc_of_the_root_owning_the_tmp_names_the_complete_builds_another_root_left_there(tmp_path, capsys):
    """b's --force killed between its renames left its copies in a's .tmp, and b was then deleted: nothing publishes
    or removes them (another root's mark), and a's gc said only '0 removed'. It now names each, whose root
    publishes it, and that one whose root is gone is deleted by hand."""
    from kolectra.pipeline.cli import main

    a, b = _shared_tmp(tmp_path)
    assert child("toy", str(b), "none", "--text", "same").returncode == 0
    assert child("toy", str(b), "old_moved", "--force", "--text", "same").returncode == -signal.SIGKILL
    left = sorted((a / ".tmp").iterdir())
    capsys.readouterr()
    assert main(["artifacts", "gc", "--out", str(a)]) == 0
    out = capsys.readouterr().out
    for d in left:
        assert f"kept {d}: a complete build of corpus/" in out and "another root sharing" in out, out
    assert "delete it by hand" in out and sorted((a / ".tmp").iterdir()) == left


def test_gc_names_another_roots_interrupted_run_in_this_work_as_that_roots(tmp_path, capsys):
    """b's interrupted run in a's .work: a's gc listed it 'kept interrupted run ...: --resume continues it', which
    a's --resume refuses (another root's run); it now names that root, from which --resume continues it."""
    from kolectra.pipeline.cli import main

    a, b = _shared_work(tmp_path)
    _interrupted(b)
    (run,) = (a / ".work").iterdir()
    capsys.readouterr()
    assert main(["artifacts", "gc", "--out", str(a)]) == 0
    out = capsys.readouterr().out
    assert f"kept interrupted run {run} " in out and "of another root sharing" in out, out
    assert "), from which --resume continues it; this root's gc leaves it, with --interrupted too" in out, out


def test_a_root_linking_its_work_to_a_scratch_folder_resumes_its_run_from_before_marks(tmp_path):
    """A .work linked to a scratch folder no root owns: a run this root made before 2026-12-02 names no root, and
    is this root's, resumed as before (only a run in another root's own .work is that root's)."""
    scratch, b = tmp_path / "scratch", tmp_path / "b"
    (scratch / ".work").mkdir(parents=True)
    b.mkdir()
    (b / ".work").symlink_to(scratch / ".work")
    _interrupted(b)
    (run,) = (scratch / ".work").iterdir()
    request = json.loads((run / "request.json").read_text())
    del request["root"]  # as a kolectra before 2026-12-02 wrote it
    (run / "request.json").write_text(json.dumps(request))
    seen = []
    Store(b).build(toy_request("same"), _resumes(seen), resumable=FAMILY, resume=True)
    assert seen == ["step 7"]


@pytest.fixture
def bound(tmp_path):
    """A folder seen at a second path (a bind mount: an NFS export mounted twice, a disk reached by autofs and by
    its mount point): the same root, which realpath cannot tell. Skipped where mounting is not allowed."""
    made = []

    def bind(src: Path, at: Path) -> Path:
        at.mkdir()
        if subprocess.run(["mount", "--bind", str(src), str(at)], capture_output=True).returncode != 0:
            pytest.skip("mount --bind is not allowed here")
        made.append(at)
        return at
    yield bind
    for at in made:
        subprocess.run(["umount", str(at)], capture_output=True)


def test_a_root_seen_at_a_second_path_is_the_same_root_not_a_copy(tmp_path, bound):
    """b's interrupted run in the .work it links to names b's mark; b seen at another path (a bind mount of the
    same folder): its mark was taken for a copy's (the file's path holds the same mark), so b's --resume there was
    refused as 'the run of this request of another root', and a build there rewrote b's mark for that path (b at
    its first path then took its own runs for another root's). Now the same folder is the same root."""
    a, b = tmp_path / "disk" / "a", tmp_path / "disk" / "b"
    (a / ".work").mkdir(parents=True)
    b.mkdir()
    (b / ".work").symlink_to(Path("..") / "a" / ".work")  # relative: the same folder at either path
    _interrupted(b, step="b's step 7")
    kept = (b / ".kolectra-root.json").read_text()
    view, seen = bound(tmp_path / "disk", tmp_path / "view") / "b", []
    Store(view).build(toy_request("same"), _resumes(seen), resumable=FAMILY, resume=True)
    assert seen == ["b's step 7"] and (b / ".kolectra-root.json").read_text() == kept


def test_gc_removes_a_half_written_root_mark_a_kill_left_once_an_hour_old(tmp_path, capsys):
    """A kill while a root kept its mark left ROOT/.kolectra-root.json.<hex>.part, which nothing removed nor listed
    (gc: '0 removed', for ever). gc now removes one an hour old and says so; a fresh one (being written) is kept,
    and the mark itself."""
    from kolectra.pipeline.cli import main

    a, b = _shared_tmp(tmp_path)
    Store(b).build(toy_request("same"), _writes("b's", []))
    old, fresh = b / ".kolectra-root.json.0badf00d.part", b / ".kolectra-root.json.1badf00d.part"
    for f in (old, fresh):
        f.write_text('{"mark": "r0bad')
    os.utime(old, (os.path.getmtime(old) - 7200,) * 2)
    assert main(["artifacts", "gc", "--dry-run", "--out", str(b)]) == 0
    assert f"would remove {old}\n" in capsys.readouterr().out and old.is_file()
    assert main(["artifacts", "gc", "--out", str(b)]) == 0
    assert f"removed {old}\n" in capsys.readouterr().out
    assert not old.exists() and fresh.is_file() and (b / ".kolectra-root.json").is_file()


def test_two_first_builds_at_once_at_two_paths_of_a_root_keep_one_mark(tmp_path, bound, monkeypatch):
    """Two processes' first builds in a root at once, one at each of its two paths (a bind mount, an NFS export
    mounted twice): each found no ROOT/.kolectra-root.json and took the hash of its own path, and the later one
    wrote its own over the other's, whose build (named with the first mark) was then another root's to it. The
    one that finds the file written since keeps the mark written there."""
    from kolectra.pipeline.store import shared_areas

    disk = tmp_path / "disk"
    (disk / "a").mkdir(parents=True)
    view = bound(disk, tmp_path / "view") / "a"
    looked = shared_areas.mark

    def then_the_other_writes(root):
        found = looked(root)
        if not first:  # the other process, at the first path, claims now
            first.append(None)
            first[0] = shared_areas.claim(disk / "a")
        return found
    first = []
    monkeypatch.setattr(shared_areas, "mark", then_the_other_writes)
    assert shared_areas.claim(view) == first[0] and looked(disk / "a") == first[0] == looked(view)
