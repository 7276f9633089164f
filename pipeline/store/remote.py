"""The artifact store on an object store: ROOT is ``s3://bucket/prefix``, ``gs://bucket/prefix``, ...

The same layout and request ids as a local root (:mod:`.artifacts`), with the publish protocol
rebuilt for stores that have no rename and no ``flock`` (files through :mod:`kolectra.core.storage`):

1. check    every parent's objects listed against its manifest (sizes, and the store checksums
            recorded when it was published): one LIST, no download; the stage's own ``require``
            of that parent made it already, and this one reuses it (:meth:`Catalog.require`).
2. join     a prefix ``ROOT/<kind>/<name>-<id>/`` whose manifest checks is reused, before any
            lease is asked for (so reuse never waits on one), and again once the lease is held.
3. reserve  a lease object ``ROOT/.locks/<kind>-<id>.lease`` created with a conditional write
            (S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``): one builder per request; a
            second identical run waits, saying for whom, then joins the first one's result. The
            holder renews it (``If-Match`` its own version) every third of its time to live; one
            not rewritten for a whole lease (by the store's clock) is taken over, again by a
            conditional write (:mod:`.lease`).
4. prepare  a local build directory in the cache, or for the Beam stages the final prefix itself:
            their workers write there, and report each file's size and sha256 as they write it.
5. produce  the stage runs.
6. publish  data objects first (uploaded, or already written in place and checked against the
            workers' reports), objects the build does not list removed (never a manifest), every
            object's store checksum read back in one listing, then ``manifest.json`` last, created
            conditionally (or replacing, conditionally, the ``--force``d or damaged copy this build
            found). Each of these steps first proves the lease is still this build's
            (:meth:`.lease.Lease.check`); a build that lost it writes and deletes nothing more.
            **The manifest is the commit marker**: every reader treats a prefix without a valid
            one as absent, so a kill or a lost connection at any point leaves nothing that looks
            complete, and a rerun writes the same objects again. If another writer's manifest got
            there first, theirs is joined. A build never deletes a manifest.
7. clean    the local build directory, the run's state in the store, the lease (a conditional
            delete of its own version).

Reading: a stage gets a *local* copy of a parent, downloaded into ``$KOLECTRA_CACHE`` (default
``~/.cache/kolectra``) with every file's sha256 checked against the manifest as it arrives
(:meth:`RemoteStore.local`); a copy already there is re-hashed, not trusted. The reading process holds the
copy's lock until it ends: ``kolectra artifacts gc --cache`` (:mod:`.copies`) removes only copies none reads. The Beam stages read
their parents' objects in place instead. ``kolectra artifacts verify`` streams every object
through sha256 (nothing is written), so tampering is named per object as on a local root;
``verify --quick`` makes the stage's check instead (one listing, no object downloaded).

Pretraining's working state (checkpoints) is mirrored to ``ROOT/.work/<kind>-<id>/`` after each
save, so ``--resume`` continues from the store on any machine (:mod:`.remote_runs`). The lease is
:mod:`.lease`'s.

``kolectra artifacts gc`` removes prefixes without a manifest whose lease has expired (or that
have none), expired leases, and run state of published requests (:mod:`.remote_gc`). Keys read
from the store name local files only through :func:`kolectra.core.storage.local_target`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Callable

from kolectra.core import conditional, scratch, storage
from kolectra.core.errors import EnvironmentProblem
from kolectra.core.stage import StageOutput, progress
from kolectra.pipeline.store import copies, followers, inputs, workspace
from kolectra.pipeline.store.artifacts import PUBLISHED, Resumable, Store, said_published
from kolectra.pipeline.store.catalog import Artifact, Catalog, built_from_others
from kolectra.pipeline.store.lease import Lease, LeaseLost
from kolectra.pipeline.store.manifest import KINDS, MANIFEST, ArtifactError, hash_tree, sha256_file, unsafe_path
from kolectra.pipeline.store.remote_artifacts import load_remote, remote_problems, upath
from kolectra.pipeline.store.remote_gc import StoreCollect
from kolectra.pipeline.store.remote_runs import WORK, StoreRuns, cache_root
from kolectra.pipeline.store.request import (
    Request,
    check_layout,
    forced_over,
    in_its_folder,
    manifest_of,
    own_first,
    reserved,
    reusing,
)
from kolectra.pipeline.store.roots import unfollowed

# set on a second stop that came while the store was asked whether a build's manifest landed, or on the
# failure of its write when the store could not be asked: unknown
UNSURE = "kolectra_publish_unsure"


class RemoteStore(StoreRuns, StoreCollect, Store):
    """A store root's artifacts (finding, checking, building); ``root`` is a URL."""

    def __init__(self, root: str, catalogs: Callable[[Path | str], Catalog]):
        storage.check_root(str(root))
        self.catalogs = catalogs  # how another root is opened: factory.catalog_for, the one that knows this class
        self.url = str(root).rstrip("/")
        self.root = upath(self.url)
        self._run_url: str | None = None
        self._lease: Lease | None = None  # the lease of the build in progress (its run state is mirrored under it)
        self._replacing: str | None = None  # the prefix whose published copy the build in progress began replacing
        # this run's checks (Catalog.require) and the parents they looked up: dropped once a build has
        # checked its parents (_checks_done)
        self._checked: dict[str, tuple] = {}
        self._looked_up: dict[tuple, Artifact | None] = {}

    # ---- finding ---------------------------------------------------------------------------
    def _kind_url(self, kind: str) -> str:
        return storage.join(self.url, kind)

    def scan(self, kind: str | None = None) -> tuple[list[Artifact], list[str]]:
        arts, broken = [], []
        for k in [kind] if kind else KINDS:
            for name in storage.children(self._kind_url(k)):
                try:
                    arts.append(load_remote(self.root / k / name))
                except ArtifactError as e:
                    broken.append(str(e))
        return arts, broken

    def _dirs(self, kind: str, aid: str) -> list:
        return [self.root / kind / n for n in storage.children(self._kind_url(kind)) if n.endswith(f"-{aid}")]

    _load = staticmethod(load_remote)  # Catalog.find: a manifest read over the store

    def resolve(self, ref, kind: str | None = None) -> Artifact:
        if storage.is_url(str(ref)):
            try:
                return load_remote(upath(str(ref)))
            except ArtifactError:
                if not storage.listing(str(ref)):  # not "incomplete": nothing is there (or no such bucket)
                    storage.check_bucket(str(ref))
                    raise ArtifactError(f"no artifact at {ref}: nothing is stored under it") from None
                raise
        p = Path(str(ref))
        if p.is_dir() and (p / MANIFEST).is_file():
            return Catalog(p.parent.parent, self.catalogs).resolve(p)
        return self._pick(str(ref), kind)  # the catalog's matching and its words for what a ref does not find

    def _names(self, kind: str) -> list[str]:
        return storage.children(self._kind_url(kind))

    def _complete(self, found: list[tuple[str, str]]) -> list[Artifact]:
        hits = []
        for k, n in found:  # only complete ones count: a prefix without a manifest is absent
            with contextlib.suppress(ArtifactError):
                hits.append(load_remote(self.root / k / n))
        return hits

    def parent(self, art: Artifact, pid: str) -> Artifact | None:
        ref = next((r for r in art.manifest.get("parent_refs", []) if r.get("id") == pid), {})
        kinds = [ref["kind"]] if ref.get("kind") in KINDS else list(KINDS)
        roots = tuple(dict.fromkeys(str(r) for r in (art.root, self.root) if r is not None))
        key = (roots, tuple(kinds), pid, ref.get("path"))
        if key not in self._looked_up:  # a run's checks ask for one parent several times (its children's refs)
            self._looked_up[key] = self._parent(roots, kinds, pid, ref)
        return self._looked_up[key]

    def _parent(self, roots: tuple[str, ...], kinds: list[str], pid: str, ref: dict) -> Artifact | None:
        for root in roots:
            cat = self if root == self.url else self.catalogs(root)
            for k in kinds:
                found = cat.find(k, pid, ref.get("name"))
                if found is not None:
                    return found
        with contextlib.suppress(ArtifactError, OSError, storage.StoreError):
            where = ref.get("path")
            if unfollowed(where, roots):
                return None  # a manifest is data: no other root or protocol is contacted on its word
            recorded = (load_remote(upath(where)) if storage.is_url(where) else Catalog(catalogs=self.catalogs).resolve(Path(where))) \
                if where else None
            return recorded if recorded is not None and recorded.id == pid else None
        return None

    def _unreadable(self, art: Artifact, ref: dict) -> list[str]:
        kinds = [ref["kind"]] if ref.get("kind") in KINDS else KINDS
        for d in (d for k in kinds for d in self._dirs(k, ref["id"])):
            try:
                load_remote(d)
            except ArtifactError as e:
                return [f"parent {ref['id']} of {art.path} is unreadable: {e}"]
        return []

    # ---- checking --------------------------------------------------------------------------
    def verify(self, art, quick: bool = False) -> list[str]:
        """Every object streamed through sha256 against the manifest, and every changed parent;
        ``quick``: what :meth:`require` checks, one listing and no object read."""
        if not isinstance(art, Artifact):
            try:
                art = self.resolve(art)
            except ArtifactError as e:
                return [str(e)]
        if not _remote(art):
            return super().verify(art, quick=quick)
        if not quick:  # not a stage's check: its parents as they are now, not as an earlier check looked them up
            self._looked_up.clear()
        return remote_problems(art, content=not quick) + self.changed_parents(art)

    def _checks_done(self) -> None:
        super()._checks_done()
        self._looked_up.clear()

    def local(self, art: Artifact, only: Callable[[str], bool] | None = None) -> Path:
        """A local directory holding ``art``'s files (those ``only`` accepts), each checked against
        the manifest's sha256 as it is downloaded; a copy already in the cache is re-hashed."""
        if not _remote(art):
            return art.path
        d = cache_root() / "artifacts" / art.kind / f"{art.path.name}-{art.manifest['digest'][:12]}"
        copies.hold(d)  # until this process ends: `artifacts gc --cache` removes no copy a process reads
        d.mkdir(parents=True, exist_ok=True)
        with workspace.request_lock(cache_root(), art.kind, art.id):  # one download per machine at a time
            for entry in art.manifest["files"]:
                if only is not None and not only(entry["path"]):
                    continue
                dest = storage.local_target(d, entry["path"], str(art.path))
                if dest.is_file() and dest.stat().st_size == entry["bytes"] and \
                        sha256_file(dest) == entry["sha256"]:
                    continue
                storage.download(f"{art.path}/{entry['path']}", str(dest), entry["sha256"])
            (d / MANIFEST).write_bytes(json.dumps(art.manifest, indent=2, ensure_ascii=False).encode() + b"\n")
        return d

    def cache_dir(self, what: str) -> Path:
        return self._local_root() / ".cache" / what

    # ---- building --------------------------------------------------------------------------
    def build(self, request: Request, produce: Callable, force: bool = False,
              resumable: bool | Resumable = False, resume: bool | str = False, in_place: bool = False) -> Artifact:
        aid = self._check(request)
        if rank := followers.follower_rank(resumable):
            return self._follow_remote(request, produce, force, resume, rank)
        if not force and (found := self._published(request)) is not None:
            return found  # before the lease: reusing what is published never waits on one
        lease = Lease(self.url, request.kind, aid)
        lease.acquire()
        held = contextlib.ExitStack()  # a resumable build's local run, marked live until the build ends
        published = None
        try:
            if not force and (found := self._published(request, quiet=True)) is not None:
                return found  # published by the run this one waited for
            final, request = self._final(request)
            # the manifest there now (a --force'd or damaged copy) is replaced, conditionally, by the
            # new one; never deleted, so a build that lost its lease can destroy no published artifact
            seen = self._manifest_version(final)
            self._lease, self._replacing = lease, None
            if in_place:  # the workers overwrite what they write; what they did not is removed before publishing
                out, run = final, None
            elif resumable:
                out, run = self._prepare_run(request, resumable, resume, held, force and seen is not None)
                forced_over(run, force, seen is not None)
            else:  # in this root's folder of the cache, marked live: `artifacts gc` removes one a kill -9 left
                out, run = str(workspace.private_dir(self._local_root(), request.kind, aid, held)), None
            started = workspace.now()
            self._run_url = storage.join(self.url, WORK, f"{request.kind}-{aid}") if run is not None else None
            try:
                output = produce(out if in_place else Path(out))
                if run is not None:
                    run.set_aside()
                published = self._publish(request, output, out, final, started, run, in_place, lease, seen)
            except BaseException as e:
                self._abandon(request, out, final, run, in_place, e, lease)
                raise
            finally:
                self._run_url = None
            with said_published(request.kind, final):  # a stop from here on: it is published all the same
                self.built_here.add(aid)
                if run is not None:
                    shutil.rmtree(run.path, ignore_errors=True)
                    if lease.holds():  # the store's copy of the run: only while it is provably this build's
                        storage.remove(storage.join(self.url, WORK, f"{request.kind}-{aid}"), recursive=True)
                elif not in_place:
                    shutil.rmtree(out, ignore_errors=True)
            return published
        finally:
            self._lease = None
            with said_published(request.kind, final) if published is not None else contextlib.nullcontext():
                held.close()
                lease.release()

    def _final(self, request: Request) -> tuple[str, Request]:
        """Where the build is published, and the request named as that prefix (a copy there is rebuilt in
        place, under its own name: :func:`~kolectra.pipeline.store.request.in_its_folder`)."""
        existing = own_first(request, self._dirs(request.kind, request.id()))
        if existing:
            return str(existing[0]), in_its_folder(request, existing)
        return storage.join(self.url, request.kind, f"{request.name}-{request.id()}"), request

    @staticmethod
    def _manifest_version(prefix: str) -> str | None:
        try:
            return storage.checksum_of(storage.info(storage.join(prefix, MANIFEST)))
        except FileNotFoundError:
            return None

    def _published(self, request: Request, quiet: bool = False) -> Artifact | None:
        for d in own_first(request, self._dirs(request.kind, request.id())):
            try:
                art = load_remote(d)
            except ArtifactError:
                continue  # no manifest: an interrupted build, absent
            problems = remote_problems(art, content=False)
            if not problems and (stale := built_from_others(art.manifest, request.parents)):
                if not quiet:
                    progress(f"{request.kind}: existing {d} {stale}; rebuilding")
                continue
            if not problems:
                if not quiet:
                    progress(reusing(request, d))
                return art
            if not quiet:
                progress(f"{request.kind}: existing {d} is damaged ({problems[0]}); rebuilding")
        return None

    def _drop_unlisted(self, final: str, keep: set[str], lease: Lease) -> None:
        """Remove the objects under ``final`` that the new build does not list (an older copy's, a
        retried worker's), once the lease is proved ours; never a manifest."""
        extra = sorted(set(storage.listing(final)) - keep - {MANIFEST})
        if extra:
            lease.check()
        for rel in extra:
            storage.remove(storage.join(final, rel))

    def _publish(self, request: Request, output: StageOutput, out: str, final: str, started: str,
                 run: workspace.Run | None, in_place: bool, lease: Lease, seen: str | None) -> Artifact:
        lease.check()
        if in_place:
            files = self._check_reported(final, output)
            self._replacing = final if seen is not None else None  # its objects rewritten or removed from here on
            if inputs.spills(request.inputs):  # written here, uploaded beside what the workers wrote
                files = sorted([*files, self._upload_inputs(request, final, lease)], key=lambda e: e["path"])
        else:
            reserved(Path(out))
            check_layout(request, Path(out), output)
            if inputs.spills(request.inputs):
                inputs.write(request.inputs, Path(out))
            files = hash_tree(Path(out))
            self._replacing = final if seen is not None else None  # its objects rewritten or removed from here on
            for e in files:  # data objects first, each while the lease is provably this build's
                lease.check(recent=True)
                storage.upload(str(Path(out) / e["path"]), storage.join(final, e["path"]))
        self._drop_unlisted(final, {e["path"] for e in files}, lease)
        found = storage.listing(final)
        for e in files:
            obj = found.get(e["path"])
            if obj is None or int(obj.get("size", -1)) != e["bytes"]:
                raise ArtifactError(f"{final}/{e['path']}: not in the store as written "
                                    f"({'missing' if obj is None else obj.get('size')} bytes); nothing published")
            if (checksum := storage.checksum_of(obj)) is not None:
                e["checksum"] = checksum
        manifest = manifest_of(request, output, files, started, run)
        body = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
        lease.check()
        try:  # the commit: created, or replacing exactly the copy this build found (--force, damaged)
            conditional.create_exclusive(storage.join(final, MANIFEST), body, replacing=seen)
        except (conditional.PreconditionFailed, FileNotFoundError):
            if (own := self._own_manifest(final, body)) is None:  # its read back failed: either run's
                progress(f"{request.kind}: a manifest is in {final} already and could not be read back, so whether "
                         "this run's (its reply lost) or another run's published first cannot be told; using it")
            elif not own:  # 412 on our own PUT retried after its reply was lost: ours
                progress(f"{request.kind}: another run published {final} first; using it")
        except BaseException as failure:  # a Ctrl-C, SIGTERM or lost connection as the manifest went: it may have landed
            try:
                landed = self._landed(final, seen)
            except BaseException as again:  # a second Ctrl-C or SIGTERM during that one request: unknown
                setattr(again, UNSURE, True)
                raise
            if landed is None:  # the store could not tell either (still unreachable): unknown, as above
                setattr(failure, UNSURE, True)
            if not landed:
                raise
            with said_published(request.kind, final):  # its data objects are the artifact's now: kept
                raise
        with said_published(request.kind, final):
            return load_remote(upath(final))

    @staticmethod
    def _own_manifest(final: str, body: bytes) -> bool | None:
        """The manifest under ``final`` is the one this build wrote (its very bytes: the provenance's times
        differ between runs). A PUT that landed but whose reply was lost is sent again by botocore/s3fs (or
        google-cloud-storage), and the store refuses that retry (412) because the first one landed. None:
        it could not be read back (not provably ours, nor another run's)."""
        try:
            return storage.read_bytes(storage.join(final, MANIFEST)) == body
        except Exception:  # noqa: BLE001 - unreadable now: whose it is cannot be told
            return None

    def _landed(self, final: str, seen: str | None) -> bool | None:
        """A manifest other than the one this build found is under ``final`` (one request; None when the
        store cannot tell: its answer to the manifest's write lost, the write may have landed)."""
        try:
            return self._manifest_version(final) not in (seen, None)
        except Exception:  # noqa: BLE001 - the store unreachable: unknown, the build's own failure stands
            return None

    @staticmethod
    def _listed(final: str) -> set[str]:
        """The objects the manifest under ``final`` lists (none without one; an unreadable one raises)."""
        if RemoteStore._manifest_version(final) is None:
            return set()
        return {e["path"] for e in load_remote(upath(final)).manifest["files"]}

    @staticmethod
    def _upload_inputs(request: Request, final: str, lease: Lease) -> dict:
        """The request's input records as INPUTS_FILE under ``final`` (:mod:`.inputs`): its entry."""
        cache_root().mkdir(parents=True, exist_ok=True)
        with scratch.temporary_directory("upload", dir=cache_root()) as tmp:
            entry = inputs.write(request.inputs, Path(tmp))
            lease.check(recent=True)
            storage.upload(str(Path(tmp) / entry["path"]), storage.join(final, entry["path"]))
        return entry

    @staticmethod
    def _check_reported(final: str, output: StageOutput) -> list[dict]:
        """The files the Beam workers reported writing (path, bytes, sha256), checked for shape."""
        if output.files is None:
            raise ArtifactError(f"{final}: the stage wrote in place but reported no files")
        files = []
        for e in sorted(output.files, key=lambda e: e["path"]):
            if why := unsafe_path(e.get("path")) or (e["path"] == inputs.INPUTS_FILE and "is the store's"):
                raise ArtifactError(f"{final}: a worker reported the file {e.get('path')!r}, which {why}")
            files.append({"path": e["path"], "bytes": int(e["bytes"]), "sha256": str(e["sha256"])})
        return files

    def _abandon(self, request: Request, out: str, final: str, run: workspace.Run | None, in_place: bool,
                 e: BaseException, lease: Lease) -> None:
        if getattr(e, PUBLISHED, False):  # stopped once its manifest was in: said so, its objects are kept
            return
        if getattr(e, UNSURE, False):  # stopped again (or the store unreachable) while asking whether its manifest
            # landed: none removed, for a published artifact's objects are its data (an unpublished prefix goes
            # with `artifacts gc`)
            # a copy published there before (--force, a damaged one) keeps its manifest if this one did not land:
            # `artifacts gc` never removes a prefix with one, and verify then checks that copy
            e.add_note(f"{request.kind}: {'stopped' if isinstance(e, KeyboardInterrupt) else 'failed'} as its "
                       f"manifest was written to {final}; nothing was removed: "
                       f"`kolectra artifacts verify {final}` says whether it was published "
                       + ("or the copy published there before is whole (if neither, the next build rebuilds it)"
                          if self._replacing == final else
                          "(if not, `kolectra artifacts gc` removes it once its lease expires)"))
            if run is not None and run.state():  # finished training: the next plain build discarded it, trained again
                e.add_note(self._kept_note(request.kind, storage.join(self.url, WORK, f"{request.kind}-{request.id()}"),
                                           run))
            return
        refused = isinstance(e, (ValueError, ArtifactError)) and not isinstance(e, EnvironmentProblem)  # as Store's
        # its objects are written under the same keys as the copy's it replaces: 'nothing published' alone
        # read as if that copy were as it was
        damaged = (f"the copy published there before may be damaged: this build had begun to replace its objects "
                   f"(`kolectra artifacts verify {final}` says; the next build rebuilds it)"
                   if self._replacing == final and not isinstance(e, LeaseLost) else None)
        if run is not None and run.state():
            if not refused:
                e.add_note(self._kept_note(request.kind, storage.join(self.url, WORK, f"{request.kind}-{request.id()}"),
                                          run))
            if damaged:
                e.add_note(f"{request.kind}: {damaged}")
            return
        kept = None
        with contextlib.suppress(Exception):
            if in_place and not isinstance(e, LeaseLost) and lease.holds():
                # what its workers wrote; never a manifest, nor an object of the copy published there (--force,
                # a damaged one rebuilt): removing those left its manifest listing objects that were gone
                kept = self._listed(final)
                self._drop_unlisted(final, kept, lease)
            elif run is not None:
                shutil.rmtree(run.path, ignore_errors=True)
            elif not in_place:
                shutil.rmtree(out, ignore_errors=True)
        if not refused or damaged:
            e.add_note(f"{request.kind}: nothing published under {final}"
                       + (f"; {damaged}" if damaged else "; the copy published there before is kept" if kept else ""))


def _remote(art: Artifact) -> bool:
    return storage.is_url(str(art.path))
