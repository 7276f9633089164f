"""The artifact store: versioned, hash-linked, atomically published stage outputs.

Every stage run becomes ``ROOT/<kind>/<name>-<id>/``. The id is a hash of the *request* — kind,
stage version, resolved config, parent ids, raw-input fingerprints and the versions of the
libraries that decide the output — so asking for the same thing twice finds the existing
artifact instead of recomputing it. The id is the identity: the same request under another
``--name`` finds the directory already published under the first name.

The publish protocol, :meth:`Store.build` top to bottom; a kill at any point leaves either the
complete artifact or nothing under ``ROOT/<kind>/`` (private areas: :mod:`.workspace`):

1. check    kind known; every parent intact, and unchanged since its own children recorded it.
2. reserve  lock ``ROOT/.locks/<kind>-<id>.lock``: one builder per request; a second identical
            run waits (saying for whom) and then joins the first one's result.
3. join     the artifact exists: reuse it. A build of this request that was sealed but killed
            before its rename is published as it is; earlier attempts' directories are deleted.
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
is removed once provably dead (no process holds its lock; published since, or nothing to resume):
at the start of every build, and by ``kolectra artifacts gc``. Documented in docs/artifacts.md.

Stage code never sees any of this; it writes files into the directory it is handed and returns
a :class:`core.stage.StageOutput`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable

from kolectra.core.stage import StageOutput, progress
from kolectra.pipeline import workspace
from kolectra.pipeline.workspace import Resumable
from kolectra.pipeline.manifest import (MANIFEST, SCHEMA, ArtifactError, canonical, digest, fingerprint_inputs, input_key,
                                        hash_tree, library_versions, provenance, read_manifest, sha256_file,
                                        verify_dir, write_json)

__all__ = ["Artifact", "ArtifactError", "Request", "Resumable", "Store", "default_root", "fingerprint_inputs", "load",
           "sha256_file", "verify_dir", "KINDS", "MANIFEST", "SCHEMA"]

KINDS = ("corpus", "vocab", "examples", "checkpoint", "eval", "study")
ID_CHARS = 16


def default_root() -> Path:
    return Path(os.environ.get("KOLECTRA_HOME", "artifacts"))


@dataclasses.dataclass(frozen=True)
class Artifact:
    path: Path
    manifest: dict

    id = property(lambda self: self.manifest["id"])
    kind = property(lambda self: self.manifest["kind"])
    name = property(lambda self: self.manifest.get("name", self.path.name.rpartition("-")[0]))

    @property
    def parents(self) -> list[str]:
        return list(self.manifest.get("parents", []))

    @property
    def root(self) -> Path | None:
        """The root this artifact was found in (its parents are looked up there first)."""
        return self.path.parent.parent if self.path.parent.name == self.kind else None

    def parent_of_kind(self, store: "Store", kind: str) -> "Artifact":
        """The parent of ``kind``, refused if it changed since this artifact was built from it."""
        for pid in self.parents:
            parent = store.parent(self, pid)
            if parent is not None and parent.kind == kind:
                changed = store.changed_parents(self, only=parent)
                if changed:
                    raise ArtifactError(changed[0])
                return parent
        raise ArtifactError(f"{self.path}: has no {kind} parent under {store.root}"
                            + (f" or {self.root}" if self.root and self.root != store.root else ""))


@dataclasses.dataclass(frozen=True)
class Request:
    """What a stage run is asked to do; its hash is the artifact id."""

    kind: str
    name: str
    stage_version: int
    config: dict
    parents: tuple[Artifact, ...] = ()
    inputs: tuple[dict, ...] = ()  # fingerprints of raw inputs (see fingerprint_inputs)
    libraries: tuple[str, ...] = ()
    # dotted config keys that do not change the result (how often to log or checkpoint):
    # recorded in the manifest, left out of the id, so changing them finds the same artifact
    operational: tuple[str, ...] = ()

    def key(self) -> dict:
        return {
            "kind": self.kind,
            "stage_version": self.stage_version,
            "config": _without(self.config, self.operational),
            "parents": [p.id for p in self.parents],
            "inputs": [input_key(i) for i in self.inputs],
            "libraries": library_versions(self.libraries),
        }

    def id(self) -> str:
        return hashlib.sha256(canonical(self.key())).hexdigest()[:ID_CHARS]


def _without(config: dict, dotted: Iterable[str]) -> dict:
    out = json.loads(json.dumps(config))
    for key in dotted:
        *path, last = key.split(".")
        node = out
        for part in path:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(last, None)
    return out


class Store:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else default_root()

    # ---- finding -------------------------------------------------------------------------
    def scan(self, kind: str | None = None) -> tuple[list[Artifact], list[str]]:
        """(complete artifacts, one message per directory that is not one: incomplete or corrupt)."""
        arts, broken = [], []
        for k in [kind] if kind else KINDS:
            for d in sorted((self.root / k).glob("*")) if (self.root / k).is_dir() else []:
                try:
                    arts.append(load(d))
                except ArtifactError as e:
                    broken.append(str(e))
        return arts, broken

    def list(self, kind: str | None = None) -> list[Artifact]:
        return self.scan(kind)[0]

    def _dirs(self, kind: str, aid: str) -> list[Path]:
        """Directories of ``kind`` named for ``aid``, complete or not, whatever their name."""
        return sorted(d for d in (self.root / kind).glob(f"*-{aid}") if d.is_dir())

    def find(self, kind: str, artifact_id: str) -> Artifact | None:
        for d in self._dirs(kind, artifact_id):
            with contextlib.suppress(ArtifactError):
                return load(d)
        return None

    def resolve(self, ref: str | Path, kind: str | None = None) -> Artifact:
        """An artifact directory (in any root), ``name-id``, an id, an id prefix (>= 6) or a name, if unambiguous."""
        p = Path(ref)
        if p.is_dir() and (p / MANIFEST).is_file():
            return load(p)
        if p.is_dir() and ("/" in str(ref) or p.is_absolute()):
            raise ArtifactError(f"{p}: not a complete artifact ({MANIFEST} missing)")
        ref = str(ref)
        exact, by_name = [], []
        for k in [kind] if kind else KINDS:
            for d in (self.root / k).glob("*"):
                name, _, aid = d.name.rpartition("-")
                if not (d / MANIFEST).is_file():
                    continue
                if d.name == ref or aid == ref or (len(ref) >= 6 and aid.startswith(ref)):
                    exact.append(d)
                elif name == ref:
                    by_name.append(d)
        hits = exact or by_name
        if not hits:
            where = f"{self.root}/{kind}" if kind else str(self.root)
            raise ArtifactError(f"no artifact {ref!r} under {where}")
        if len({d.name.rpartition("-")[2] for d in hits}) > 1:  # one id under two names is one artifact
            raise ArtifactError(f"{ref!r} is ambiguous: " + ", ".join(str(h) for h in sorted(hits)))
        return load(sorted(hits)[0])

    def parent(self, art: Artifact, pid: str) -> Artifact | None:
        """Parent ``pid`` of ``art``: in ``art``'s own root, in this store's, or where it was recorded."""
        ref = next((r for r in art.manifest.get("parent_refs", []) if r.get("id") == pid), {})
        kinds = [ref["kind"]] if ref.get("kind") in KINDS else list(KINDS)
        for root in dict.fromkeys(r for r in (art.root, self.root) if r is not None):
            for k in kinds:
                found = Store(root).find(k, pid)
                if found is not None:
                    return found
        with contextlib.suppress(ArtifactError, OSError):
            recorded = load(Path(ref["path"])) if ref.get("path") else None
            return recorded if recorded is not None and recorded.id == pid else None
        return None

    # ---- checking ------------------------------------------------------------------------
    def changed_parents(self, art: Artifact, only: Artifact | None = None) -> list[str]:
        """Parents whose manifest digest differs from the one ``art`` recorded when it was built.

        A parent whose files and manifest were rewritten consistently passes its own
        verification; this is what catches it. A parent that is gone is not a mismatch (the
        lineage shows it missing)."""
        problems = []
        for ref in art.manifest.get("parent_refs", []):
            if only is not None and ref.get("id") != only.id:
                continue
            parent = only or self.parent(art, ref.get("id", ""))
            if parent is not None and ref.get("digest") and parent.manifest.get("digest") != ref["digest"]:
                problems.append(
                    f"{parent.path / MANIFEST}: digest {str(parent.manifest.get('digest'))[:12]} differs from "
                    f"{ref['digest'][:12]}, recorded when {art.path} was built from it: the parent was altered "
                    f"or rebuilt since (rebuild {art.kind} {art.path.name} with --force)")
        return problems

    def verify(self, art: Artifact | str | Path) -> list[str]:
        """Every mismatch between the manifest and the files on disk, and every changed parent."""
        if not isinstance(art, Artifact):
            try:
                art = self.resolve(art)
            except ArtifactError as e:
                return [str(e)]
        return verify_dir(art.path) + self.changed_parents(art)

    def require(self, ref: Artifact | str | Path, kind: str | None = None) -> Artifact:
        """Resolve and verify a parent before a stage reads it; refuse it naming the files."""
        art = ref if isinstance(ref, Artifact) else self.resolve(ref, kind)
        if kind and art.kind != kind:
            raise ArtifactError(f"{art.path}: is a {art.kind} artifact, expected {kind}")
        problems = self.verify(art)
        if problems:
            more = [f"and {len(problems) - 5} more (kolectra artifacts verify lists them)"] if len(problems) > 5 else []
            raise ArtifactError(f"refusing {art.kind} artifact {art.path}: it does not match its manifest:\n  "
                                + "\n  ".join(problems[:5] + more))
        return art

    # ---- building ------------------------------------------------------------------------
    def build(self, request: Request, produce: Callable[[Path], StageOutput], force: bool = False,
              resumable: bool | Resumable = False, resume: bool | str = False) -> Artifact:
        """Return the artifact for ``request``, producing it (atomically) only if needed.

        A ``resumable`` stage (pretraining) is built in a lasting run directory that survives a
        failed or killed run: with ``resume`` its interrupted run (or its family's; only its own
        with ``resume="exact"``) continues from the stage's own checkpoints; without it an
        interrupted run of the same request is discarded first."""
        if request.kind not in KINDS:  # 1. check
            raise ArtifactError(f"unknown artifact kind {request.kind!r}")
        for parent in request.parents:
            self.require(parent)
        aid = request.id()
        with contextlib.ExitStack() as held:
            held.enter_context(workspace.request_lock(self.root, request.kind, aid))  # 2. reserve
            found = self._join(request, reuse=not force)  # 3. join
            if found is not None:
                return found
            out, run = self._prepare(request, resumable, resume, held)  # 4. prepare
            started = workspace.now()
            try:
                output = produce(out)  # 5. produce
                if run is not None:  # 6. seal
                    run.set_aside()
                self._seal(out, request, output, started, run)
                final = self._publish(out, request)  # 7. publish
            except BaseException as e:
                self._abandon(request, out, run, e)
                raise
            if run is not None:  # 8. clean
                shutil.rmtree(run.path, ignore_errors=True)
        return load(final)

    def _join(self, request: Request, reuse: bool) -> Artifact | None:
        """The published artifact, or a sealed but unpublished build of it (then published now).

        Under the request's lock, earlier attempts at it are dead: their ``.tmp`` directories go,
        and its run too once the artifact exists; then whatever else is provably dead."""
        kind, aid = request.kind, request.id()
        run = workspace.Run(self.root / workspace.WORK / f"{kind}-{aid}")
        found = self._published(request) if reuse else None
        for d in [] if found or not reuse else [*workspace.leftovers(self.root, kind, aid), run.out]:
            with contextlib.suppress(ArtifactError):
                if read_manifest(d)["id"] == aid and not verify_dir(d):
                    progress(f"{kind}: publishing {d}, a complete build of this request whose run was stopped "
                             "just before publishing it")
                    found = load(self._publish(d, request))
                    break
        for d in workspace.leftovers(self.root, kind, aid) + ([run.path] if found else []):
            shutil.rmtree(d, ignore_errors=True)
        self.collect()
        return found

    def _published(self, request: Request) -> Artifact | None:
        for d in self._dirs(request.kind, request.id()):
            problems = verify_dir(d)
            if not problems:
                note = "" if d.name == f"{request.name}-{request.id()}" else (
                    f"; the id is the identity, --name {request.name} names only new builds")
                progress(f"{request.kind}: reusing {d} (same request{note}; --force rebuilds)")
                return load(d)
            progress(f"{request.kind}: existing {d} is damaged ({problems[0]}); rebuilding")
        return None

    def _prepare(self, request: Request, resumable: bool | Resumable, resume: bool | str,
                 held: contextlib.ExitStack) -> tuple[Path, workspace.Run | None]:
        """The build's private directory, and the resumable run it belongs to (None for .tmp)."""
        if not resumable:
            return workspace.private_dir(self.root, request.kind, request.id()), None
        spec = resumable if isinstance(resumable, Resumable) else Resumable(
            {"kind": request.kind, "name": request.name, "parents": [p.id for p in request.parents]})
        record = {"id": request.id(), "kind": request.kind, "name": request.name, "family": spec.family,
                  "scratch": list(spec.scratch), "config": request.config}
        run = workspace.open_run(self.root, record, resume, held)
        return run.out, run

    def _abandon(self, request: Request, out: Path, run: workspace.Run | None, e: BaseException) -> None:
        """After a failed step 5-7: delete what cannot be resumed; say (as a note) what was kept."""
        refused = isinstance(e, (ValueError, ArtifactError))  # the message says why; nothing to add
        if run is not None and run.state():
            if not refused:
                e.add_note(f"{request.kind}: its working state is kept in {run.path}; --resume continues it")
            return
        shutil.rmtree(run.path if run is not None else out, ignore_errors=True)
        if not refused:
            e.add_note(f"{request.kind}: nothing published; its partial build in {out} was removed")

    def _seal(self, out: Path, request: Request, output: StageOutput, started: str,
              run: workspace.Run | None) -> None:
        """Hash every file, then write manifest.json: last, its presence means complete."""
        if (out / MANIFEST).exists():
            raise ArtifactError(f"stage wrote its own {MANIFEST}; that name is reserved")
        files = hash_tree(out)
        manifest = {
            "schema": SCHEMA, "kind": request.kind, "name": request.name, "id": request.id(),
            "parents": [p.id for p in request.parents],
            "parent_refs": [{"id": p.id, "kind": p.kind, "name": p.name, "digest": p.manifest["digest"],
                             "path": str(p.path.resolve())} for p in request.parents],
            "inputs": list(request.inputs), "config": request.config, "stage_version": request.stage_version,
            "files": files, "digest": digest(files), "stats": output.stats,
            "provenance": provenance(request.libraries, started, workspace.now()),
        }
        if run is not None and run.id != request.id():
            manifest["provenance"]["continued_from"] = {"request": run.id, "config": run.request.get("config")}
        if output.compute is not None:
            manifest["compute"] = output.compute
        write_json(out / MANIFEST, manifest)

    def _publish(self, out: Path, request: Request) -> Path:
        """One rename into place, under the existing directory of this id if there is one."""
        existing = self._dirs(request.kind, request.id())
        final = existing[0] if existing else self.root / request.kind / f"{request.name}-{request.id()}"
        final.parent.mkdir(parents=True, exist_ok=True)
        replaced = None
        if final.exists():  # --force, or damaged: out of the way first (a kill here leaves it in .tmp)
            replaced = workspace.private_dir(self.root, request.kind, request.id())
            os.replace(final, replaced)  # a directory may replace an empty one
        os.replace(out, final)
        _fsync_dir(final.parent)
        if replaced is not None:
            shutil.rmtree(replaced, ignore_errors=True)
        return final

    def collect(self, interrupted: bool = False, dry_run: bool = False) -> tuple[list[Path], list[workspace.Run]]:
        """``kolectra artifacts gc``: remove what is provably dead (and, with ``interrupted``, runs
        that could be resumed); returns (removed, interrupted runs kept)."""
        return workspace.sweep(self.root, lambda k, i: self.find(k, i) is not None, interrupted, dry_run)

    # ---- lineage -------------------------------------------------------------------------
    def lineage_lines(self, art: Artifact) -> list[str]:
        """The lineage tree back to the raw inputs, as text lines."""
        lines = [_label(art)]
        seen: set[str] = set()

        def walk(a: Artifact, prefix: str) -> None:
            children: list[tuple[str, Artifact | dict | str]] = []
            for pid in a.parents:
                parent = self.parent(a, pid)
                children.append(("artifact", parent) if parent is not None else ("missing", pid))
            children += [("input", inp) for inp in a.manifest.get("inputs", [])]
            for i, (what, child) in enumerate(children):
                branch, cont = ("└── ", "    ") if i == len(children) - 1 else ("├── ", "│   ")
                if what == "artifact":
                    again = child.id in seen
                    changed = " (CHANGED since this was built from it)" if self.changed_parents(a, only=child) else ""
                    lines.append(prefix + branch + _label(child) + changed + (" (see above)" if again else ""))
                    if not again:
                        seen.add(child.id)
                        walk(child, prefix + cont)
                elif what == "input":
                    lines.append(prefix + branch
                                 + f"input {child['path']} ({child['bytes']:,} bytes, sha256 {child['sha256'][:12]})")
                else:
                    lines.append(prefix + branch + f"MISSING parent {child}")

        walk(art, "")
        return lines


def load(path: Path) -> Artifact:
    path = Path(path)
    return Artifact(path=path, manifest=read_manifest(path))


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _label(a: Artifact) -> str:
    return f"{a.kind}/{a.path.name}"
