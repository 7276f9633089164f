"""A pretraining run on a store root: its working state kept in the store, so any machine resumes it.

Mixed into :class:`kolectra.pipeline.store.remote.RemoteStore`. The run itself works in a local directory
(``$KOLECTRA_CACHE/roots/<root hash>/.work/<kind>-<id>/``, the local protocol of
:mod:`.workspace`); each checkpoint the trainer completes is mirrored to
``ROOT/.work/<kind>-<id>/out/checkpoints/step-N/`` (files first, its manifest last; older steps
dropped), with ``request.json`` beside it and ``metrics.jsonl`` as parts, each checkpoint's new
lines one more, merged like a binary counter (:mod:`.log_parts`). ``--resume`` on a machine that has
nothing local fetches the newest mirrored step and the log. Ranks after the first of a data-parallel run
(:attr:`.workspace.Resumable.rank`) keep their own local copy, mirror only their ``rank-R.pt`` and
return what rank 0 publishes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable

from kolectra.core import storage
from kolectra.core.stage import progress
from kolectra.pipeline.store import followers, log_parts, workspace
from kolectra.pipeline.store.artifacts import Resumable
from kolectra.pipeline.store.catalog import Artifact
from kolectra.pipeline.store.manifest import MANIFEST
from kolectra.pipeline.store.request import Request

WORK = ".work"
CHECKPOINTS = "checkpoints"


def cache_root() -> Path:
    """Where copies of a store's artifacts and local build directories go."""
    return Path(os.environ.get("KOLECTRA_CACHE") or Path.home() / ".cache" / "kolectra")


class StoreRuns:
    """The run-keeping half of a store root (needs ``url``, ``find`` and ``_run_url``)."""

    _run_rank = 0  # the rank of this process in the build whose run is _run_url (a follower's: its own)
    _logs: dict[str, log_parts.Mirror] = {}  # the build's growing files mirrored as parts, by name
    # the newest checkpoint of the build's run complete in the store (its manifest there), as this
    # process last saw or wrote it: what an interrupt's line names, with no listing while it stops
    _in_store: str | None = None
    # the checkpoint whose manifest was being uploaded: a stop then may come after the store has it
    _landing: str | None = None

    def _follow_remote(self, request: Request, produce: Callable, force: bool, resume: bool | str,
                       rank: int) -> Artifact:
        """A data-parallel rank after the first (:meth:`Store._follow`), on this machine's own copy of
        the run: it may be another machine than rank 0's. Its part of each checkpoint is mirrored to
        the store beside rank 0's, and ``--resume`` fetches the run from there."""
        kind, aid = request.kind, request.id()
        if not force and (found := self._published(request, quiet=True)) is not None:  # as rank 0 decides
            return found
        run = workspace.Run(self._local_root() / workspace.WORK / f"{kind}-{aid}-rank{rank}")
        remote_run = storage.join(self.url, WORK, f"{kind}-{aid}")
        if not (resume and run.state()) or self._store_ahead(remote_run, run):
            shutil.rmtree(run.path, ignore_errors=True)
            if resume:
                followers.wait_for(f"rank 0 to prepare {remote_run}",
                                   lambda: storage.exists(storage.join(remote_run, workspace.REQUEST)), rank)
                self._fetch_run(remote_run, run)
        run.out.mkdir(parents=True, exist_ok=True)
        followers.wait_for_rank_0_group(rank)
        self._run_url, self._run_rank = remote_run, rank
        try:
            with followers.training_beside(kind, rank):
                produce(run.out)
        finally:
            self._run_url, self._run_rank = None, 0
        found = followers.wait_for(f"rank 0 to publish {kind} {aid}", lambda: self._current(request), rank)
        shutil.rmtree(run.path, ignore_errors=True)
        return found

    def _prepare_run(self, request: Request, resumable: bool | Resumable, resume: bool | str,
                     held: contextlib.ExitStack, forced: bool = False):
        """The local run this build works in, marked live (its build lock) until ``held`` closes: the
        build's end. ``gc`` on this machine sweeps this cache's runs, and took one unheld for dead."""
        spec = resumable if isinstance(resumable, Resumable) else Resumable(
            {"kind": request.kind, "name": request.name, "parents": [p.id for p in request.parents]})
        local_root = self._local_root()
        run = workspace.Run(local_root / workspace.WORK / f"{request.kind}-{request.id()}")
        remote_run = storage.join(self.url, WORK, f"{request.kind}-{request.id()}")
        self._in_store = self._landing = None  # (set by the listings below when resuming)
        if resume and (not run.state() or self._store_ahead(remote_run, run)):
            self._fetch_run(remote_run, run)
        record = {"id": request.id(), "kind": request.kind, "name": request.name, "family": spec.family,
                  "scratch": list(spec.scratch), "config": request.config, "stage_version": request.stage_version}
        # a fresh run discards the store's copy of this request's run too (below): said with this machine's, where
        # that copy holds a complete checkpoint (from another machine, or this one's cache since cleared: before
        # 2026-12-02 it went without a word)
        kept = [] if resume else self._steps(storage.listing(remote_run))
        # only this request's run: another's, kept in this machine's cache, is not the store's (family_resume);
        # --resume (True) as given, so that finding none is said, as on a disk root
        opened = workspace.open_run(local_root, record, resume, held, request.operational, family_resume=False,
                                    again=spec.again, forced=forced, also=remote_run if kept else "",
                                    work=storage.join(self.url, WORK))  # its runs' lines name the store's .work
        self._logs = {name: log_parts.Mirror(remote_run, opened.out / name) for name in log_parts.GROWING}
        if not resume:
            self._owned()
            storage.remove(remote_run, recursive=True)  # a fresh run: the store's old state is discarded too
        storage.write_bytes(storage.join(remote_run, workspace.REQUEST), (opened.path / workspace.REQUEST).read_bytes())
        return str(opened.out), opened

    def _kept_note(self, kind: str, remote_run: str, run: workspace.Run) -> str:
        """What an interrupted or failed build says it kept: the run on this machine, and in the store
        the newest checkpoint whose copy completed (a copy cut short leaves the one before, or none; one
        stopped as its manifest was written may be complete there: the store is not asked while stopping)."""
        local = max((p.parent.name for d in (run.out, run.kept) for p in (d / CHECKPOINTS).glob(f"step-*/{MANIFEST}")),
                    default=None)
        if local is None or self._in_store == local:
            return f"{kind}: its working state is kept in {run.path} and {remote_run}; {run.again} continues it"
        if self._landing == local:  # stopped as its manifest was written: the store may have it (not asked now)
            before = f"holds {self._in_store}, and {local} too" if self._in_store else f"holds {local}"
            return (f"{kind}: its working state is kept in {run.path} ({local}); {remote_run} {before} unless its "
                    f"copy was cut short as its manifest was written; {run.again} continues from {local} on this "
                    "machine, from " + ("the newer of the two there on another" if self._in_store else
                                        f"{local} on another if its copy is there (else nothing to resume there)"))
        if self._in_store is None:
            return (f"{kind}: its working state is kept in {run.path} only: the store holds no complete checkpoint "
                    f"of it ({local}'s copy to {remote_run} did not complete); {run.again} continues it on this "
                    "machine only")
        return (f"{kind}: its working state is kept in {run.path} ({local}); {remote_run} holds {self._in_store} "
                f"only ({local}'s copy to it did not complete); {run.again} continues from {local} on this machine, "
                f"from {self._in_store} on another")

    def _owned(self) -> None:
        """Raise LeaseLost unless the build in progress provably holds its lease (ranks after the
        first hold none: they write only their own part)."""
        if getattr(self, "_lease", None) is not None:
            self._lease.check()

    def _local_root(self) -> Path:
        return cache_root() / "roots" / hashlib.sha256(self.url.encode()).hexdigest()[:16]

    @staticmethod
    def _steps(objects) -> list[str]:
        """The store's complete checkpoints of a run, oldest first (:func:`complete`)."""
        files: dict[str, set[str]] = {}
        for rel in objects:
            if rel.startswith(f"out/{CHECKPOINTS}/step-") and rel.count("/") == 3:
                step, name = rel.split("/")[2:]
                files.setdefault(step, set()).add(name)
        return complete(files)

    def _store_ahead(self, remote_run: str, run: workspace.Run) -> bool:
        """Whether the store holds a newer complete checkpoint of the run than this machine's copy:
        another machine went on from here (or this copy's fetch was cut short). Resumed from the older
        copy, the run's first save would remove the newer steps from the store."""
        local = sorted(p.name for p in (run.out / CHECKPOINTS).glob("step-*") if (p / MANIFEST).is_file())
        remote = self._steps(storage.listing(remote_run))
        self._in_store = remote[-1] if remote else None
        if remote and (not local or remote[-1] > local[-1]):
            progress(f"checkpoint: {remote_run} holds {remote[-1]}, newer than this machine's copy of the run "
                     f"({local[-1] if local else 'no complete checkpoint'}): resuming from the store's")
            return True
        return False

    def _fetch_run(self, remote_run: str, run: workspace.Run) -> None:
        """The newest intact checkpoint of this request kept in the store, into the local run."""
        objects = storage.listing(remote_run)
        steps = self._steps(objects)
        self._in_store = steps[-1] if steps else None
        if not steps or workspace.REQUEST not in objects:
            return
        newest = steps[-1]
        progress(f"checkpoint: fetching the interrupted run's {newest} from {remote_run}")
        # the log first and the checkpoint's manifest last: a fetch cut short leaves no complete
        # checkpoint here, so the next --resume fetches again (a step without its log, kept, was resumed
        # with an empty log whose first save removed the store's)
        as_parts = {f"out/{name}" for name in log_parts.GROWING if log_parts.chain(log_parts.parts_in(objects, name))}
        wanted = sorted((rel for rel in objects if rel.startswith(f"out/{CHECKPOINTS}/{newest}/")
                         or (rel.startswith("out/") and not rel.startswith(f"out/{CHECKPOINTS}/") and rel not in as_parts)),
                        key=lambda rel: (rel.endswith("/" + MANIFEST), rel))
        # keys are data (anyone who may write the bucket's .work/ wrote them): each checked before it
        # names a local file, all of them before anything is written
        targets = [storage.local_target(run.path, rel, remote_run) for rel in wanted]
        shutil.rmtree(run.path, ignore_errors=True)
        storage.download(storage.join(remote_run, workspace.REQUEST), str(run.path / workspace.REQUEST))
        log_parts.fetch(remote_run, objects, run.out)
        for rel, target in zip(wanted, targets):
            storage.download(storage.join(remote_run, rel), str(target))

    def checkpoint_saved(self, step_dir: Path) -> None:
        """Mirror a checkpoint the trainer just wrote (its files, then its manifest) into the store's
        copy of the run, and drop older ones there: ``--resume`` on another machine continues it."""
        if self._run_url is None:
            return
        self._owned()  # a build that lost its lease leaves the run state in the store to whoever took it over
        base = storage.join(self._run_url, "out", CHECKPOINTS)
        target = storage.join(base, step_dir.name)
        if rank := self._run_rank:  # its own part only: in the step, or where it wrote it
            part = next(p for p in (step_dir / f"rank-{rank}.pt",
                                    step_dir.with_name(f".tmp-{step_dir.name}") / f"rank-{rank}.pt") if p.is_file())
            storage.upload(str(part), storage.join(target, part.name))
            return
        for log in self._logs.values():  # the lines new since the last save; first: a kill leaves them ahead
            log.sync()
        for f in sorted(step_dir.iterdir(), key=lambda p: p.name == MANIFEST):  # the manifest last
            if f.name == MANIFEST:
                self._landing = step_dir.name
            storage.upload(str(f), storage.join(target, f.name))
        self._in_store = step_dir.name  # complete there: only now are the older steps removed
        files: dict[str, set[str]] = {}
        for rel in storage.listing(base):
            step, _, name = rel.partition("/")
            files.setdefault(step, set()).add(name)
        done = complete(files)  # the older one stays until the followers' parts of this one are in too
        keep = {step_dir.name, *([] if step_dir.name in done or not done else [done[-1]])}
        for rel in files:
            if rel not in keep and rel.startswith("step-"):
                storage.remove(storage.join(base, rel), recursive=True)
        for log in self._logs.values():  # the parts a merge replaced: once the checkpoint past them is complete
            log.prune()


def complete(files: dict[str, set[str]]) -> list[str]:
    """The steps of a run's checkpoints in the store (step -> its file names) that are complete, oldest
    first: their manifest in (rank 0 writes it last) and as many ranks' parts (``rank-R.pt``) as the step
    with the most. Each follower copies its own part beside rank 0's copy; one still on its way, or lost
    with its machine, leaves the step without it, and a --resume from there ended every rank ('rank-1.pt:
    missing') while rank 0 had already removed the step before, which had them all."""
    parts = {step: sum(n.startswith("rank-") and n.endswith(".pt") for n in names)
             for step, names in files.items() if step.startswith("step-") and MANIFEST in names}
    most = max(parts.values(), default=0)
    return sorted(step for step, n in parts.items() if n == most)


class RemoteRun:
    """An interrupted run's state kept in the store (for ``artifacts gc``'s report)."""

    def __init__(self, url: str):
        self.path = url

    @property
    def request(self) -> dict:
        with contextlib.suppress(Exception):
            found = json.loads(storage.read_bytes(storage.join(self.path, workspace.REQUEST)))
            return found if isinstance(found, dict) else {}
        return {}

    def size(self) -> int:
        return sum(int(m.get("size", 0)) for m in storage.listing(self.path).values())
