"""Whether a build directory is live (a process holds its build lock), on NFS.

NFS emulates ``flock`` as a byte-range lock of the whole file, and an exclusive one needs an fd open for writing
(flock(2), NOTES): ``workspace.live`` opened the lock read-only and asked for an exclusive lock, so on an NFS root
with any ``.tmp`` entry ``kolectra artifacts gc`` (and ``artifacts list``, and the next build of a request a kill
left in ``.tmp``) ended in ``internal error: OSError: [Errno 9] Bad file descriptor``. A shared lock answers the
same question (a builder holds its lock exclusively) on a read-only fd, so a root that cannot be written is still read.
The NFS rule is played by ``fcntl.flock`` as tests/test_cache_gc_failures.py plays it; the locks are real."""

from __future__ import annotations

import errno
import fcntl
import os

import pytest

from kolectra.pipeline.cli import main
from kolectra.pipeline.store import workspace
from kolectra.pipeline.store.manifest import BUILD_LOCK

_flock = fcntl.flock


@pytest.fixture(autouse=True)
def _nfs(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))

    def nfs_flock(fd, op):
        if op & fcntl.LOCK_EX and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        return _flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", nfs_flock)


def _entry(root, name: str = "corpus-0123456789abcdef-0a1b2c3d"):
    d = root / ".tmp" / name
    d.mkdir(parents=True)
    (d / BUILD_LOCK).write_text("")
    return d


def test_a_build_directory_held_by_a_builder_is_live_and_one_let_go_is_not(tmp_path):
    d = _entry(tmp_path / "root")
    assert not workspace.live(d)
    fd = workspace.take_build_lock(d)  # as a builder holds it (another open file: flock's locks conflict)
    assert fd is not None
    try:
        assert workspace.live(d)
    finally:
        os.close(fd)
    assert not workspace.live(d)


def test_gc_of_a_root_with_a_killed_builds_leftover_ends_in_its_result_not_an_internal_error(tmp_path, capsys):
    root = tmp_path / "root"
    d = _entry(root)
    code = main(["artifacts", "gc", "--dry-run", "--out", str(root)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Bad file descriptor" not in err and f"would remove {d}" in out, (out, err)
    code = main(["artifacts", "gc", "--out", str(root)])
    out, err = capsys.readouterr()
    assert code == 0 and f"removed {d}" in out and not d.exists(), (out, err)


def test_a_root_mark_naming_a_path_no_file_system_takes_is_read_as_a_root_moved(tmp_path):
    """``ROOT/.kolectra-root.json`` (c072f63) is read back as it was written, but a root from elsewhere (a copy, a
    download) may hold any text there: a path with a NUL byte, which no file system takes, ended every look at a
    marked build in ``ValueError: embedded null byte`` (os.path.samefile), where a path that is not there reads as
    a root moved since. (Here beside the other lock-file reads of a shared area.)"""
    from kolectra.pipeline.store import shared_areas

    root = tmp_path / "root"
    root.mkdir()
    (root / shared_areas.ROOT_MARK).write_text('{"mark": "r12345678", "path": "/a\\u0000b"}\n', encoding="utf-8")
    assert shared_areas.mark(root) == "r12345678"  # kept, as a root moved keeps its mark
