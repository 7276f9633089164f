"""The store's private areas under ROOT: request locks, build directories, interrupted runs, clean-up.

``ROOT/.locks/<kind>-<id>.lock``
    One builder per request: an exclusive ``flock`` held for the whole build. The kernel drops it
    when its process dies, however it dies, so a dead holder never blocks anyone; the file holds
    the holder's pid, host, start time and command line, for the message a second run prints while
    it waits. The holder deletes the file when done; a waiter that then wakes on the deleted inode
    notices (inode check) and locks the fresh file. (``flock`` is per host on most network file
    systems: one root shared by several machines needs them not to build the same request at once.)
``ROOT/.tmp/<kind>-<id>-<hex8>/``
    A private build directory, renamed into place when sealed. Also where a replaced artifact is
    moved before it is deleted.
``ROOT/.work/<kind>-<id>/``
    A resumable (pretraining) run: ``out/`` becomes the artifact, ``kept/`` holds the working state
    (checkpoints) set aside while ``out/`` is sealed and published, ``request.json`` says which
    request and family (same examples and preset) it belongs to, so ``--resume`` finds the
    interrupted run of a family even when the config changed.

What is provably dead is removed whenever a build starts (:func:`sweep`): ``.tmp`` entries and
``.work`` runs of requests nobody holds the lock of, when they cannot be resumed (no working state)
or were published since; unheld lock files. ``kolectra artifacts gc`` runs the same sweep and can
also remove interrupted runs (``--interrupted``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import sys
import uuid
from pathlib import Path
from typing import Callable, Iterator

from kolectra.core.stage import progress
from kolectra.pipeline.manifest import ArtifactError

LOCKS, TMP, WORK = ".locks", ".tmp", ".work"
_TMP_NAME = re.compile(r"^(?P<kind>[a-z]+)-(?:.*-)?(?P<id>[0-9a-f]{16})-[0-9a-f]{8}$")
_WORK_NAME = re.compile(r"^(?P<kind>[a-z]+)-(?:.*-)?(?P<id>[0-9a-f]{16})$")
REQUEST = "request.json"
_REQUEST_FIELDS = {"id": str, "kind": str, "name": str, "family": dict, "scratch": list, "config": dict, "created": str}


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ---- locks --------------------------------------------------------------------------------------
def _try_flock(path: Path, wait: bool, on_wait: Callable[[dict], None] | None = None) -> int | None:
    """An fd holding an exclusive flock on ``path``, or None (held elsewhere and not ``wait``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                os.close(fd)
                return None
            if on_wait is not None:
                on_wait(holder(path))
                on_wait = None
            fcntl.flock(fd, fcntl.LOCK_EX)  # an interrupt lands here as KeyboardInterrupt: fd is closed below
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder deleted the file while we waited on it: lock the new one


def _release(path: Path, fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # while still held: a waiter on this inode sees it gone and retries
    os.close(fd)


def holder(path: Path) -> dict:
    """A small JSON object kolectra wrote (a lock's holder, a run's ``request.json``); {} for anything
    else: missing, cut short by a kill, or not an object."""
    try:
        found = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


@contextlib.contextmanager
def request_lock(root: Path, kind: str, aid: str) -> Iterator[None]:
    """Hold the lock of request ``kind``/``aid``; wait (saying for whom) while another process has it."""
    path = root / LOCKS / f"{kind}-{aid}.lock"

    def waiting(h: dict) -> None:
        who = f"pid {h.get('pid', '?')} on {h.get('host', '?')} since {h.get('since', '?')}"
        progress(f"{kind}: another run ({who}) is building the same request {aid}; waiting for it to finish "
                 "(Ctrl-C stops waiting)")

    fd = _try_flock(path, wait=True, on_wait=waiting)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now(),
                                 "argv": " ".join(["kolectra", *sys.argv[1:]])}).encode())
        yield
    finally:
        _release(path, fd)


@contextlib.contextmanager
def try_lock(root: Path, kind: str, aid: str) -> Iterator[bool]:
    """Hold the lock of ``kind``/``aid`` if nobody does; yields whether it was taken."""
    path = root / LOCKS / f"{kind}-{aid}.lock"
    fd = _try_flock(path, wait=False)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            _release(path, fd)


# ---- build directories --------------------------------------------------------------------------
def private_dir(root: Path, kind: str, aid: str) -> Path:
    """A new, empty ``.tmp`` directory for one attempt at request ``kind``/``aid``."""
    d = root / TMP / f"{kind}-{aid}-{uuid.uuid4().hex[:8]}"
    d.mkdir(parents=True)
    return d


def leftovers(root: Path, kind: str, aid: str) -> list[Path]:
    """``.tmp`` directories of earlier attempts at this request (dead while we hold its lock)."""
    tmp = root / TMP
    if not tmp.is_dir():
        return []
    return sorted(d for d in tmp.iterdir() if (m := _TMP_NAME.match(d.name)) and m["id"] == aid
                  and m["kind"] == kind)


class Run:
    """A resumable run's directory ``.work/<kind>-<id>/``: ``out/`` (the stage's), ``kept/``, ``request.json``."""

    def __init__(self, path: Path):
        self.path, self.out, self.kept = path, path / "out", path / "kept"

    @property
    def request(self) -> dict:
        """``request.json``: the fields of the types kolectra writes; a damaged one loses the others."""
        found = {k: v for k, v in holder(self.path / REQUEST).items() if isinstance(v, _REQUEST_FIELDS.get(k, object))}
        if not all(isinstance(name, str) and name for name in found.get("scratch", [])):
            del found["scratch"]
        return found

    @property
    def id(self) -> str | None:
        m = _WORK_NAME.match(self.path.name)
        return self.request.get("id") or (m["id"] if m else None)

    @property
    def kind(self) -> str | None:
        m = _WORK_NAME.match(self.path.name)
        return self.request.get("kind") or (m["kind"] if m else None)

    def state(self) -> list[Path]:
        """The working state (scratch entries) it holds, in ``out/`` or set aside in ``kept/``."""
        if not (self.path / REQUEST).is_file():  # written by an older kolectra: anything in it counts
            return [self.path] if self.path.is_dir() and any(self.path.iterdir()) else []
        names = self.request.get("scratch", [])
        if not names:  # no named working state: whatever the stage left counts
            return [self.out] if self.out.is_dir() and any(self.out.iterdir()) else []
        return [d / n for d in (self.out, self.kept) for n in names
                if (d / n).is_file() or ((d / n).is_dir() and any((d / n).iterdir()))]

    def create(self, record: dict) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self.out.mkdir(parents=True)
        (self.path / REQUEST).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")

    def restore(self) -> None:
        """Put set-aside state back into ``out/`` and drop a manifest a killed seal left behind."""
        if self.kept.is_dir():
            for entry in self.kept.iterdir():
                if not (self.out / entry.name).exists():
                    os.replace(entry, self.out / entry.name)
        (self.out / "manifest.json").unlink(missing_ok=True)

    def set_aside(self) -> None:
        """Working state out of ``out/`` before it is hashed; deleted only once ``out/`` is published."""
        for name in self.request.get("scratch", []):
            if (self.out / name).exists():
                self.kept.mkdir(exist_ok=True)
                shutil.rmtree(self.kept / name, ignore_errors=True)
                os.replace(self.out / name, self.kept / name)

    def size(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file() and not f.is_symlink())


def runs(root: Path) -> list[Run]:
    work = root / WORK
    return sorted((Run(d) for d in work.iterdir() if d.is_dir()), key=lambda r: r.path.name) if work.is_dir() else []


def family_runs(root: Path, family: dict, exclude: Path | None = None) -> list[Run]:
    """Interrupted runs of ``family`` with working state, newest first."""
    found = [r for r in runs(root) if r.path != exclude and r.request.get("family") == family and r.state()]
    return sorted(found, key=lambda r: max(p.stat().st_mtime for p in r.state()), reverse=True)


@dataclasses.dataclass(frozen=True)
class Resumable:
    """How a resumable stage's run is found again: its family (which interrupted runs ``resume``
    may continue) and its working state (entries of its directory that are not the product)."""

    family: dict
    scratch: tuple[str, ...] = ()


def open_run(root: Path, record: dict, resume: bool | str, held: contextlib.ExitStack) -> Run:
    """The run a resumable build works in (its lock held by the caller; ``held`` takes any other).

    With ``resume``: this request's interrupted run, else (unless ``resume == "exact"``) the newest
    interrupted run of its family (the stage then checks its own state's settings); else a fresh
    run, discarding an interrupted one of this request."""
    kind, aid = record["kind"], record["id"]
    exact = Run(root / WORK / f"{kind}-{aid}")
    others = family_runs(root, record["family"], exclude=exact.path)
    if resume and exact.state():
        progress(f"{kind}: resuming in {exact.path}")
        exact.restore()
        return exact
    if resume and others and resume != "exact":
        run = others[0]
        if not held.enter_context(try_lock(root, run.kind, run.id)):
            raise ArtifactError(f"{kind}: the interrupted run {run.path} is running right now; wait for it "
                                "or stop it before resuming it with other settings")
        progress(f"{kind}: no interrupted run of this exact request; the newest of the same inputs with other "
                 f"settings is {run.path} (request {run.id}): continuing it if its checkpoint's settings allow")
        run.restore()
        return run
    if resume:
        progress(f"{kind}: nothing to resume for this request; starting fresh")
    elif exact.state():
        progress(f"{kind}: discarding the interrupted run in {exact.path} (--resume would continue it)")
    idle = [r for r in others if not _running(root, r)]  # a run whose lock is held is live, not interrupted
    if idle and (not resume or resume == "exact"):
        progress(f"{kind}: {len(idle)} interrupted run(s) of the same inputs with other settings kept in "
                 f"{root / WORK} (--resume continues the newest; `kolectra artifacts gc --interrupted` removes them)")
    exact.create({**record, "created": now()})
    return exact


def _running(root: Path, run: Run) -> bool:
    """Whether a live process holds ``run``'s request lock (it is being built right now)."""
    if run.kind is None or run.id is None:
        return False
    with try_lock(root, run.kind, run.id) as free:
        return not free


# ---- clean-up -------------------------------------------------------------------------------------
def _remove(path: Path, dry_run: bool, removed: list[Path]) -> None:
    removed.append(path)
    if not dry_run:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def sweep(root: Path, published: Callable[[str, str], bool], interrupted: bool = False,
          dry_run: bool = False) -> tuple[list[Path], list[Run]]:
    """Remove what no live process holds and nothing can use: (removed paths, interrupted runs kept).

    A ``.tmp`` entry or lock file is dead when its request's lock is free. A ``.work`` run is dead
    when its lock is free and it was published since or holds no working state to resume from; with
    ``interrupted`` the others go too."""
    removed: list[Path] = []
    kept: list[Run] = []
    tmp = root / TMP
    for d in sorted(tmp.iterdir()) if tmp.is_dir() else []:
        m = _TMP_NAME.match(d.name)
        if m is None:
            continue  # not ours: left alone
        with try_lock(root, m["kind"], m["id"]) as free:
            if free:
                _remove(d, dry_run, removed)
    for run in runs(root):
        kind, aid = run.kind, run.id
        if kind is None or aid is None:
            continue
        with try_lock(root, kind, aid) as free:
            if not free:
                continue
            if interrupted or published(kind, aid) or not run.state():
                _remove(run.path, dry_run, removed)
            else:
                kept.append(run)
    locks = root / LOCKS
    for f in sorted(locks.glob("*.lock")) if locks.is_dir() else []:
        fd = _try_flock(f, wait=False)
        if fd is not None:
            removed.append(f)
            _release(f, fd) if not dry_run else os.close(fd)
    return removed, kept


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
