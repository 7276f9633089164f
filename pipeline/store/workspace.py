"""The store's private areas under ROOT: request locks (:mod:`.locks`), build directories, interrupted runs, clean-up.

``ROOT/.locks/<kind>-<id>.lock``
    One builder per request: an exclusive ``flock`` held for the whole build. The kernel drops it
    when its process dies, however it dies, so a dead holder never blocks anyone; the file holds
    the holder's pid, host, start time and command line, for the message a second run prints while
    it waits. The holder deletes the file when done; a waiter that then wakes on the deleted inode
    notices (inode check) and locks the fresh file. (``flock`` is per host on most network file
    systems: one root shared by several machines needs them not to build the same request at once.)
``ROOT/.tmp/<kind>-<id>-<hex8>/``
    A private build directory, renamed into place when sealed. Also where a replaced artifact is
    moved before it is deleted. In a ``.tmp`` that is a link (maybe shared by roots),
    ``<kind>-r<8 hex>-<id>-<hex8>/``: the root's mark, so that only that root publishes it (:func:`foreign`).
``<build directory>/.kolectra-build.lock``
    Liveness of a build directory (``.tmp`` entry or ``.work`` run) is a property of the directory
    itself: its builder holds a ``flock`` on this file for the whole build, and a sweep takes it
    before deleting anything. The request lock above lives in the root that started the build; a
    ``.tmp`` or ``.work`` shared by several roots (links to one folder, on a shared file system too) is
    swept by builders of other roots, whose ``.locks`` know nothing of it. The store leaves the file out of
    the manifest and removes it after publishing (a kill in between leaves an empty file that
    ``verify`` ignores).
``ROOT/.work/<kind>-<id>/``
    A resumable (pretraining) run: ``out/`` becomes the artifact, ``kept/`` holds the working state
    (checkpoints) set aside while ``out/`` is sealed and published, ``request.json`` says which
    request and family (same examples and preset) it belongs to, so ``--resume`` finds the
    interrupted run of a family even when the config changed.

What is provably dead is removed whenever a build starts (:func:`.sweep.sweep`, beside this module): ``.tmp`` entries and
``.work`` runs nobody holds (neither their request's lock nor their own), when they cannot be
resumed (no working state) or were published since; unheld lock files. A complete ``.tmp`` build
of an id not published is handed to the store to publish (``sweep``'s ``salvage``), not deleted. ``kolectra artifacts gc``
runs the same sweep and can also remove interrupted runs (``--interrupted``). A private area that
is a symlink (``.tmp`` in another folder) is used but never swept: what is deleted must lie inside
the root, and one line says what was left alone; one on another file system or mount is refused before a
build (:func:`.shared_areas.crossing`: it is published by a rename, which cannot cross them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Iterator

from kolectra.core import url_secrets
from kolectra.core.keys import relative_path_problem
from kolectra.core.stage import progress
from kolectra.pipeline.store.locks import LOCKS, holder, now, release_flock, request_lock, try_flock, try_lock  # noqa: F401
from kolectra.pipeline.store.manifest import BUILD_LOCK, MANIFEST, ArtifactError
from kolectra.pipeline.store.shared_areas import claim, foreign, mark, others_run, own

TMP, WORK = ".tmp", ".work"
TMP_NAME = re.compile(r"^(?P<kind>[a-z]+)-(?:.*-)?(?P<id>[0-9a-f]{16})-[0-9a-f]{8}$")
_WORK_NAME = re.compile(r"^(?P<kind>[a-z]+)-(?:.*-)?(?P<id>[0-9a-f]{16})$")
REQUEST = "request.json"
PARTIAL = ".tmp-"  # a scratch entry so named is a write cut short (model/checkpoint.py's .tmp-step-N)
_REQUEST_FIELDS = {"id": str, "kind": str, "name": str, "family": dict, "scratch": list, "config": dict, "created": str,
                   "stage_version": int, "again": str, "root": str}


# ---- build directories --------------------------------------------------------------------------
def take_build_lock(d: Path) -> int | None:
    """An fd holding ``d``'s build lock, or None: ``d`` is gone or a sweep holds it (about to delete it)."""
    try:
        fd = os.open(d / BUILD_LOCK, os.O_RDWR | os.O_CREAT, 0o644)  # never re-creates a swept ``d``
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino == os.stat(d / BUILD_LOCK).st_ino:
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


@contextlib.contextmanager
def _held_mark(d: Path, fd: int) -> Iterator[None]:
    try:
        yield
    finally:
        os.close(fd)  # the file itself went with the directory (renamed into place, or deleted)


def live(d: Path) -> bool:
    """Whether a process holds ``d``'s build lock (whatever root started it). Asked with a shared lock: NFS refuses
    an exclusive one on a read-only fd (EBADF: gc ended there), and a builder holds its lock exclusively."""
    try:
        fd = os.open(d / BUILD_LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def private_dir(root: Path, kind: str, aid: str, held: contextlib.ExitStack | None = None) -> Path:
    """A new, empty ``.tmp`` directory for one attempt at request ``kind``/``aid``; with ``held``,
    marked live (its build lock taken) until ``held`` closes. In a ``.tmp`` that is a link (maybe another root's),
    its name holds this root's mark (:func:`foreign`)."""
    infix = f"{claim(root)}-" if symlinked(root, TMP) else ""
    while True:
        d = root / TMP / f"{kind}-{infix}{aid}-{uuid.uuid4().hex[:8]}"
        d.mkdir(parents=True)
        if held is None:
            return d
        fd = take_build_lock(d)  # a sweep of another root may take it first: then it deletes d, and we try another
        if fd is not None:
            held.enter_context(_held_mark(d, fd))
            return d


def unmark(d: Path) -> None:
    """Drop the build lock file from a directory just published (its holder may still hold the fd)."""
    with contextlib.suppress(FileNotFoundError):
        (d / BUILD_LOCK).unlink()


def leftovers(root: Path, kind: str, aid: str) -> list[Path]:
    """``.tmp`` directories of earlier attempts at this request that no process holds (dead while we
    hold its request lock, unless a root sharing this ``.tmp`` is building the same request); not a complete
    build another root sharing it left there (:func:`foreign`); in a ``.tmp`` that is a link, not a complete build
    this root did not mark (the unmarked ones are the builds of the root whose folder it is: this root's next build
    of the same request published them as its own, and that root lost them)."""
    tmp = root / TMP
    if not tmp.is_dir():
        return []
    shared = symlinked(root, TMP) is not None
    return sorted(d for d in tmp.iterdir() if (m := TMP_NAME.match(d.name)) and m["id"] == aid
                  and m["kind"] == kind and not live(d)
                  and not ((foreign(root, d) or shared and not own(root, d)) and (d / MANIFEST).is_file()))


def symlinked(root: Path, area: str) -> str | None:
    """Why the private area ``ROOT/<area>`` is not swept (a symlink: it leads out of the root), or None."""
    p = root / area
    if p.is_symlink():
        return f"{p} is a symlink (to {os.readlink(p)})"
    if p.is_dir() and p.resolve().parent != root.resolve():
        return f"{p} leads out of {root} (to {p.resolve()})"
    return None


def discard(root: Path, paths: list[Path]) -> None:
    """Delete dead private directories, never inside a private area that leads out of ``root`` but for a ``.tmp``
    entry this root marked there (:func:`own`)."""
    for d in paths:
        area = d.relative_to(root).parts[0] if d.is_relative_to(root) else None
        if area is not None and (symlinked(root, area) is None or (area == TMP and own(root, d))) and not d.is_symlink():
            shutil.rmtree(d, ignore_errors=True)


class Run:
    """A resumable run's directory ``.work/<kind>-<id>/``: ``out/`` (the stage's), ``kept/``, ``request.json``."""

    # who continues it, as its lines say: ``--resume``, or the words of a caller that has none (open_run's ``again``)
    again = "--resume"

    def __init__(self, path: Path):
        self.path, self.out, self.kept = path, path / "out", path / "kept"

    @property
    def request(self) -> dict:
        """``request.json``: the fields of the types kolectra writes; a damaged one loses the others."""
        found = {k: v for k, v in holder(self.path / REQUEST).items() if isinstance(v, _REQUEST_FIELDS.get(k, object))}
        # names of entries in out/ and kept/ (set_aside removes kept/NAME): one plain path part each, never
        # "../x" (a run in a root from elsewhere, resumed, would delete what that leads to)
        if not all(isinstance(name, str) and relative_path_problem(name, "") is None and "/" not in name
                   for name in found.get("scratch", [])):
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
            return [self.path] if self.path.is_dir() and any(e.name != BUILD_LOCK for e in self.path.iterdir()) else []
        names = self.request.get("scratch", [])
        if not names:  # no named working state: whatever the stage left counts
            return [self.out] if self.out.is_dir() and any(self.out.iterdir()) else []
        # a write cut short by a kill (the trainer's .tmp-step-N, never loaded) is no state: a run holding it alone
        # was kept by gc as one '--resume continues', and --resume said 'resuming in ...', then 'starting fresh'
        return [d / n for d in (self.out, self.kept) for n in names
                if (d / n).is_file() or ((d / n).is_dir() and any(not e.name.startswith(PARTIAL)
                                                                  for e in (d / n).iterdir()))]

    def started(self) -> float:
        """When this run was created (``request.json`` written, by the disk's clock); 0 for a run of an
        older kolectra without one."""
        with contextlib.suppress(OSError):
            return (self.path / REQUEST).stat().st_mtime
        return 0.0

    def live(self) -> bool:
        """Whether a process (of any root sharing this ``.work``) is building in it right now."""
        return live(self.path)

    def foreign(self, root: Path) -> bool:
        """Whether another root sharing this ``.work`` made this run (its ``request.json`` names that root's
        :func:`mark`): its sealed ``out/`` is that root's build, not this one's to publish, its checkpoints not
        this one's to discard or continue. In a ``.work`` that is a link to another root's, an unmarked run too: that
        root's (it marks none), or this root's from before 2026-12-02 (as :func:`leftovers` takes an unmarked ``.tmp``
        entry there); a link's root discarded that root's checkpoints, or continued them. In a scratch folder no root
        owns (no ``.locks`` beside it), an unmarked run is this root's from before 2026-12-02, as it was."""
        made = self.request.get("root")
        if made is None:
            return symlinked(root, WORK) is not None and ((root / WORK).resolve().parent / LOCKS).is_dir()
        return made != mark(root)

    def hold(self, held: contextlib.ExitStack) -> None:
        """Mark this run live until ``held`` closes; refused if another process is building in it."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = take_build_lock(self.path)
        if fd is None:
            raise ArtifactError(f"{self.path}: another process is building in this run right now (a root sharing "
                                f"{self.path.parent}?); wait for it")
        held.enter_context(_held_mark(self.path, fd))

    def create(self, record: dict) -> None:
        """Start afresh (the caller holds it): everything but its build lock goes."""
        for entry in self.path.iterdir() if self.path.is_dir() else []:
            if entry.name != BUILD_LOCK:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        self.out.mkdir(parents=True)
        (self.path / REQUEST).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")

    def record_again(self) -> None:
        """Record :attr:`again` (what the line of the stop that kept it names) in ``request.json`` where it
        differs from the words there: for a run another request's ``--resume`` continued and stopped (one
        ``kolectra run`` left: gc then named `kolectra run`, which refuses the other settings its checkpoint
        now holds)."""
        record = holder(self.path / REQUEST)
        if not record or record.get("again", Run.again) == self.again:  # (none: an older kolectra's run, as it was)
            return
        record["again"] = self.again  # (--resume's too: a run named as kolectra run's, without it, reads as either)
        part = self.path / (REQUEST + ".part")
        part.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        os.replace(part, self.path / REQUEST)

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
    return sorted((Run(d) for d in work.iterdir() if d.is_dir() and not d.is_symlink()),
                  key=lambda r: r.path.name) if work.is_dir() else []


def family_runs(root: Path, family: dict, exclude: Path | None = None) -> list[Run]:
    """Interrupted runs of ``family`` with working state, newest first; never another root's, in a ``.work`` roots
    share (:meth:`Run.foreign`: ``--resume`` with other settings continued that root's run, its checkpoints gone)."""
    found = [r for r in runs(root) if r.path != exclude and r.request.get("family") == family and r.state()
             and not r.foreign(root)]
    return sorted(found, key=lambda r: max(p.stat().st_mtime for p in r.state()), reverse=True)


@dataclasses.dataclass(frozen=True)
class Resumable:
    """How a resumable stage's run is found again: its family (which interrupted runs ``resume``
    may continue) and its working state (entries of its directory that are not the product); and
    this process's ``rank`` in a data-parallel build of it, as the device layer says (torchrun's
    ``RANK``, a TPU pod host's index): rank 0 reserves and publishes, the others follow
    (:mod:`.followers`); ``again``: what the user continues it with (:func:`open_run`)."""

    family: dict
    scratch: tuple[str, ...] = ()
    rank: int = 0
    # what continues the run, as its lines name it: a caller without --resume (kolectra run, a study) says its own
    again: str = "--resume"


def open_run(root: Path, record: dict, resume: bool | str, held: contextlib.ExitStack,
             operational: tuple[str, ...] = (), family_resume: bool = True, again: str = "--resume",
             forced: bool = False, also: str = "", work: str = "") -> Run:
    # also: where else a fresh run discards it (a store); work: how the root's .work is named (a store's URL)
    """The run a resumable build works in (its lock held by the caller; ``held`` takes any other).

    With ``resume``: this request's interrupted run, else (unless ``resume == "exact"`` or not
    ``family_resume``) the newest interrupted run of its family (the stage then checks its own state's
    settings); else a fresh run, discarding an interrupted one of this request. ``resume is True`` is
    ``--resume``, which asked for a run: finding none is said; ``"exact"`` is a caller's own continuation
    (``kolectra run``, a study's point), quiet on a first run. ``operational``: the dotted config keys
    the request's id leaves out, left out when saying whether that run had other settings;
    ``family_resume``: whether ``--resume`` here may continue a run of the family (not on a store
    root, whose runs of other requests are not the store's), as the line counting them says; ``again``: what
    continues this request's run, as its lines name it (``kolectra run`` has no --resume: "the same `kolectra
    run` without --force"); a caller with words of its own continues no other request's run. ``forced``: a
    ``--force`` rebuild over a copy of this id published there, where ``--resume`` alone reuses that copy: the
    run it discards is said to be ``--force --resume``'s (as :func:`.request.forced_over` words its stop)."""
    kind, aid = record["kind"], record["id"]
    exact = Run(root / WORK / f"{kind}-{aid}")
    if exact.live():
        exact.hold(held)  # refused, naming it
    if exact.foreign(root) and (exact.state() or (exact.out / "manifest.json").is_file()):
        # one folder for the request in every root sharing this .work: that root's checkpoints, or its sealed
        # build, were discarded here (or published into this root)
        raise ArtifactError(others_run(root, exact.path, exact.path / REQUEST, exact.request.get("root")))
    others = family_runs(root, record["family"], exclude=exact.path)
    own_only = resume == "exact" or not family_resume  # only this request's run may be continued here
    exact.again = again  # what its lines name, here and when it is interrupted
    if resume and exact.state():
        exact.hold(held)
        progress(f"{kind}: resuming in {exact.path}")
        exact.restore()
        return exact
    if resume and others and not own_only:
        run = others[0]
        if not held.enter_context(try_lock(root, run.kind, run.id)) or (fd := take_build_lock(run.path)) is None:
            raise ArtifactError(f"{kind}: the interrupted run {run.path} is running right now; wait for it "
                                "or stop it before resuming it with other settings")
        held.enter_context(_held_mark(run.path, fd))
        run.again = again
        progress(f"{kind}: no interrupted run of this exact request; the newest of the same inputs "
                 f"{_how_other(run.request, record, operational)} is {run.path} (request {run.id}): continuing "
                 "it if its checkpoint's settings allow")
        run.restore()
        return run
    if resume and resume != "exact":  # --resume asked for one; a caller's own continuation ("exact": kolectra run,
        progress(f"{kind}: nothing to resume for this request; starting fresh")  # a study) says nothing on a first run
    elif exact.state() or also:
        words = "--force --resume" if forced and again == Run.again else again
        where = " and ".join(x for x in (str(exact.path) * bool(exact.state()), also) if x)  # a store's copy: also
        progress(f"{kind}: discarding the interrupted run in {where} ({words} would continue it)")
    idle = [r for r in others if not _running(root, r)]  # a run whose lock is held is live, not interrupted
    if idle and (not resume or own_only):
        progress(f"{kind}: {len(idle)} interrupted run(s) of the same inputs kept in {work or root / WORK}, the newest "
                 f"{_how_other(idle[0].request, record, operational)}; "
                 + ("--resume continues it" if not own_only and again == Run.again else
                    "only this request's run is resumed here")
                 + "; `kolectra artifacts gc --interrupted` removes them")
    exact.hold(held)
    # a caller with words of its own records them, so that `artifacts gc`, listing the run, names it (a run of
    # --resume's, and one started before 2026-12-01, records none: its request.json is as it was)
    # a .work that is a link (maybe another root's): the run names this root (Run.foreign)
    exact.create({**record, "created": now(), **({"again": again} if again != Run.again else {}),
                  **({"root": claim(root)} if symlinked(root, WORK) else {})})
    return exact


def _settings(config: object, operational: tuple[str, ...], prefix: str = "") -> dict:
    """``config`` as dotted keys, less the ``operational`` ones."""
    out = {}
    for k, v in (config.items() if isinstance(config, dict) else ()):
        out.update(_settings(v, operational, f"{prefix}{k}.") if isinstance(v, dict) else
                   {} if f"{prefix}{k}" in operational else {f"{prefix}{k}": v})
    return out


def _how_other(found: dict, record: dict, operational: tuple[str, ...]) -> str:
    """How an interrupted run of the family differs from this request: other settings, or the same
    settings under another id (the run of an earlier kolectra, after an upgrade)."""
    if (then := _settings(found.get("config"), operational)) != (now_ := _settings(record.get("config"), operational)):
        keys = sorted(k for k in then.keys() | now_.keys() if then.get(k, _UNSET) != now_.get(k, _UNSET))
        shown = ", ".join(f"{k} {_value(then, k)} -> {_value(now_, k)}" for k in keys[:3])
        return f"with other settings ({shown}{f' and {len(keys) - 3} more' if len(keys) > 3 else ''})"
    then, now_ = found.get("stage_version"), record.get("stage_version")
    if then is not None and then != now_:
        return (f"with the same settings, written by {record['kind']} stage version {then} "
                f"(this kolectra builds {now_})")
    if then is not None:
        return ("with the same settings and stage version under another request id (other versions of the "
                "libraries the id names, or other raw inputs)")
    return ("with the same settings under another request id (written by an earlier kolectra, whose stage "
            "version or libraries' versions the id names, or other raw inputs)")


_UNSET = object()


def _value(settings: dict, key: str) -> str:
    """One setting as the line shows it: JSON, cut at 40 characters, a URL's secrets left out."""
    if key not in settings:
        return "(unset)"
    shown = url_secrets.redacted(json.dumps(settings[key], ensure_ascii=False, default=str))
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _running(root: Path, run: Run) -> bool:
    """Whether a live process holds ``run``'s request lock (it is being built right now)."""
    if run.live():
        return True
    if run.kind is None or run.id is None:
        return False
    with try_lock(root, run.kind, run.id) as free:
        return not free


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
