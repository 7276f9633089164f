"""The artifact store: versioned, hash-linked, atomically published stage outputs.

Every stage run becomes ``ROOT/<kind>/<name>-<id>/``. The id is a hash of the *request* — kind,
stage version, resolved config, parent ids, raw-input fingerprints and the versions of the
libraries that decide the output — so asking for the same thing twice finds the existing
artifact instead of recomputing it. The id is the identity: the same request under another
``--name`` finds the directory already published under the first name; ``--force`` rebuilds it
there, under that name (:func:`.request.in_its_folder`). The request itself, its id, the name it is
published under and the manifest it gets are :mod:`.request`'s; this module builds, joins, publishes
and collects (a store URL's root: :mod:`.remote`, built on it).

The publish protocol, :meth:`Store.build` top to bottom; a kill at any point leaves either the
complete artifact or nothing under ``ROOT/<kind>/`` (private areas: :mod:`.workspace`):

1. check    kind known; every parent intact, and unchanged since its own children recorded it.
2. reserve  lock ``ROOT/.locks/<kind>-<id>.lock``: one builder per request; a second identical
            run waits (saying for whom) and then joins the first one's result.
3. join     the artifact exists, built from the parents as they are now: reuse it (one built from
            another build of a parent is rebuilt). A build of this request that was sealed but killed
            before its rename is published as it is; to be rebuilt (``--force``, stale), a complete
            copy a kill left in ``.tmp`` is put back first; earlier attempts' directories are deleted.
4. prepare  a private directory: a new ``ROOT/.tmp/<kind>-<id>-<hex8>/``, or for a resumable stage
            (pretraining) its run ``ROOT/.work/<kind>-<id>/out/``; with ``resume`` the interrupted
            run of this request or, failing that, of its family (same examples and preset: the
            stage then compares its checkpoint's config and refuses differences unless forced).
5. produce  the stage writes its files there and returns its stats.
6. seal     working state (checkpoints) is set aside, not deleted; every file is hashed and
            ``manifest.json`` written last (records each parent's digest).
7. publish  one ``os.replace`` into ``ROOT/<kind>/<name>-<id>/`` (a ``--force``d or damaged copy is
            first moved into ``.tmp``).
8. clean    only now the run's working state and the replaced copy are deleted.

If the stage fails in 5, a ``.tmp`` directory is deleted, and a run is kept only if it holds
working state to resume from (one line says where). What a kill leaves behind is private and
is removed once provably dead (no process holds its lock; published since, or nothing to resume),
a complete build of an id not published is published instead (:meth:`Store.collect`):
at the start of every build, and by ``kolectra artifacts gc``. Documented in docs/artifacts.md.

Stage code never sees any of this; it writes files into the directory it is handed and returns
a :class:`core.stage.StageOutput`. Finding, checking and drawing the lineage of what is published
is :mod:`.catalog`'s (re-exported here: ``Artifact``, ``load``, ``default_root``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Callable, Collection

from kolectra.core import storage
from kolectra.core.errors import EnvironmentProblem, Terminated
from kolectra.core.stage import StageOutput, progress
from kolectra.pipeline.store import aside, followers, inputs, shared_areas, sweep, workspace
from kolectra.pipeline.store.catalog import Artifact, Catalog, built_from_others, load
from kolectra.pipeline.store.manifest import (
    KINDS,
    MANIFEST,
    SCHEMA,
    ArtifactError,
    fingerprint_inputs,
    hash_tree,
    read_manifest,
    sha256_file,
    verify_dir,
    write_json,
)
from kolectra.pipeline.store.request import (
    Request,
    check_layout,
    folder_name,
    forced_over,
    in_its_folder,
    manifest_of,
    own_first,
    reserved,
    reusing,
)
from kolectra.pipeline.store.roots import default_root
from kolectra.pipeline.store.workspace import Resumable

__all__ = ["Artifact", "ArtifactError", "Catalog", "Resumable", "Store", "default_root",
           "fingerprint_inputs", "load", "sha256_file", "verify_dir", "KINDS", "MANIFEST", "SCHEMA"]


def _put_back(replaced: Path | None, final: Path) -> None:
    """The copy moved out of ``final`` for a build that was then not published (a Ctrl-C or SIGTERM as the
    first of ``--force``'s two renames returned), back in place: it was left in .tmp, so the folder was gone
    from ``artifacts list`` until a sweep, and the next ``--force`` (whose sweep deletes it) built the copy
    under another ``--name``."""
    if replaced is not None and not os.path.lexists(final) and replaced.is_dir() and any(replaced.iterdir()):
        with contextlib.suppress(OSError):
            os.replace(replaced, final)
            _fsync_dir(final.parent)


class Store(Catalog):
    """A root's artifacts (finding and checking: :class:`~kolectra.pipeline.store.catalog.Catalog`) and
    how new ones are built."""

    @property
    def built_here(self) -> set[str]:
        """The ids of the artifacts this store object built and published in this process: any other
        it returned was reused (the run's summary marks those; a manifest's time, to the second, could
        not tell a reuse in the second of its build)."""
        return self.__dict__.setdefault("_built_here", set())

    # ---- reading -------------------------------------------------------------------------
    def local(self, art: Artifact, only: Callable[[str], bool] | None = None) -> Path:
        """A local directory with ``art``'s files for a stage to read: here, where it is (a parent
        kept in a store: a checked copy, :meth:`kolectra.pipeline.store.remote.RemoteStore.local`)."""
        if not isinstance(art.path, Path):
            return self.catalogs(art.root).local(art, only)
        return art.path

    def unpublished(self, kind: str | None = None) -> list[str]:
        """One line for each complete build a kill left unpublished in ``.tmp`` (:mod:`.aside`), with no
        folder of its id: ``artifacts list`` says them; none on a store root (it moves no copy aside)."""
        if storage.is_url(str(self.root)):
            return []
        return [aside.line(d, m) for d, m in aside.unpublished(Path(self.root), kind)]

    def _near_miss(self, ref: str, kind: str | None) -> str:
        said = super()._near_miss(ref, kind)
        if said or storage.is_url(str(self.root)):
            return said
        return aside.named(Path(self.root), ref, kind)

    def cache_dir(self, what: str) -> Path:
        """A local folder for what a stage keeps between runs outside every artifact (tokenised splits)."""
        return self.root / ".cache" / what

    def checkpoint_saved(self, step_dir: Path) -> None:
        """Called after the trainer saved a checkpoint: a local root keeps it where it is."""

    # ---- building ------------------------------------------------------------------------
    def name_for(self, request: Request) -> str:
        """The name ``request``'s artifact is published under as the root is now: the folder of its id's
        (a ``--force``d, damaged or stale copy is rebuilt there, under its name), else ``request.name``."""
        return folder_name(request, self._dirs(request.kind, request.id()))

    def _check(self, request: Request) -> str:
        """The id of ``request`` once its kind is known and every parent passed :meth:`require`."""
        if request.kind not in KINDS:
            raise ArtifactError(f"unknown artifact kind {request.kind!r}")
        if why := self._kind_leads_out(request.kind):
            raise ArtifactError(f"{why}: kolectra publishes artifacts only in their root's own folders (and refuses "
                                "one found through a link); to keep artifacts on another disk, make the root a "
                                f"folder there (--out /disk2/kolectra; the root itself may be a link) or move the "
                                f"{request.kind} folder back into the root")
        try:
            for parent in request.parents:
                self.require(parent)
        finally:
            self._checks_done()
        return request.id()

    def _kind_leads_out(self, kind: str) -> str | None:
        """Why ``ROOT/<kind>`` may not receive an artifact, or None: a symlink, or a folder resolving outside
        the root (a build would be published through it, and the store refuses every artifact found through
        a link). The root itself may be a link: it is the folder the user named."""
        return None if storage.is_url(str(self.root)) else workspace.symlinked(Path(self.root), kind)

    def build(self, request: Request, produce: Callable[[Path], StageOutput], force: bool = False,
              resumable: bool | Resumable = False, resume: bool | str = False, in_place: bool = False) -> Artifact:
        """Return the artifact for ``request``, producing it (atomically) only if needed.

        A ``resumable`` stage (pretraining) is built in a lasting run directory that survives a
        failed or killed run: with ``resume`` its interrupted run (or its family's; only its own
        with ``resume="exact"``) continues from the stage's own checkpoints; without it an
        interrupted run of the same request is discarded first. ``in_place`` (the Beam stages) says
        the stage can write where the artifact lives: on a store root; a local one ignores it."""
        aid = self._check(request)  # 1. check
        if rank := followers.follower_rank(resumable):
            return self._follow(request, produce, force, rank)
        with contextlib.ExitStack() as held:
            held.enter_context(workspace.request_lock(self.root, request.kind, aid))  # 2. reserve
            found = self._join(request, reuse=not force)  # 3. join
            if found is not None:
                return found
            existing = self._dirs(request.kind, aid)
            request = in_its_folder(request, existing)  # --force: rebuilt where it is
            out, run = self._prepare(request, resumable, resume, held, force and bool(existing))  # 4. prepare
            forced_over(run, force, bool(existing))
            started = workspace.now()
            try:
                output = produce(out)  # 5. produce
                if run is not None:  # 6. seal
                    run.set_aside()
                self._seal(out, request, output, started, run)
                final = self._publish(out, request)  # 7. publish
            except BaseException as e:
                self._abandon(request, out, run, e, force)
                raise
            with said_published(request.kind, final):
                self.built_here.add(aid)
                if run is not None:  # 8. clean
                    shutil.rmtree(run.path, ignore_errors=True)
        with said_published(request.kind, final):
            return load(final)

    def _follow(self, request: Request, produce: Callable[[Path], StageOutput], force: bool, rank: int) -> Artifact:
        """A data-parallel rank after the first: no lock, no publishing. It trains in rank 0's run
        directory (once rank 0 has prepared it) and returns what rank 0 publishes."""
        kind, aid = request.kind, request.id()
        # decided as rank 0 decides (:meth:`_published`): a rank that took a stale or damaged copy, which rank
        # 0 rebuilds, returned at once and left rank 0 waiting for it in the training's collectives
        if not force and (found := self._published(request, quiet=True)) is not None:
            return found  # rank 0 reuses it too
        run = workspace.Run(self.root / workspace.WORK / f"{kind}-{aid}")
        followers.wait_for(f"rank 0 to prepare {run.path}", lambda: (run.path / workspace.REQUEST).is_file(), rank)
        followers.wait_for_rank_0_group(rank)
        with followers.training_beside(kind, rank):
            produce(run.out)
        started = run.started()  # the copy rank 0 publishes is written after its run began: not an older one

        def published() -> Artifact | None:
            return self._current(request) if (self.published_at(kind, aid) or 0.0) >= started else None
        return followers.wait_for(f"rank 0 to publish {kind} {aid}", published, rank)

    def _current(self, request: Request) -> Artifact | None:
        """The published artifact of ``request`` if it was built from the request's parents as they are
        now: what rank 0 publishes, and a follower waits for (sealed by rank 0: not hashed again)."""
        found = self.find(request.kind, request.id())
        return None if found is None or built_from_others(found.manifest, request.parents) else found

    def _join(self, request: Request, reuse: bool) -> Artifact | None:
        """The published artifact, or a sealed but unpublished build of it (then published now).

        Under the request's lock, earlier attempts at it are dead: their ``.tmp`` directories go,
        and its run too once the artifact exists; then whatever else is provably dead."""
        kind, aid = request.kind, request.id()
        run = workspace.Run(self.root / workspace.WORK / f"{kind}-{aid}")
        found = self._published(request) if reuse else None
        # a root sharing .work may be building this request now, or have left its run there (Run.foreign): its own
        unheld = [] if run.live() or run.foreign(self.root) else [run.out]
        if reuse and not found and (sealed := self._sealed(kind, aid, [*workspace.leftovers(self.root, kind, aid),
                                                                        *unheld], request.parents)):
            progress(f"{kind}: publishing {sealed[0]}, a complete build of this request whose run was stopped "
                     "just before publishing it")
            found = load(self._publish_as(sealed[0], kind, aid, str(sealed[1]["name"])))
        if not found:  # to be rebuilt: the copy a kill left aside stands meanwhile
            self._put_back_before_rebuilding(request, reuse)
        # a run started after the copy found was written is a rebuild's (--force, or of a stale copy): its
        # checkpoints are in no copy, kept for --force --resume (as the sweep keeps them)
        done = found and unheld and (self.published_at(kind, aid) or 0.0) >= run.started()
        dead = workspace.leftovers(self.root, kind, aid) + ([run.path] if done else [])
        workspace.discard(self.root, dead)
        self.collect()
        return found

    def _put_back_before_rebuilding(self, request: Request, reuse: bool) -> None:
        """An id with no folder, about to be rebuilt (``--force``, or built from other builds of its parents
        now), whose complete copy a kill left in ``.tmp`` (``kill -9`` between ``--force``'s two renames: the
        copy published moved aside, the new build not yet in place): the newest such copy is published before
        the build, as an uninterrupted rebuild leaves the copy in place until it replaces it. The sweep below
        deleted them all, so a rebuild then stopped or failed left no copy at all. Whatever its parents are
        now: ``artifacts gc`` puts it back as well. A resumable run's own ``out/`` is not one: it goes with
        its run (discarded, or continued by ``--resume``). Not ``--force``d, it is rebuilt for being built from
        another build of a parent: a stop of the rebuild says it is kept as it was, and why (:meth:`_abandon`)."""
        kind, aid = request.kind, request.id()
        if self._dirs(kind, aid):
            return
        if sealed := self._sealed(kind, aid, workspace.leftovers(self.root, kind, aid)):
            progress(f"{kind}: putting back {sealed[0]}, a complete copy of {aid} left unpublished by a run stopped "
                     f"as it was publishing, before rebuilding it{'' if reuse else ' (--force)'}")
            final = self._publish_as(sealed[0], kind, aid, str(sealed[1]["name"]))
            if reuse and (stale := built_from_others(sealed[1], request.parents)):
                self.__dict__.setdefault("_passed_over", {})[final] = stale.removeprefix("was ")

    def _published(self, request: Request, quiet: bool = False) -> Artifact | None:
        say = (lambda line: None) if quiet else progress
        passed = self.__dict__["_passed_over"] = {}  # why each copy is rebuilt: a stopped rebuild's words (_abandon)
        for d in own_first(request, self._dirs(request.kind, request.id())):
            problems = verify_dir(d)
            if not problems and (stale := built_from_others(load(d).manifest, request.parents)):
                say(f"{request.kind}: existing {d} {stale}; rebuilding")
                passed[d] = stale.removeprefix("was ")
                continue
            if not problems:
                say(reusing(request, d))
                return load(d)
            say(f"{request.kind}: existing {d} is damaged ({problems[0]}); rebuilding")
            passed[d] = f"damaged ({problems[0]})"
        return None

    def _prepare(self, request: Request, resumable: bool | Resumable, resume: bool | str,
                 held: contextlib.ExitStack, forced: bool = False) -> tuple[Path, workspace.Run | None]:
        """The build's private directory, and the resumable run it belongs to (None for .tmp); ``forced``: a
        ``--force`` rebuild over a copy published there (:func:`.workspace.open_run`)."""
        # a resumable build is published from .work; a --force'd copy moves aside into .tmp
        for area in (workspace.TMP, workspace.WORK) if resumable else (workspace.TMP,):
            if why := shared_areas.crossing(self.root, area, request.kind):
                raise ArtifactError(why)
        if not resumable:
            return workspace.private_dir(self.root, request.kind, request.id(), held), None
        spec = resumable if isinstance(resumable, Resumable) else Resumable(
            {"kind": request.kind, "name": request.name, "parents": [p.id for p in request.parents]})
        record = {"id": request.id(), "kind": request.kind, "name": request.name, "family": spec.family,
                  "scratch": list(spec.scratch), "config": request.config, "stage_version": request.stage_version}
        run = workspace.open_run(self.root, record, resume, held, request.operational, again=spec.again, forced=forced)
        return run.out, run

    def _abandon(self, request: Request, out: Path, run: workspace.Run | None, e: BaseException,
                 forced: bool = False) -> None:
        """After a failed step 5-7: delete what cannot be resumed; say (as a note) what was kept (a copy rebuilt
        for being damaged or stale, not ``--force``d: as it was, and why; under -q no other line says so)."""
        if getattr(e, PUBLISHED, False):  # it stopped after the rename: said so already, nothing to remove
            return
        # a refused request: the message says why, nothing to add; the environment's failure (a full
        # disk, a store that went away) is worth resuming once mended, so it is told what was kept
        refused = isinstance(e, (ValueError, ArtifactError)) and not isinstance(e, EnvironmentProblem)
        if run is not None and run.state():
            if not refused:
                e.add_note(f"{request.kind}: its working state is kept in {run.path}; {run.again} continues it")
                if run.id != request.id():  # another request's run it continued: gc lists it with the same words
                    with contextlib.suppress(OSError):  # (a full disk: as it was)
                        run.record_again()
            return
        shutil.rmtree(run.path if run is not None else out, ignore_errors=True)
        if not refused:  # a --force'd (or damaged) copy is moved only as the build is published: it stands
            there = self._dirs(request.kind, request.id())
            why = None if forced or not there else self.__dict__.get("_passed_over", {}).get(there[0])
            e.add_note(f"{request.kind}: nothing published; its partial build in {out} was removed"
                       + (f"; the copy published there before, {there[0]}, is kept" if there else "")
                       + (f" as it was, {why}; the next build rebuilds it" if why else ""))

    def _seal(self, out: Path, request: Request, output: StageOutput, started: str,
              run: workspace.Run | None) -> None:
        """Hash every file, then write manifest.json: last, its presence means complete."""
        reserved(out)
        check_layout(request, out, output)
        if inputs.spills(request.inputs):
            inputs.write(request.inputs, out)
        write_json(out / MANIFEST, manifest_of(request, output, hash_tree(out), started, run))

    def _publish(self, out: Path, request: Request) -> Path:
        return self._publish_as(out, request.kind, request.id(), request.name)

    def _publish_as(self, out: Path, kind: str, aid: str, name: str) -> Path:
        """One rename into place, under the existing directory of this id if there is one."""
        existing = [d for d in self._dirs(kind, aid) if d.name == f"{name}-{aid}"] or self._dirs(kind, aid)
        final = existing[0] if existing else self.root / kind / f"{name}-{aid}"
        final.parent.mkdir(parents=True, exist_ok=True)
        replaced = None
        try:
            if final.is_symlink():  # put there by hand (refused by verify): the link goes, never what it leads to
                final.unlink()
            elif final.exists():  # --force, or damaged: out of the way first (a kill here leaves it in .tmp)
                replaced = workspace.private_dir(self.root, kind, aid)
                os.replace(final, replaced)  # a directory may replace an empty one
            os.replace(out, final)
            workspace.unmark(final)
            _fsync_dir(final.parent)
            if replaced is not None:  # --force on a large artifact: seconds, a Ctrl-C's likeliest moment
                shutil.rmtree(replaced, ignore_errors=True)
        except BaseException:
            # a Ctrl-C's handler runs as the rename's call returns, before any ``with`` after it is entered:
            # whether the build was published is what the disk says (its directory renamed away)
            if out.exists():
                _put_back(replaced, final)
                raise
            with said_published(kind, final):
                raise
        return final

    def collect(self, interrupted: bool = False, dry_run: bool = False, failed: list | None = None
                ) -> tuple[list[Path], list[workspace.Run]]:
        """``kolectra artifacts gc``: remove what is provably dead (and, with ``interrupted``, runs
        that could be resumed); returns (removed, interrupted runs kept), and adds to ``failed`` what could
        not be removed whole (:class:`.removal.Failed`: never said removed). A complete build in ``.tmp``
        of an id not published is published instead, the newest of them: a kill between ``--force``'s
        two renames left the old copy and the new build there, both sealed, and the sweep deleted both."""
        chosen: dict[tuple[str, str], tuple[Path, dict] | None] = {}  # (kind, id) -> the build to publish

        def salvage(kind: str, aid: str, d: Path, dry_run: bool) -> bool:  # called under the request's lock
            if (kind, aid) not in chosen:  # once an id, whichever of its directories the sweep meets first
                chosen[kind, aid] = None if self.find(kind, aid) is not None else \
                    self._sealed(kind, aid, [*workspace.leftovers(self.root, kind, aid), d])
            pick = chosen[kind, aid]
            if pick is None or pick[0] != d:
                return False
            if why := self._kind_leads_out(kind):  # kept in .tmp for when the kind folder is a folder again
                progress(f"{kind}: not publishing {d}, a complete build of {aid}: {why}; kept until that is a folder")
                return True
            progress(f"{kind}: {'would publish' if dry_run else 'publishing'} {d}, a complete build of {aid} whose "
                     "run was stopped just before publishing it")
            if not dry_run:
                self._publish_as(d, kind, aid, str(pick[1]["name"]))
            return True

        return sweep.sweep(self.root, self.published_at, interrupted, dry_run, salvage=salvage, failed=failed)

    def _sealed(self, kind: str, aid: str, candidates: list[Path],
                parents: Collection[Artifact] | None = None) -> tuple[Path, dict] | None:
        """The newest complete build of ``aid`` among ``candidates`` (by its manifest's finishing time) and
        its manifest: intact and, given the request's ``parents``, built from them as they are now. Every
        candidate's manifest is read; the builds are hashed newest first, until one passes."""
        found = []
        for c in candidates:
            with contextlib.suppress(ArtifactError, KeyError, TypeError, AttributeError):
                m = read_manifest(c)
                if m["id"] == aid and m["kind"] == kind:
                    found.append((str((m.get("provenance") or {}).get("finished", "")), c.name, c, m))
        for _, _, c, m in sorted(found, key=lambda f: f[:2], reverse=True):
            if not verify_dir(c) and not (parents is not None and built_from_others(m, parents)):
                return c, m
        return None


PUBLISHED = "kolectra_published"  # set on an exception raised once the artifact was in place


@contextlib.contextmanager
def said_published(kind: str, final: Path | str):
    """A failure or Ctrl-C after the artifact's rename into place (removing --force's old copy, the
    run's checkpoints, the lock), or on a store root after its manifest landed in the bucket (reading it
    back, the clean-up, the lease's release): its line said 'nothing published; its partial build in ...
    was removed' (or, after the build returned, 'nothing was published') with the artifact published; it
    now says where the artifact is, once, and marks the exception (:data:`PUBLISHED`): nothing is removed."""
    try:
        yield
    except BaseException as e:
        if not getattr(e, PUBLISHED, False):
            setattr(e, PUBLISHED, True)
            e.add_note(f"{kind}: published as {final} before the {_stop_word(e)}")
        raise


def _stop_word(e: BaseException) -> str:
    if isinstance(e, Terminated):  # SIGTERM, SIGHUP
        return "stop"
    return "interrupt" if isinstance(e, KeyboardInterrupt) else "failure"


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
