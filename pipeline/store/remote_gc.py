"""``kolectra artifacts gc`` on a store root (``s3://``, ``gs://``, ...): what a build that ended without
publishing left in the store and in this machine's cache of it.

Mixed into :class:`kolectra.pipeline.store.remote.RemoteStore`, whose publish protocol (:mod:`.remote`)
leaves nothing that looks complete: a prefix without a manifest is absent to every reader, and this
removes it once its lease has expired (or it has none); expired leases (:mod:`.lease`), conditionally
on the version read; the run state under ``ROOT/.work/`` of published requests, or holding nothing
``--resume`` could continue (:mod:`.remote_runs`); and in the local cache, the sweep a local root
makes (:mod:`.sweep`) and build directories older kolectras left unmarked. Whether a lease is live
is decided by the store's clock, never this machine's. What the store refuses to delete (a bucket policy,
a retention) is not said removed: the caller's ``failed`` gets it (:mod:`.removal`), and gc goes on.
"""

from __future__ import annotations

from kolectra.core import conditional, storage
from kolectra.pipeline.store import sweep, workspace
from kolectra.pipeline.store.catalog import written_at
from kolectra.pipeline.store.lease import LOCKS, Lease
from kolectra.pipeline.store.manifest import KINDS, MANIFEST
from kolectra.pipeline.store.remote_runs import CHECKPOINTS, WORK, RemoteRun, cache_root
from kolectra.pipeline.store.removal import Failed, remove_dir, remove_prefix
from kolectra.pipeline.store.workspace import TMP_NAME


class StoreCollect:
    """The garbage-collecting part of a store root (needs ``url``, ``_kind_url``, ``published_at`` and
    ``_local_root``)."""

    def collect(self, interrupted: bool = False, dry_run: bool = False, failed: list[Failed] | None = None):
        """Orphaned prefixes (no manifest) whose lease expired or that have none, expired leases,
        run state of published requests (and with ``interrupted`` all run state). What could not be deleted
        whole goes to ``failed``, not to what it returns as removed."""
        removed: list[str] = []
        kept: list = []
        failed = [] if failed is None else failed

        def leased(kind: str, aid: str) -> bool:  # by the store's clock: a clock ahead here removes nothing live
            return Lease(self.url, kind, aid).live()

        def drop(url: str) -> None:
            if not dry_run and (why := remove_prefix(url)) is not None:
                failed.append(why)
            else:
                removed.append(url)

        for kind in KINDS:
            for name in storage.children(self._kind_url(kind)):
                aid = name.rpartition("-")[2]
                prefix = storage.join(self._kind_url(kind), name)
                if not storage.exists(storage.join(prefix, MANIFEST)) and not leased(kind, aid):
                    drop(prefix)
        for name in storage.children(storage.join(self.url, WORK)):
            kind, _, aid = name.rpartition("-")
            if leased(kind, aid):
                continue
            at = self.published_at(kind, aid)  # a run started after the published copy is a rebuild's: kept
            started = written_at(storage.join(self.url, WORK, name, workspace.REQUEST)) or 0.0
            if interrupted or (at is not None and at >= started) or not self._run_holds_state(name):
                drop(storage.join(self.url, WORK, name))
            else:
                kept.append(RemoteRun(storage.join(self.url, WORK, name)))
        for name in storage.children(storage.join(self.url, LOCKS)):
            kind, _, rest = name.partition("-")
            aid = rest.removesuffix(".lease")
            url = storage.join(self.url, LOCKS, name)
            if name.endswith(".lease") and (version := Lease(self.url, kind, aid).expired_version()) is not None:
                # conditionally on the expired version read: a lease taken over since is the new holder's
                try:
                    if dry_run or conditional.remove_if(url, version):
                        removed.append(url)
                except storage.StoreError as e:  # refused (a policy): said, the rest goes on
                    failed.append(Failed(url, str(e), 0, 0))
        local = self._local_root()
        if local.is_dir():
            gone, _ = sweep.sweep(local, self.published_at, interrupted, dry_run, failed=failed)
            removed += [str(p) for p in gone]
        # build directories a kolectra before 2026-12-01 made in the cache's own .tmp, unmarked: left by killed
        # builds, which nothing swept (one whose request this root still leases may be live: kept); never one
        # holding a manifest: a store build writes none here, a disk root's does (KOLECTRA_CACHE set to that
        # root: the copy its --force killed between its renames left aside, which that root's sweep publishes)
        old = cache_root() / workspace.TMP
        for d in sorted(old.iterdir()) if old.is_dir() and not old.is_symlink() else []:
            m = TMP_NAME.match(d.name)
            if m and d.is_dir() and not d.is_symlink() and not workspace.live(d) and not leased(m["kind"], m["id"]) \
                    and not (d / MANIFEST).exists():
                if not dry_run and (why := remove_dir(d)) is not None:
                    failed.append(why)
                else:
                    removed.append(str(d))
        return removed, kept

    def _run_holds_state(self, name: str) -> bool:
        """Whether an interrupted run in ``ROOT/.work/NAME`` holds anything ``--resume`` could continue: a
        checkpoint's object in the store (even one whose copy was cut short), or working state in this machine's
        cache. A run stopped before its first checkpoint was copied left its request.json alone there: gc kept it
        as 'interrupted run (0.0 MB): --resume continues it', and --resume said 'nothing to resume'."""
        if any(rel.startswith(f"out/{CHECKPOINTS}/") for rel in storage.listing(storage.join(self.url, WORK, name))):
            return True
        return bool(workspace.Run(self._local_root() / workspace.WORK / name).state())
