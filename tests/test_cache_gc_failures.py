"""``kolectra artifacts gc --cache`` where a copy cannot be looked at or removed whole, and on NFS.

Before: ``--dry-run`` opened each lock file read-only, and on NFS (whose ``flock`` is a byte-range lock, which
needs a writable fd) it ended at the first copy with ``Bad file descriptor``; a copy that could not be removed
whole (a permission part way) was counted as freed in full and the command said ``removed`` and exit 0; a lock
file it could not open ended the command with one error line and none of what it had already removed.

Copies are laid out by hand as the store's ``local`` lays them (tests/test_cache_gc.py reads them from a bucket);
an undeletable file is a real one (``chattr +i`` as root, a read-only folder otherwise)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from kolectra.pipeline.cli import main
from kolectra.pipeline.store import copies

DAY = 86400
_flock = fcntl.flock


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


def _copy(tmp_path: Path, name: str, days: float = 30, lock: bool = True) -> Path:
    """A copy read ``days`` ago: 3 shards of 100 kB, one in ``hf/``, its manifest and lock file."""
    d = tmp_path / "cache" / "artifacts" / "corpus" / f"{name}-0123456789abcdef-0123456789ab"
    (d / "hf").mkdir(parents=True)
    for f in ("shard-0.bin", "shard-1.bin", "hf/model.bin"):
        (d / f).write_bytes(b"x" * 100_000)
    (d / "manifest.json").write_text("{}")
    if lock:
        copies.lock_of(d).write_text("")
    then = time.time() - days * DAY
    for p in (d, d / "hf", d / "manifest.json", copies.lock_of(d)):
        if p.exists():
            os.utime(p, (then, then))
    return d


@contextlib.contextmanager
def _frozen(path: Path):
    """``path`` that nothing may delete from (a folder) or open for writing (a file), as another user's is."""
    if os.geteuid() == 0:
        # no chattr (a slim image), or a file system without the attribute (tmpfs, overlayfs): root deletes anyway
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("root, and no chattr here to make a file undeletable")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        return
    mode = path.stat().st_mode
    path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield
    finally:
        path.chmod(mode)


def _gc(capsys, tmp_path, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["artifacts", "gc", "--cache", *args, "--out", str(tmp_path / "root")])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_dry_run_takes_the_lock_as_nfs_allows_and_sees_a_reader_that_came_meanwhile(tmp_path, capsys, monkeypatch):
    idle, read = _copy(tmp_path, "idle"), _copy(tmp_path, "read")
    readers: list[int] = []

    def nfs_flock(fd, op):
        """NFS's flock: an exclusive lock on an fd opened read-only fails (EBADF). And as the dry run takes
        ``read``'s lock, a pruner deletes that lock file and a reader locks a new one (held to the end)."""
        if op & fcntl.LOCK_EX and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        lock = copies.lock_of(read)
        if op & fcntl.LOCK_EX and not readers and os.fstat(fd).st_ino == os.stat(lock).st_ino:
            lock.unlink()
            readers.append(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644))
            _flock(readers[0], fcntl.LOCK_SH)
        return _flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", nfs_flock)
    try:
        code, out, err = _gc(capsys, tmp_path, "--dry-run")
    finally:
        for fd in readers:
            os.close(fd)
    assert code == 0, err
    assert f"would remove {idle} (300.0 kB)" in out, out
    assert f"kept {read}: in use by a running kolectra process" in out, out
    assert "1 would remove (300.0 kB would be freed), 1 kept in use" in err, err
    assert idle.is_dir() and read.is_dir()


def test_a_copy_not_removed_whole_is_said_with_what_it_freed_and_found_again_once_mended(tmp_path, capsys):
    stuck, other = _copy(tmp_path, "stuck"), _copy(tmp_path, "other")
    with _frozen(stuck / "hf"):
        code, out, err = _gc(capsys, tmp_path, "--older-than", "7")
    assert code == 2, (out, err)  # a permission: the operating system's exit (docs/artifacts.md)
    assert f"removed {other} (300.0 kB)" in out and not other.exists(), out
    assert f"removed {stuck}" not in out, out
    line = next(ln for ln in err.splitlines() if ln.startswith(f"could not remove {stuck}: "))
    assert str(stuck / "hf") in line and "(200.0 kB freed, 100.0 kB left)" in line, line
    assert (stuck / "hf" / "model.bin").is_file() and not (stuck / "shard-0.bin").exists()
    assert "1 removed (500.0 kB freed), 0 kept in use, 1 could not be removed (above)" in err, err
    # mended, the same command finds it again: its last use is still 30 days ago (its lock and times kept)
    code, out, err = _gc(capsys, tmp_path, "--older-than", "7")
    assert code == 0 and f"removed {stuck} (100.0 kB)" in out and not stuck.exists(), (out, err)
    assert not copies.lock_of(stuck).exists()


def test_a_copy_read_before_reader_locks_not_removed_whole_is_found_again_by_the_same_older_than(tmp_path, capsys):
    """A copy made before 2026-12-02 has no lock file: the one the pruner made to claim it was kept with what was
    left, dated now, and hid it from the same ``--older-than`` for that many days once mended."""
    stuck = _copy(tmp_path, "stuck", lock=False)
    with _frozen(stuck / "hf"):
        code, _, err = _gc(capsys, tmp_path, "--older-than", "7")
    assert code == 2 and f"could not remove {stuck}: " in err, err
    assert not copies.lock_of(stuck).exists()  # as before the pruner came: its last use is still 30 days ago
    code, out, err = _gc(capsys, tmp_path, "--older-than", "7")
    assert code == 0 and f"removed {stuck} (100.0 kB)" in out and not stuck.exists(), (out, err)


def test_a_lock_file_that_cannot_be_opened_is_said_and_the_rest_pruned(tmp_path, capsys):
    theirs, mine = _copy(tmp_path, "theirs"), _copy(tmp_path, "mine")
    with _frozen(copies.lock_of(theirs)):
        code, dry_out, dry_err = _gc(capsys, tmp_path, "--dry-run")
        assert code == 2 and f"would remove {mine} (300.0 kB)" in dry_out, (dry_out, dry_err)
        assert f"could not prune {theirs}: " in dry_err and str(copies.lock_of(theirs)) in dry_err, dry_err
        code, out, err = _gc(capsys, tmp_path)
    assert code == 2, (out, err)
    assert f"removed {mine} (300.0 kB)" in out and not mine.exists(), out
    assert f"could not remove {theirs}: " in err and theirs.is_dir(), err
    assert "1 removed (300.0 kB freed), 0 kept in use, 1 could not be removed (above)" in err, err


def test_a_linked_artifacts_folder_is_said_not_pruned_and_a_time_ahead_of_the_clock_is_pruned(tmp_path, capsys):
    """Before: copies read through a linked ``artifacts/`` (moved to a bigger disk) were passed over in silence
    (``0 removed``), and a copy whose last use was ahead of this machine's clock (a clock set back, a network
    file system's server time) was kept by ``--cache`` alone, which removes whatever no process reads."""
    ahead = _copy(tmp_path, "ahead")
    then = time.time() + 3600
    for p in (ahead, ahead / "manifest.json", copies.lock_of(ahead)):
        os.utime(p, (then, then))
    moved = tmp_path / "scratch" / "examples"
    moved.mkdir(parents=True)
    linked = tmp_path / "cache" / "artifacts" / "examples"
    linked.symlink_to(moved)
    inside = moved / "ex-0123456789abcdef-0123456789ab"
    inside.mkdir()
    (inside / "shard-0.bin").write_bytes(b"x")
    code, out, err = _gc(capsys, tmp_path)
    assert code == 0, err
    assert f"removed {ahead} (300.0 kB)" in out and not ahead.exists(), out
    assert f"{linked} is a symlink (to {moved}): not pruned" in err, err
    assert (inside / "shard-0.bin").is_file()
