"""A disk root whose ``.tmp`` or ``.work`` is a link to another file system (docs/artifacts.md: a private area
that is a symlink is used): a build is published by renaming it from there into the root, which cannot cross
file systems. The build ran its whole stage (a pretraining: every step) and only then failed on the rename
(``OSError: [Errno 18] Invalid cross-device link``; a resumable run kept its checkpoints, and ``--resume`` met
the same rename again). It is now refused before the stage runs, in one line naming the area and the way out.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli.errors import describe
from kolectra.pipeline.store.artifacts import ArtifactError, Resumable, Store
from kolectra.pipeline.store.request import Request

OTHER = Path("/dev/shm")  # a tmpfs: another file system than the test's folder


@pytest.fixture
def elsewhere(tmp_path):
    """A folder on another file system than ``tmp_path``."""
    if not OTHER.is_dir() or not os.access(OTHER, os.W_OK) or os.stat(OTHER).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip(f"{OTHER} is not another writable file system here")
    d = OTHER / f"kolectra-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    yield d
    import shutil
    shutil.rmtree(d, ignore_errors=True)


def _writes(calls: list):
    def produce(out: Path) -> StageOutput:
        calls.append(out)
        (out / "data").mkdir(parents=True, exist_ok=True)
        (out / "data" / "a.txt").write_text("x")
        return StageOutput(stats={})
    return produce


@pytest.mark.parametrize("area", [".tmp", ".work"])
def test_a_private_area_on_another_file_system_is_refused_before_the_stage_runs(tmp_path, elsewhere, area):
    root = tmp_path / "root"
    root.mkdir()
    (elsewhere / area).mkdir()
    (root / area).symlink_to(elsewhere / area)
    calls: list = []
    req = Request(kind="checkpoint" if area == ".work" else "corpus", name="a", stage_version=1, config={})
    resumable = Resumable({"kind": req.kind}, scratch=("checkpoints",)) if area == ".work" else False
    with pytest.raises(ArtifactError) as e:  # before: OSError EXDEV, after the stage ran
        Store(root).build(req, _writes(calls), resumable=resumable)
    assert calls == [], "the stage ran, then its build could not be published"
    line = describe(e.value)
    assert f"{root / area} is on another file system (or mount) than {root} (it leads to {elsewhere / area})" in line
    assert "cannot cross file systems" in line and f"make {area} a folder of {root}" in line, line
    assert Store(root).list() == [] and not any((root / area).iterdir())


def test_a_private_area_linked_on_the_same_file_system_still_builds(tmp_path):
    """The documented case: a ``.tmp`` (or ``.work``) that is a link to a folder on the root's file system."""
    root, shared = tmp_path / "root", tmp_path / "shared"
    root.mkdir()
    for area in (".tmp", ".work"):
        (shared / area).mkdir(parents=True)
        (root / area).symlink_to(shared / area)
    store, calls = Store(root), []
    built = store.build(Request(kind="corpus", name="a", stage_version=1, config={}), _writes(calls))
    again = store.build(Request(kind="corpus", name="a", stage_version=1, config={}), _writes(calls), force=True)
    run = store.build(Request(kind="checkpoint", name="c", stage_version=1, config={}), _writes(calls),
                      resumable=Resumable({"kind": "checkpoint"}, scratch=("checkpoints",)))
    assert len(calls) == 3 and again.path == built.path and store.verify(built) == [] and store.verify(run) == []
    assert not any((shared / ".tmp").iterdir()) and not any((shared / ".work").iterdir())
    # (.kolectra-root.json: the mark a root keeps when it marks its builds in a private area that is a link)
    assert sorted(p.name for p in root.iterdir()) == [".kolectra-root.json", ".locks", ".tmp", ".work", "checkpoint",
                                                      "corpus"]


@pytest.fixture
def mounted_kind(tmp_path, elsewhere):
    """``ROOT/corpus`` a mount point of another file system (a bind mount of a folder on ``elsewhere``)."""
    import subprocess

    root = tmp_path / "root"
    (root / "corpus").mkdir(parents=True)
    if subprocess.run(["mount", "--bind", str(elsewhere), str(root / "corpus")], capture_output=True).returncode:
        pytest.skip("no bind mount here (not root)")
    yield root
    subprocess.run(["umount", str(root / "corpus")], check=True)


def test_a_kind_folder_that_is_a_mount_of_another_file_system_is_refused_before_the_stage_runs(mounted_kind):
    """``ROOT/<kind>`` a disk mounted there (a big disk for checkpoints): the private areas were on the root's file
    system, so the check passed, and the build ran its whole stage, then failed on ``Invalid cross-device link`` as it
    was renamed into ``ROOT/<kind>`` (z9). It is refused before the stage runs, naming the folder and the way out."""
    root, calls = mounted_kind, []
    for made in (False, True):  # a fresh root (no .tmp yet), then one built in before
        with pytest.raises(ArtifactError) as e:
            Store(root).build(Request(kind="corpus", name="a", stage_version=1, config={}), _writes(calls))
        assert calls == [], "the stage ran, then its build could not be published"
        line = describe(e.value)
        assert f"{root / 'corpus'} is another file system (or mount) than {root}: a build is published" in line, line
        assert "mount the disk at the root instead (--out on it)" in line
        assert not any((root / "corpus").iterdir()) and not any(p.name.startswith(".kolectra") for p in root.iterdir())
        (root / ".tmp").mkdir(exist_ok=made)


def test_a_kind_folder_on_the_root_s_file_system_builds_and_a_probe_a_kill_left_there_is_removed(tmp_path):
    """The probe that finds a mount at ``ROOT/<kind>`` renames an empty folder into it: one a kill left there (which
    ``kolectra artifacts list`` names as an incomplete artifact) is removed by the next build's check."""
    root, calls = tmp_path / "root", []
    (root / "corpus" / ".kolectra-rename-0badf00d").mkdir(parents=True)
    (root / ".tmp").mkdir()  # a root built in before (the probe runs where the area is)
    built = Store(root).build(Request(kind="corpus", name="a", stage_version=1, config={}), _writes(calls))
    assert len(calls) == 1 and sorted(p.name for p in (root / "corpus").iterdir()) == [built.path.name]


def test_a_probe_in_a_kind_folder_is_not_listed_as_an_incomplete_artifact(tmp_path, capsys):
    """The probe is renamed into ``ROOT/<kind>`` for an instant (another process's ``kolectra artifacts list`` may
    look then) and a kill may leave it there until the next build of that kind: ``list`` said 'skipped:
    ROOT/corpus/.kolectra-rename-.../manifest.json: missing (incomplete artifact)' of it."""
    from kolectra.pipeline.cli import main

    root, calls = tmp_path / "root", []
    built = Store(root).build(Request(kind="corpus", name="a", stage_version=1, config={}), _writes(calls))
    (root / "corpus" / ".kolectra-rename-0badf00d").mkdir()
    assert Store(root).scan()[1] == []
    assert main(["artifacts", "list", "--out", str(root)]) == 0
    out = capsys.readouterr()
    assert "skipped" not in out.out + out.err and built.path.name in out.out, out


def test_gc_removes_an_empty_probe_a_kill_left_in_the_root_or_its_tmp_once_an_hour_old(tmp_path, capsys):
    """A kill between the probe's renames leaves its empty folder in ``ROOT/.tmp`` or ``ROOT`` itself: no build's
    name, so it was never removed nor listed (gc: '0 removed', every time). gc now removes one an hour old and says
    so, as of other leftovers; a fresh one (a check running now) and one holding anything are kept."""
    from kolectra.pipeline.cli import main

    root = tmp_path / "root"
    Store(root).build(Request(kind="corpus", name="a", stage_version=1, config={}), _writes([]))
    old = [root / ".kolectra-rename-0badf00d", root / ".tmp" / ".kolectra-rename-1badf00d",
           root / "corpus" / ".kolectra-rename-2badf00d"]
    fresh, full = root / ".kolectra-rename-3badf00d", root / ".kolectra-rename-4badf00d"
    for d in [*old, fresh, full]:
        d.mkdir()
    (full / "x").write_text("not the probe's")
    for d in [*old, full]:
        os.utime(d, (os.path.getmtime(d) - 7200,) * 2)
    assert main(["artifacts", "gc", "--dry-run", "--out", str(root)]) == 0
    out = capsys.readouterr()
    assert all(f"would remove {d}\n" in out.out for d in old) and all(d.is_dir() for d in old), out
    assert main(["artifacts", "gc", "--out", str(root)]) == 0
    out = capsys.readouterr()
    assert all(f"removed {d}\n" in out.out for d in old) and "3 removed" in out.err, out
    assert not any(d.exists() for d in old) and fresh.is_dir() and (full / "x").is_file()


@pytest.mark.parametrize("area", [".tmp", ".work"])
def test_a_private_area_linked_to_nothing_is_one_line_naming_the_link(tmp_path, area):
    """A root whose ``.tmp`` is a relative link, moved elsewhere (or whose link's folder was deleted): the build
    failed with '/root/.tmp: File exists'. Now one line naming the link, where it leads and the way out."""
    root, calls = tmp_path / "moved", []
    root.mkdir()
    (root / area).symlink_to(Path("..") / "gone" / area)
    resumable = Resumable({"kind": "checkpoint"}, scratch=("checkpoints",)) if area == ".work" else False
    with pytest.raises(ArtifactError, match=rf"{area} is a link to \.\./gone/{area}, which is not there .*remove it"):
        Store(root).build(Request(kind="checkpoint", name="c", stage_version=1, config={}), _writes(calls),
                          resumable=resumable)
    assert calls == []
