"""Clean-up of the store's private areas (``.tmp``, ``.work``, ``.locks``: :mod:`.workspace` says what
each holds): what no live process holds and nothing can use is removed whenever a build starts, and by
``kolectra artifacts gc`` (``--interrupted`` also removes interrupted runs). Called by the disk store
(``artifacts.py``) and, on its local cache, by the bucket store's gc (``remote_gc.py``). What cannot be deleted
whole (a permission) is not said removed: it goes to the caller's ``failed`` (:mod:`.removal`), the rest goes on."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Callable, Iterator

from kolectra.core.stage import progress
from kolectra.pipeline.store.manifest import MANIFEST
from kolectra.pipeline.store.removal import Failed, remove_dir, tree_bytes
from kolectra.pipeline.store.shared_areas import PROBE, ROOT_MARK, foreign, own, settle
from kolectra.pipeline.store.workspace import (
    LOCKS,
    TMP,
    TMP_NAME,
    WORK,
    Run,
    live,
    runs,
    symlinked,
    take_build_lock,
    try_flock,
    try_lock,
)


def _remove(path: Path, dry_run: bool, removed: list[Path], failed: list[Failed]) -> None:
    if not dry_run and (why := remove_dir(path)) is not None:
        failed.append(why)
    else:
        removed.append(path)


@contextlib.contextmanager
def _claimed(root: Path, d: Path, kind: str, aid: str, dry_run: bool) -> Iterator[bool]:
    """Whether ``d`` is dead, held while the caller deletes it: no process of this root holds its
    request's lock and no process of any root holds ``d``'s own build lock (taken here, so a builder
    starting in ``d`` right now backs off instead of losing it)."""
    with try_lock(root, kind, aid) as free:
        if not free:
            yield False
        elif dry_run or not d.is_dir() or d.is_symlink():
            yield not live(d)
        else:
            fd = take_build_lock(d)
            try:
                yield fd is not None
            finally:
                if fd is not None:
                    os.close(fd)


@contextlib.contextmanager
def _claimed_or_said(root: Path, d: Path, kind: str, aid: str, dry_run: bool, failed: list[Failed]) -> Iterator[bool]:
    """:func:`_claimed`, where a lock gc cannot take (its file another user's, a read-only ``.locks``) is said in
    ``failed`` and ``d`` left alone (False), the rest of the sweep going on."""
    stack = contextlib.ExitStack()
    try:
        dead = stack.enter_context(_claimed(root, d, kind, aid, dry_run))
    except OSError as e:
        _unclaimed(d, e, failed)
        dead = False
    with stack:
        yield dead


def sweep(root: Path, published: Callable[[str, str], float | None], interrupted: bool = False,
          dry_run: bool = False, salvage: Callable[[str, str, Path, bool], bool] | None = None,
          failed: list[Failed] | None = None) -> tuple[list[Path], list[Run]]:
    """Remove what no live process holds and nothing can use: (removed paths, interrupted runs kept).

    A dead ``.tmp`` entry that ``salvage`` publishes (a complete build of an id not published: its
    run was stopped between sealing and publishing, or a ``--force`` between moving the old copy out
    and the new one in) is kept as the artifact, not deleted; so is a dead run's sealed ``out/`` (offered
    first: a resumable ``--force``'s new build stays there), its run then removed.
    A ``.tmp`` entry is dead when neither its request's lock nor its own build lock is held; a lock
    file when it is not held. A ``.work`` run is dead when it is not held and was published since
    (``published`` gives when the published copy was written, or None; a run started after that is a
    rebuild, ``--force``d or of a stale artifact, and its checkpoints are in no copy) or holds no
    working state to resume from; with ``interrupted`` the others go too, but for a run another root sharing this
    ``.work`` made (:meth:`.workspace.Run.foreign`), kept while it holds working state or a sealed build whatever
    this root published or was asked (that root's, which this root neither continues nor publishes). A private area that
    leads out of the root (a symlink) is left alone, said in one line: deleting there could delete
    what is not the store's; but for the ``.tmp`` entries this root made there, which its name marks
    (:func:`.shared_areas.foreign`: a ``.tmp`` shared by roots is swept by each for its own builds, and by the
    root whose folder it is for the unmarked ones, never for another root's complete build). What could not be
    deleted whole, or claimed (a lock file gc may not open), is added to ``failed`` and the sweep goes on."""
    failed = [] if failed is None else failed
    if not dry_run:
        settle(root)  # a root moved: its mark file told where it is now (a dry run, as a list, writes nothing)
    removed: list[Path] = []
    kept: list[Run] = []
    skipped = {area: why for area in (TMP, WORK, LOCKS) if (why := symlinked(root, area))}
    for area, why in skipped.items():
        own_ones = " but for the builds this root made there" if area == TMP else ""
        progress(f"{why}: not swept{own_ones} (kolectra deletes nothing outside {root}); remove dead entries there by hand")
    # first the sealed out/ of dead runs: a pretrain --force killed between its renames left its new build there and
    # the old copy in .tmp; met first, salvage weighs both and publishes the newer (as the next build does)
    salvaged = set()
    for run in runs(root) if WORK not in skipped and TMP not in skipped and salvage is not None else []:
        kind, aid = run.kind, run.id
        if kind is None or aid is None or not (run.out / MANIFEST).is_file() or run.foreign(root):
            continue  # (another root's run, in a .work it shares: its build, which that root publishes)
        with _claimed_or_said(root, run.path, kind, aid, dry_run, failed) as dead:
            if dead and salvage(kind, aid, run.out, dry_run):
                salvaged.add(run.path)
    tmp = root / TMP
    for d in sorted(tmp.iterdir()) if tmp.is_dir() else []:
        m = TMP_NAME.match(d.name)
        # not ours: left alone; in a .tmp leading out of the root, all but what this root marked there; a complete
        # build another root sharing this .tmp marked is that root's, which its own sweep publishes
        if m is None or (not own(root, d) if TMP in skipped else foreign(root, d) and (d / MANIFEST).is_file()):
            continue
        with _claimed_or_said(root, d, m["kind"], m["id"], dry_run, failed) as dead:
            if dead and not (salvage is not None and salvage(m["kind"], m["id"], d, dry_run)):
                _remove(d, dry_run, removed, failed)
    for run in runs(root) if WORK not in skipped else []:
        kind, aid = run.kind, run.id
        if kind is None or aid is None:
            continue
        with _claimed_or_said(root, run.path, kind, aid, dry_run, failed) as dead:
            if not dead or (run.path in salvaged and not dry_run and run.out.is_dir()):
                continue  # (its out/ kept where salvage said it is, for a kind folder that leads out of the root)
            if run.foreign(root) and (run.state() or (run.out / MANIFEST).is_file()):
                kept.append(run)  # another root's (sharing this .work): its to continue, publish or discard, not ours
            elif run.path in salvaged or interrupted or not run.state() or ((at := published(kind, aid)) is not None and at >= run.started()):
                _remove(run.path, dry_run, removed, failed)
            else:
                kept.append(run)
    locks = root / LOCKS
    for f in sorted(locks.glob("*.lock")) if locks.is_dir() and LOCKS not in skipped else []:
        try:
            if (fd := try_flock(f, wait=False)) is None:
                continue  # held: a live build's
            try:
                if not dry_run:
                    f.unlink(missing_ok=True)  # while held: a waiter on this inode sees it gone and retries
            finally:
                os.close(fd)
        except OSError as e:  # another user's lock file, a read-only .locks: said, not counted removed
            _unclaimed(f, e, failed)
        else:
            removed.append(f)
    _probes(root, skipped, dry_run, removed)
    return removed, kept


def _unclaimed(path: Path, e: OSError, failed: list[Failed]) -> None:
    """``path``, whose lock gc could not take or whose lock file it could not delete: said once (a run met by
    two of the sweep's passes), with all its bytes left."""
    if all(f.path != str(path) for f in failed):
        why = e.strerror or str(e)
        why += f": {e.filename}" if e.filename and str(e.filename) != str(path) else ""
        failed.append(Failed(str(path), why, 0, tree_bytes(path) if path.is_dir() else 0))


PROBE_AGE = 3600  # s: a probe lives for an instant; an hour old, no check is using it (clocks of a shared disk agree)


def _probes(root: Path, skipped: dict, dry_run: bool, removed: list[Path]) -> None:
    """The empty folder :func:`.shared_areas.crossing` renames from a private area into the root (and on into
    ``ROOT/<kind>``), where a kill between its renames left it: no build's name, so nothing else removed it
    (``ROOT/.kolectra-rename-*`` was never swept nor listed). Removed once empty and an hour old (:data:`PROBE_AGE`);
    so is a ``ROOT/.kolectra-root.json.*.part`` a kill left while the root's mark was written."""
    for d in sorted([*root.glob(f"{PROBE}*"), *root.glob(f"*/{PROBE}*")]):
        area = d.parent
        if area != root and (area.is_symlink() or area.name in skipped):
            continue  # (a private area or kind folder leading out of the root: not swept)
        with contextlib.suppress(OSError):
            if d.is_symlink() or not d.is_dir() or time.time() - d.stat().st_mtime < PROBE_AGE or any(d.iterdir()):
                continue
            if not dry_run:
                os.rmdir(d)  # refused (kept) if a check filled or took it since
            removed.append(d)
    # a kill while the root's mark was kept (:func:`.shared_areas.claim`) leaves its half-written file beside it
    for f in sorted(root.glob(f"{ROOT_MARK}.*.part")):
        with contextlib.suppress(OSError):
            if f.is_symlink() or not f.is_file() or time.time() - f.stat().st_mtime < PROBE_AGE:
                continue
            if not dry_run:
                f.unlink()
            removed.append(f)
