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
What the pruner cannot delete whole (a permission) is said with the bytes it did free, and keeps its lock and
times (the same ``--older-than`` finds it again once mended). Unlike a build's removal it does not delete the
manifest first: a copy's ``manifest.json`` vouches for nothing, as every read checks each file it hands out
against the store's manifest and downloads again what is missing (tests/test_cache_gc_half_removed.py). A
reader killed outright touched its locks last when it opened them: its copies' last use may be its start, and as
nothing reads them, pruning costs a download.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import re
import time
from pathlib import Path
from typing import NamedTuple

from kolectra.pipeline.store.manifest import MANIFEST
from kolectra.pipeline.store.removal import Failed, rmtree_said, tree_bytes
from kolectra.pipeline.store.workspace import LOCKS, try_flock

ARTIFACTS = "artifacts"  # $KOLECTRA_CACHE/artifacts/<kind>/<name>-<id>-<digest12>/
ROOTS = "roots"  # $KOLECTRA_CACHE/roots/<hash of ROOT>/ (remote_runs.StoreRuns._local_root)
FINETUNE = Path(".cache") / "finetune"  # a root's tokenised splits (Store.cache_dir("finetune"))
OVERLAP = Path(".cache") / "overlap"  # a root's eval-in-corpus results, KEY.json (pipeline/overlap.py)
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
class Pruned(NamedTuple):
    removed: list[Removed]
    in_use: list[Path]
    failed: list[Failed]
    linked: list[str]  # why a folder was not looked into: a symlink


class _Claim:
    """Whether no process reads a copy (truthy), held while the pruner deletes it. ``keep``: leave its lock
    file (the copy is not all gone: the lock's time still says when it was last used)."""

    def __init__(self, free: bool):
        self.free, self.keep = free, False

    def __bool__(self) -> bool:
        return self.free


@contextlib.contextmanager
def _claimed(d: Path, dry_run: bool):
    """A :class:`_Claim` on ``d`` (``dry_run``: looked at only, no lock file created). Raises OSError where
    its lock file cannot be opened (another user's, a read-only folder)."""
    path = lock_of(d)
    if dry_run:
        yield _Claim(_unread(path))
        return
    had = path.exists()  # a copy made before 2026-12-02 has none: the lock made here would date its last use now
    fd = try_flock(path, wait=False)
    claim = _Claim(fd is not None)
    try:
        yield claim
    finally:
        if fd is not None:
            if not claim.keep or not had:
                with contextlib.suppress(OSError):
                    path.unlink()  # while still held, once the copy is gone: a waiting reader takes a new one
            os.close(fd)


def _unread(path: Path) -> bool:
    """Whether no process holds lock file ``path`` (none there: no reader, which creates it before it reads).
    Opened read-write, never created: on NFS an exclusive ``flock`` is a lock on a range of bytes (fcntl),
    which needs an fd open for writing (EBADF on a read-only one)."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        else:
            if _same(fd, path):
                return True
            # unlinked since it was opened (another pruner deleted the copy): a new reader's lock may be there
        finally:
            os.close(fd)


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


def _why(e: OSError) -> str:
    return f"{e.strerror or e}: {e.filename}" if e.filename else str(e.strerror or e)


def _remove(d: Path, claim: _Claim) -> Removed | Failed:
    """Delete copy ``d``: what it freed, or why not all of it went (then its times are put back and its
    lock kept, so that the same ``--older-than`` finds it again once the cause is mended)."""
    try:
        before, st = tree_bytes(d), d.lstat()
    except FileNotFoundError:
        return Removed(d, 0)  # deleted by hand meanwhile
    errors: list[str] = []  # the first says why; what is left says how much
    rmtree_said(d, errors)
    if not errors and not d.exists():
        return Removed(d, before)
    claim.keep = True
    left = tree_bytes(d) if d.exists() else 0
    with contextlib.suppress(OSError):
        os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))  # each entry deleted moved it to now
    return Failed(str(d), errors[0] if errors else "still there", before - left, left)


def _dirs(folder: Path, done: Pruned) -> list[Path]:
    """Real folders under ``folder``. A symlink leads out of the cache: nothing is deleted there, and it is said
    (copies read through a linked ``artifacts/`` are there, and gc found none of them)."""
    if _linked(folder, done) or not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not _linked(p, done))


def _linked(p: Path, done: Pruned) -> bool:
    if not p.is_symlink():
        return False
    if p.is_dir():
        done.linked.append(f"{p} is a symlink (to {os.readlink(p)}): not pruned (kolectra deletes nothing a link "
                           "leads to; prune there by hand while no kolectra process runs)")
    return True


def prune(cache: Path, older_than_s: float = 0.0, dry_run: bool = False, also: tuple[Path, ...] = ()) -> Pruned:
    """Remove from ``cache`` what no process reads and none used within ``older_than_s`` seconds: copies of
    artifacts, fine-tuning cache files and the report's overlap results (of every root's folder there, and the
    ``also`` folders: a disk root's ``ROOT/.cache/finetune`` and ``ROOT/.cache/overlap``), and unheld lock files.
    What fails is said and the rest goes on."""
    cutoff = time.time() - older_than_s if older_than_s > 0 else float("inf")  # 0: a time ahead of the clock too
    done = Pruned([], [], [], [])
    for kind in _dirs(cache / ARTIFACTS, done):
        for d in _dirs(kind, done):
            if not COPY_NAME.match(d.name):
                continue  # not a copy kolectra made: left alone
            if max(_mtime(lock_of(d)), _mtime(d / MANIFEST), _mtime(d)) > cutoff:
                continue
            try:
                with _claimed(d, dry_run) as claim:
                    if not claim:
                        done.in_use.append(d)
                    elif dry_run:
                        done.removed.append(Removed(d, tree_bytes(d)))
                    else:
                        gone = _remove(d, claim)
                        (done.removed if isinstance(gone, Removed) else done.failed).append(gone)
            except OSError as e:  # its lock file
                done.failed.append(Failed(str(d), _why(e), 0, tree_bytes(d)))
        for f in sorted(kind.glob(f"*{LOCK}")):  # a copy deleted by hand left its lock file
            if not f.with_name(f.name.removesuffix(LOCK)).exists():
                _unheld_lock(f, dry_run, done)
    kept = [r / sub for r in _dirs(cache / ROOTS, done) for sub in (FINETUNE, OVERLAP)] + [Path(a) for a in also]
    for folder in dict.fromkeys(kept):
        if _linked(folder, done) or not folder.is_dir():
            continue
        try:
            with _claimed(folder, dry_run) as free:
                if not free:
                    done.in_use.append(folder)
                    continue
                _stale_files(folder, cutoff, dry_run, done)
        except OSError as e:
            done.failed.append(Failed(str(folder), _why(e), 0, 0))
    locks = cache / LOCKS
    for f in sorted(locks.glob(f"*{LOCK}")) if locks.is_dir() and not locks.is_symlink() else []:
        _unheld_lock(f, dry_run, done)
    return done


def _stale_files(folder: Path, cutoff: float, dry_run: bool, done: Pruned) -> None:
    """A fine-tuning cache's files (``KEY.arrow`` with its ``.sha256``, what a stopped ``map`` left) whose
    group was last used before ``cutoff``: a reuse touches the ``.sha256`` (finetune/features.py); an overlap
    result (``KEY.json``) each read touches (pipeline/overlap.py)."""
    groups: dict[str, list[Path]] = {}
    for f in sorted(folder.iterdir()):
        if f.is_file() and not f.is_symlink():
            groups.setdefault(f.name.split(".arrow")[0], []).append(f)
    for files in groups.values():
        if max(_mtime(f) for f in files) > cutoff:
            continue
        for f in files:
            size = _bytes(f)
            try:
                if not dry_run:
                    f.unlink(missing_ok=True)
            except OSError as e:
                done.failed.append(Failed(str(f), _why(e), 0, size))
            else:
                done.removed.append(Removed(f, size))


def _unheld_lock(f: Path, dry_run: bool, done: Pruned) -> None:
    if f.is_symlink() or not f.is_file():
        return
    size = _bytes(f)
    try:
        if dry_run:
            if _unread(f):
                done.removed.append(Removed(f, size))
            return
        fd = try_flock(f, wait=False)
        if fd is None:
            return
        try:
            f.unlink(missing_ok=True)  # while held: a process waiting on it sees it gone and takes a new one
        finally:
            os.close(fd)
    except OSError as e:
        done.failed.append(Failed(str(f), _why(e), 0, size))
        return
    done.removed.append(Removed(f, size))
