"""This machine's copies of what stages read (``$KOLECTRA_CACHE``), held while read and pruned by last use.

A stage on a store root reads a parent from a local copy, ``$KOLECTRA_CACHE/artifacts/<kind>/<name>-<id>-<digest12>/``
(:meth:`kolectra.pipeline.store.remote.RemoteStore.local`), for as long as it runs: pretraining streams the
examples shards for hours. Fine-tuning keeps tokenised splits in ``<root's folder>/.cache/finetune/``. Nothing
removed either, and the disk filled with copies of parents rebuilt since (another digest, a copy beside the old).

The reader's lock: a process that reads a copy holds a shared ``flock`` on ``<copy>.lock`` beside it from
before it downloads anything until the process ends (:func:`hold`; the kernel drops it however the process
dies). To the process's end, not the stage's: a command's copies are read by lambdas, dataloader workers and
later stages of the same ``kolectra run``, and nothing of the store marks where each read ends. A fine-tuning
holds ``finetune.lock`` beside its cache folder while it trains (:func:`reading`). Each hold and a normal exit
touch the lock file: its time is the copy's last use (a copy made before the lock existed: its
``manifest.json``, which every read rewrites).

The pruner (:func:`prune`, ``kolectra artifacts gc --cache``) takes the lock exclusive without waiting, skips a
copy it cannot take (in use), deletes the copy, then the lock file while still holding it: a reader that waited
on that inode sees it gone and locks a fresh file (inode check), before it creates and downloads the copy
again. A copy is only a copy: the store keeps the artifact, and the next read downloads it again, every file
hashed against its manifest. A kolectra older than this module takes no reader lock: prune while none runs.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import re
import shutil
import time
from pathlib import Path
from typing import NamedTuple

from kolectra.pipeline.store.manifest import MANIFEST
from kolectra.pipeline.store.workspace import LOCKS, release_flock, try_flock

ARTIFACTS = "artifacts"  # $KOLECTRA_CACHE/artifacts/<kind>/<name>-<id>-<digest12>/
ROOTS = "roots"  # $KOLECTRA_CACHE/roots/<hash of ROOT>/ (remote_runs.StoreRuns._local_root)
FINETUNE = Path(".cache") / "finetune"  # a root's tokenised splits (Store.cache_dir("finetune"))
COPY_NAME = re.compile(r"^.+-[0-9a-f]{16}-[0-9a-f]{12}$")
LOCK = ".lock"

_held: dict[Path, int] = {}  # lock file -> the fd holding its shared flock in this process


class Removed(NamedTuple):
    path: Path
    bytes: int


def lock_of(d: Path) -> Path:
    """The reader lock of copy or cache folder ``d``: beside it, so deleting ``d`` leaves it to unlink last."""
    return d.with_name(d.name + LOCK)


def hold(d: Path) -> None:
    """Hold ``d``'s reader lock (shared) until this process ends, and record this use. Waits while a pruner
    holds it (only while it deletes ``d``); a lock file a pruner unlinked meanwhile is taken afresh."""
    path = lock_of(Path(d))
    _forget_gone()
    fd = _held.get(path)
    if fd is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                if _same(fd, path):
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # a pruner deleted the file while this one waited: lock the new one
        _held[path] = fd
    with contextlib.suppress(OSError):
        os.utime(fd)  # its last use: what `gc --cache --older-than` reads


@contextlib.contextmanager
def reading(d: Path):
    """:func:`hold` for the block only (a stage that knows where its reading ends: a fine-tuning's cache), unless
    this process held it before."""
    path = lock_of(Path(d))
    had = path in _held
    hold(d)
    try:
        yield
    finally:
        if not had and (fd := _held.pop(path, None)) is not None:
            with contextlib.suppress(OSError):
                os.utime(fd)
            os.close(fd)


def _same(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _forget_gone() -> None:
    """Let go the locks whose file is no longer the one held (its cache deleted by hand, a test's folder):
    they protect nothing, and a long process reading many caches would keep their fds open."""
    for path, fd in list(_held.items()):
        if not _same(fd, path):
            os.close(fd)
            del _held[path]


@atexit.register
def _used_until_now() -> None:
    """A copy read for days was last used when its reader ended, not when it began."""
    for fd in _held.values():
        with contextlib.suppress(OSError):
            os.utime(fd)


# ---- pruning ------------------------------------------------------------------------------------
@contextlib.contextmanager
def _claimed(d: Path, dry_run: bool):
    """Whether no process reads ``d``, held while the caller deletes it (``dry_run``: looked at only, no
    lock file created)."""
    path = lock_of(d)
    if dry_run:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            yield True
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            yield True
        except BlockingIOError:
            yield False
        finally:
            os.close(fd)
        return
    fd = try_flock(path, wait=False)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            release_flock(path, fd)  # unlinked while held, once the copy is gone


def _mtime(p: Path) -> float:
    try:
        return p.lstat().st_mtime
    except OSError:
        return 0.0


def _bytes(f: Path) -> int:
    try:
        return f.lstat().st_size
    except OSError:
        return 0


def _size(d: Path) -> int:
    total = 0
    for top, _, files in os.walk(d):  # symlinks not followed: what lies elsewhere is not freed
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, f)).st_size
    return total


def _dirs(folder: Path) -> list[Path]:
    """Real folders under ``folder`` (a symlink leads out of the cache: nothing is deleted there)."""
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())


def prune(cache: Path, older_than_s: float = 0.0, dry_run: bool = False, also: tuple[Path, ...] = ()
          ) -> tuple[list[Removed], list[Path]]:
    """Remove from ``cache`` what no process reads and none used within ``older_than_s`` seconds: copies of
    artifacts, fine-tuning cache files (of every root's folder there, and the ``also`` folders: a disk root's
    ``ROOT/.cache/finetune``), and unheld lock files. Returns (what was removed with its bytes, what is in use)."""
    cutoff = time.time() - older_than_s
    removed: list[Removed] = []
    in_use: list[Path] = []
    for kind in _dirs(cache / ARTIFACTS):
        for d in _dirs(kind):
            if not COPY_NAME.match(d.name):
                continue  # not a copy kolectra made: left alone
            if max(_mtime(lock_of(d)), _mtime(d / MANIFEST), _mtime(d)) > cutoff:
                continue
            with _claimed(d, dry_run) as free:
                if not free:
                    in_use.append(d)
                    continue
                removed.append(Removed(d, _size(d)))
                if not dry_run:
                    shutil.rmtree(d, ignore_errors=True)
        for f in sorted(kind.glob(f"*{LOCK}")):  # a copy deleted by hand left its lock file
            if not f.with_name(f.name.removesuffix(LOCK)).exists():
                _unheld_lock(f, dry_run, removed)
    finetune = [r / FINETUNE for r in _dirs(cache / ROOTS)] + [Path(a) for a in also]
    for folder in dict.fromkeys(finetune):
        if not folder.is_dir() or folder.is_symlink():
            continue
        with _claimed(folder, dry_run) as free:
            if not free:
                in_use.append(folder)
                continue
            removed += _stale_files(folder, cutoff, dry_run)
    locks = cache / LOCKS
    for f in sorted(locks.glob(f"*{LOCK}")) if locks.is_dir() and not locks.is_symlink() else []:
        _unheld_lock(f, dry_run, removed)
    return removed, in_use


def _stale_files(folder: Path, cutoff: float, dry_run: bool) -> list[Removed]:
    """A fine-tuning cache's files (``KEY.arrow`` with its ``.sha256``, what a stopped ``map`` left) whose
    group was last used before ``cutoff``: a reuse touches the ``.sha256`` (finetune/features.py)."""
    groups: dict[str, list[Path]] = {}
    for f in sorted(folder.iterdir()):
        if f.is_file() and not f.is_symlink():
            groups.setdefault(f.name.split(".arrow")[0], []).append(f)
    gone = []
    for files in groups.values():
        if max(_mtime(f) for f in files) > cutoff:
            continue
        for f in files:
            gone.append(Removed(f, _bytes(f)))
            if not dry_run:
                f.unlink(missing_ok=True)
    return gone


def _unheld_lock(f: Path, dry_run: bool, removed: list[Removed]) -> None:
    if f.is_symlink() or not f.is_file():
        return
    if dry_run:
        with _claimed(f.with_name(f.name.removesuffix(LOCK)), True) as free:
            if free:
                removed.append(Removed(f, _bytes(f)))
        return
    fd = try_flock(f, wait=False)
    if fd is not None:
        removed.append(Removed(f, os.fstat(fd).st_size))
        release_flock(f, fd)
