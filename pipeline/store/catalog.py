"""Finding and checking published artifacts under a root: the read side of the artifact store.

:class:`Catalog` finds artifacts (:meth:`~Catalog.scan` a root, :meth:`~Catalog.find` an id,
:meth:`~Catalog.resolve` a ref, a :meth:`~Catalog.parent` in any root), checks them
(:meth:`~Catalog.verify`: files against the manifest, parents unchanged since a child was built
from them; :meth:`~Catalog.require`: that, before a stage reads a parent) and draws their lineage.
:class:`kolectra.pipeline.store.artifacts.Store` adds building (the publish protocol) on top, and
:mod:`.factory` opens a root, local or a store URL; :mod:`.roots` says which root a place belongs to and
which roots a recorded parent is followed into. Every manifest is checked field by field, and
against the place of its directory, before anything here acts on it (:mod:`.manifest`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Callable, Iterable

from kolectra.core import storage, store_objects
from kolectra.pipeline.store import inputs, named, shared_areas
from kolectra.pipeline.store.manifest import KINDS, MANIFEST, ArtifactError, misplaced, read_manifest, verify_dir
from kolectra.pipeline.store.roots import default_root, store_root_of, unfollowed


def article(kind: str) -> str:
    """"a corpus", "an eval": the indefinite article for an artifact kind in messages."""
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def _kinds_of(arts: list) -> str:
    """"a corpus artifact (P) and 2 vocab artifacts (P, Q)": what a ref naming several artifacts names, by kind."""
    kinds = sorted({a.kind for a in arts}, key=KINDS.index)
    return " and ".join(
        (article(k) + " artifact" if len(paths) == 1 else f"{len(paths)} {k} artifacts") + f" ({', '.join(paths)})"
        for k in kinds for paths in [sorted({str(a.path) for a in arts if a.kind == k})])


def local_catalog(root: Path | str) -> "Catalog":
    """The catalog of another local root; a store URL is opened by :func:`.factory.catalog_for` (the
    catalogs it opens follow parents into a bucket: this module cannot know the remote store, built on it)."""
    if storage.is_url(str(root)):
        raise ArtifactError(f"{root}: a root on a store, followed only from a root opened by "
                            "kolectra.pipeline.store.factory.open_store")
    return Catalog(root)


@dataclasses.dataclass(frozen=True)
class Artifact:
    path: Path
    manifest: dict

    id = property(lambda self: self.manifest["id"])
    kind = property(lambda self: self.manifest["kind"])
    name = property(lambda self: self.manifest.get("name", self.path.name.rpartition("-")[0]))

    def read_bytes(self, rel: str) -> bytes:
        """One of its files, wherever it lives (a local root or a store)."""
        return storage.read_bytes(storage.join(str(self.path), rel))

    @property
    def parents(self) -> list[str]:
        return list(self.manifest.get("parents", []))

    @property
    def root(self) -> Path | None:
        """The root this artifact was found in (its parents are looked up there first)."""
        return self.path.parent.parent if self.path.parent.name == self.kind else None

    def parent_of_kind(self, store: "Catalog", kind: str) -> "Artifact":
        """The parent of ``kind``, refused if it changed since this artifact was built from it."""
        for pid in self.parents:
            parent = store.parent(self, pid)
            if parent is not None and parent.kind == kind:
                changed = store.changed_parents(self, only=parent)
                if changed:
                    raise ArtifactError(changed[0])
                return parent
        why = next((w for r in self.manifest.get("parent_refs", []) if r.get("kind") == kind
                    and (w := store.unfollowed(self, r))), "")
        raise ArtifactError(f"{self.path}: has no {kind} parent under {store.root}"
                            + (f" or {self.root}" if self.root and self.root != store.root else "")
                            + (f"; its {kind} was {why}" if why else ""))


class Catalog:
    """The artifacts under ``root`` (default: ``$KOLECTRA_HOME`` or ``./artifacts``)."""

    def __init__(self, root: Path | str | None = None, catalogs: Callable[[Path | str], Catalog] = local_catalog):
        self.root = Path(root) if root is not None else default_root()
        self.catalogs = catalogs  # how another root is opened (a parent kept there): see factory.catalog_for
        self._checked: dict[str, tuple] = {}  # this run's passed checks of store artifacts: see require

    # ---- finding -------------------------------------------------------------------------
    def scan(self, kind: str | None = None) -> tuple[list[Artifact], list[str]]:
        """(complete artifacts, one message per directory that is not one: incomplete or corrupt)."""
        arts, broken = [], []
        for k in [kind] if kind else KINDS:
            for d in sorted((self.root / k).glob("*")) if (self.root / k).is_dir() else []:
                if d.name.startswith(shared_areas.PROBE):  # a build's check of the folder's file system (its instant)
                    continue
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

    def find(self, kind: str, artifact_id: str, name: str | None = None) -> Artifact | None:
        """``name``: the one a child recorded it under (``parent_refs``), looked at first: on a store
        root one manifest read, before the kind's prefix is listed for the id under any name."""
        for d in self._named_then_listed(kind, artifact_id, name):
            with contextlib.suppress(ArtifactError):
                return self._load(d)
        return None

    def published_at(self, kind: str, artifact_id: str) -> float | None:
        """When the published copy of ``artifact_id`` was written (its manifest's modification time, by
        the clock of the disk or store that holds it), or None if none is published; a copy whose time
        cannot be read counts as written last."""
        found = self.find(kind, artifact_id)
        if found is None:
            return None
        at = written_at(storage.join(str(found.path), MANIFEST) if storage.is_url(str(found.path))
                        else Path(found.path) / MANIFEST)
        return float("inf") if at is None else at

    def _named_then_listed(self, kind: str, aid: str, name: str | None):
        if isinstance(name, str) and name and "/" not in name and name not in (".", ".."):
            yield self.root / kind / f"{name}-{aid}"
        yield from self._dirs(kind, aid)

    @staticmethod
    def _load(path: Path) -> Artifact:
        return load(path)  # a store root's catalog (remote.RemoteStore) reads its manifests over the store

    def resolve(self, ref: str | Path, kind: str | None = None) -> Artifact:
        """An artifact directory (in any root), ``name-id``, an id, an id prefix (>= 6) or a name, if unambiguous
        (a name a ``--seeds`` summary shares with only its runs stands for the summary: :mod:`.named`)."""
        if "://" in str(ref) and not str(ref).lower().startswith("file://"):  # an artifact kept in a store
            return self.catalogs(store_root_of(str(ref))).resolve(str(ref), kind)
        p = Path(storage_local(str(ref))) if str(ref).lower().startswith("file://") else Path(ref)
        if p.is_dir() and (p / MANIFEST).is_file():
            return load(p)
        if p.is_dir() and ("/" in str(ref) or p.is_absolute()):
            raise ArtifactError(f"{p}: not a complete artifact ({MANIFEST} missing)")
        return self._pick(str(ref), kind)

    def _pick(self, ref: str, kind: str | None) -> Artifact:
        """The complete artifact that ``ref`` names under this root (:func:`ref_matches`), or one
        line saying what it does find instead: the same words on a local root and a store's."""
        hits = self._complete(ref_matches(ref, kind, self._names))
        if not hits:
            where = f"{self.root}/{kind}" if kind else str(self.root)
            raise ArtifactError(f"no artifact {ref!r} under {where}" + self._near_miss(ref, kind))
        if len({a.id for a in hits}) > 1:  # one id under two names is one artifact
            summary = named.summary_named(ref, hits)  # --seeds runs and their summary: the summary
            if summary is None:
                raise ArtifactError(named.ambiguous(ref, hits))
            return summary
        return min(hits, key=lambda a: str(a.path))

    def _names(self, kind: str) -> list[str]:
        """The names of the directories under ``kind``, complete or not."""
        return [d.name for d in (self.root / kind).glob("*")]

    def _complete(self, found: list[tuple[str, str]]) -> list[Artifact]:
        """The artifacts of those ``(kind, directory name)`` that have a manifest (a damaged one is refused)."""
        return [load(self.root / k / n) for k, n in found if (self.root / k / n / MANIFEST).is_file()]

    def _near_miss(self, ref: str, kind: str | None) -> str:
        """What a ref that found nothing does match, to follow "no artifact": an artifact of another
        kind (a vocab id given for --corpus), ids it begins that a prefix under 6 characters does not reach, or
        a file given where an artifact is wanted (raw text for --corpus, an artifact's manifest.json)."""
        with contextlib.suppress(OSError, ValueError):
            if Path(ref).is_file():
                if Path(ref).name == MANIFEST:
                    return f": {ref!r} is a file; give its artifact's directory, {str(Path(ref).parent)!r}"
                make = f"; to make a corpus of raw text: kolectra corpus --input {ref}" if kind == "corpus" else ""
                listed = f"kolectra artifacts list --kind {kind}" if kind else "kolectra artifacts list"
                return (f": {ref!r} is a file, not an artifact (a directory ROOT/{kind or '<kind>'}/NAME-ID, or its "
                        f"name or id: {listed}){make}")
        if kind:
            with contextlib.suppress(ArtifactError, OSError, ValueError):
                other = self.resolve(ref)
                return f": {ref!r} is {article(other.kind)} artifact ({other.path}), where {article(kind)} one is needed"
            with contextlib.suppress(ArtifactError, OSError, ValueError):  # several of other kinds: resolve refused it
                if others := self._complete(ref_matches(ref, None, self._names)):
                    return f": {ref!r} is {_kinds_of(others)}, where {article(kind)} one is needed"
        if len(ref) < 6 and any(n.rpartition("-")[2].startswith(ref) for k in ([kind] if kind else KINDS)
                                for n in self._names(k)):
            return f" (an id prefix needs 6 or more characters; {ref!r} has {len(ref)})"
        return self._name_and_id_start(ref, kind)

    def _name_and_id_start(self, ref: str, kind: str | None) -> str:
        """``NAME-<start of its id>`` (``reviews-0b3f77``, what "give more of the id" in an ambiguity's refusal
        reads as): no ref, so the artifacts it means, whole, and the id's start that names each."""
        head, slash, rest = ref.partition("/")
        kinds, rest = ([head] if not kind or head == kind else [], rest) if slash and head in KINDS else (
            [kind] if kind else list(KINDS), ref)
        name, _, start = rest.rpartition("-")
        if not name or not start or start.strip("0123456789abcdef"):
            return ""
        meant: list = []
        with contextlib.suppress(ArtifactError, OSError, ValueError):
            meant = self._complete([(k, n) for k in kinds for n in self._names(k)
                                    if n.rpartition("-")[0] == name and n.rpartition("-")[2].startswith(start)])
        if not meant:
            return ""
        said = ", ".join(f"{a.kind}/{a.path.name} (or {a.id[:max(6, len(start))]})" for a in
                         sorted(meant, key=lambda a: str(a.path)))
        return f" (a name with the start of an id is no ref: give the whole name-id, or the id alone, 6 characters or more: {said})"

    def parent(self, art: Artifact, pid: str) -> Artifact | None:
        """Parent ``pid`` of ``art``: in ``art``'s own root, in this store's, or where it was recorded."""
        ref = next((r for r in art.manifest.get("parent_refs", []) if r.get("id") == pid), {})
        kinds = [ref["kind"]] if ref.get("kind") in KINDS else list(KINDS)
        for root in dict.fromkeys(r for r in (art.root, self.root) if r is not None):
            for k in kinds:
                found = self.catalogs(root).find(k, pid)
                if found is not None:
                    return found
        with contextlib.suppress(ArtifactError, OSError, ValueError):
            if ref.get("path") and "://" in ref["path"]:  # recorded in a store: followed on the terms of unfollowed
                if self.unfollowed(art, ref) or len(kinds) != 1:
                    return None
                return self.catalogs(ref["path"].rsplit("/", 2)[0]).find(kinds[0], pid)
            recorded = load(Path(ref["path"])) if ref.get("path") else None
            return recorded if recorded is not None and recorded.id == pid else None
        return None

    def unfollowed(self, art: Artifact, ref: dict) -> str | None:
        """Why the store URL at which ``art`` recorded a parent (``ref``, one of its ``parent_refs``) is
        not looked at, or None (a local path, or a URL in a root this command may read): see
        :func:`unfollowed`. The roots it may read are ``art``'s own and this catalog's."""
        return unfollowed(ref.get("path"), [r for r in (art.root, self.root) if r is not None])

    # ---- checking ------------------------------------------------------------------------
    def changed_parents(self, art: Artifact, only: Artifact | None = None) -> list[str]:
        """Parents whose manifest digest differs from the one ``art`` recorded when it was built.

        A parent whose files and manifest were rewritten consistently passes its own
        verification; this is what catches it. A parent that is gone is not a mismatch (the
        lineage shows it missing); one that is there but whose manifest is refused is."""
        problems = []
        for ref in art.manifest.get("parent_refs", []):
            if only is not None and ref.get("id") != only.id:
                continue
            parent = only or self.parent(art, ref["id"])
            if parent is None:
                problems += self._unreadable(art, ref)
            elif ref.get("digest") and parent.manifest["digest"] != ref["digest"]:
                problems.append(
                    f"{parent.path / MANIFEST}: digest {parent.manifest['digest'][:12]} differs from "
                    f"{ref['digest'][:12]}, recorded when {art.path} was built from it: the parent was altered "
                    f"or rebuilt since (rebuild {art.kind} {art.path.name} with --force)")
            elif ref.get("fields_digest") and parent.manifest.get("fields_digest") != ref["fields_digest"]:
                problems.append(
                    f"{parent.path / MANIFEST}: its fields (config, stats, parents ...) differ from those "
                    f"{art.path} was built from (fields_digest recorded then): the parent was rebuilt or its "
                    f"manifest edited since (rebuild {art.kind} {art.path.name} with --force)")
        return problems

    def _unreadable(self, art: Artifact, ref: dict) -> list[str]:
        """The refusal of a parent directory that exists (in ``art``'s root or this one) but does not load."""
        kinds = [ref["kind"]] if ref.get("kind") in KINDS else KINDS
        for root in dict.fromkeys(r for r in (art.root, self.root) if r is not None):
            for d in (d for k in kinds for d in self.catalogs(root)._dirs(k, ref["id"])):  # noqa: SLF001 - a catalog of another root, same class
                try:
                    load(d)
                except ArtifactError as e:
                    return [f"parent {ref['id']} of {art.path} is unreadable: {e}"]
        return []

    def verify(self, art: Artifact | str | Path, quick: bool = False) -> list[str]:
        """Every mismatch between the manifest and the files on disk, and every changed parent.

        ``quick``: what :meth:`require` checks. On a store, one listing against the recorded sizes
        and store checksums, no object read (:meth:`.remote.RemoteStore.verify`); here the same as
        without it: a local file has no store checksum to stand for its bytes (a rewrite of the same
        size keeps its size), so every file is hashed, once a process (core/filehash.py)."""
        if not isinstance(art, Artifact):
            try:
                art = self.resolve(art)
            except ArtifactError as e:
                return [str(e)]
        if not isinstance(art.path, Path):  # a parent kept in a store: checked there
            return self.catalogs(art.root).verify(art, quick=quick)
        return verify_dir(art.path) + self.changed_parents(art)

    def require(self, ref: Artifact | str | Path, kind: str | None = None) -> Artifact:
        """Resolve and verify a parent before a stage reads it; refuse it naming the files.

        A parent kept in a store is listed, not downloaded (``verify(quick=True)``), and a check of
        it that passed stands, for the same manifest, until this store's next build has checked its
        parents (:meth:`_checks_done`): a stage's ``require`` and its build's check list it once
        (docs/scale.md says why that hides no change). Local files are checked every time: their
        hashes are remembered under the files' stamps (core/filehash.py), which no change keeps."""
        art = ref if isinstance(ref, Artifact) else self.resolve(ref, kind)
        if kind and art.kind != kind:
            raise ArtifactError(f"{art.path}: is {article(art.kind)} artifact, expected {kind}")
        seal = (art.manifest["digest"], art.manifest.get("fields_digest"))
        if not isinstance(art.path, Path) and self._checked.get(str(art.path)) == seal:
            return art
        problems = self.verify(art, quick=True)
        if problems:
            more = [f"and {len(problems) - 5} more (kolectra artifacts verify lists them)"] if len(problems) > 5 else []
            raise ArtifactError(f"refusing {art.kind} artifact {art.path}: it does not match its manifest ("
                                + "; ".join(problems[:5] + more)
                                + "): restore its files (what was built from it stays valid), or rebuild it (its "
                                "command with --force), which rebuilds what was built from it when next asked for"
                                # a --force on a store writes over the copy's objects, its manifest last
                                + ("" if isinstance(art.path, Path) else "; a --force rebuild replacing it right now "
                                   "reads the same: then run again once it has published"))
        if not isinstance(art.path, Path):
            self._checked[str(art.path)] = seal
        return art

    def _checks_done(self) -> None:
        """A build has checked its parents: the run's reads begin, and the next run checks afresh."""
        self._checked.clear()

    # ---- lineage -------------------------------------------------------------------------
    def ancestors(self, art: Artifact) -> tuple[list[Artifact], list[str]]:
        """Every artifact ``art`` was built from, nearest first and each once (a vocab and its
        examples share a corpus), and one line for each parent that was not found. The one walk of
        a lineage (``artifacts verify --lineage``, a report's sections: :func:`pipeline.report.ancestors`
        orders it parents first): each parent looked up through :meth:`parent` (the child's own root,
        this one, where it was recorded, ``$KOLECTRA_PARENT_ROOTS``). A parent not found from one child
        is looked for again from the next that names it (its root or recorded path may be another)."""
        found: dict[str, Artifact] = {}
        missing: dict[str, str] = {}
        queue = [art]
        while queue:
            a = queue.pop(0)
            for pid in a.parents:
                if pid == art.id or pid in found:
                    continue
                parent = self.parent(a, pid)
                if parent is None:
                    ref = next((r for r in a.manifest.get("parent_refs", []) if r.get("id") == pid), {})
                    why = self.unfollowed(a, ref) or "not under this root nor where it was recorded"
                    missing.setdefault(pid, f"parent {pid} of {a.path}: {why}")
                else:
                    missing.pop(pid, None)
                    found[pid] = parent
                    queue.append(parent)
        return list(found.values()), list(missing.values())

    def lineage_lines(self, art: Artifact) -> list[str]:
        """The lineage tree back to the raw inputs, as text lines."""
        lines = [_label(art)]
        seen: set[str] = set()

        def walk(a: Artifact, prefix: str) -> None:
            children: list[tuple[str, Artifact | dict | str]] = []
            for pid in a.parents:
                parent = self.parent(a, pid)
                if parent is None:  # a directory that is there but does not load is not "missing"
                    ref = next((r for r in a.manifest.get("parent_refs", []) if r.get("id") == pid), {"id": pid})
                    unreadable = self._unreadable(a, {**ref, "id": pid})
                    why = self.unfollowed(a, ref)
                    children.append(("unreadable", unreadable[0]) if unreadable else
                                    ("missing", pid + (f" ({why})" if why else "")))
                    continue
                children.append(("artifact", parent))
            head, count = inputs.shown(a.manifest)
            children += [("input", inp) for inp in head]
            if count > len(head):  # the rest are in the artifact's inputs file, not printed
                children.append(("more", f"... {count - len(head):,} more inputs ({count:,} in all, "
                                         f"listed in {a.manifest['inputs_file']['path']})"))
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
                elif what == "more":
                    lines.append(prefix + branch + child)
                elif what == "unreadable":
                    lines.append(prefix + branch + f"UNREADABLE {child}")
                else:
                    lines.append(prefix + branch + f"MISSING parent {child}")

        walk(art, "")
        return lines


def ref_matches(ref: str, kind: str | None, names: Callable[[str], list[str]]) -> list[tuple[str, str]]:
    """``(kind, directory name)`` of each directory that ``ref`` names among ``names(kind)``: by
    ``name-id``, id or id prefix (6 or more characters), else by name; a ref that is an id (prefix) of
    some and the name of others names them all, so that the caller refuses it as ambiguous (a hex
    ``--name 4a51d1`` was silently shadowed by an id starting so). ``kind/name-id``, as lineage
    and ``artifacts list`` show an artifact, looks in that kind only."""
    kinds = [kind] if kind else list(KINDS)
    head, slash, rest = ref.partition("/")
    if slash and head in KINDS and rest and "/" not in rest:
        kinds, ref = [k for k in kinds if k == head], rest
    exact, by_id, by_name = [], [], []
    for k in kinds:
        for n in names(k):
            name, _, aid = n.rpartition("-")
            if n == ref:
                exact.append((k, n))
            elif aid == ref or (len(ref) >= 6 and aid.startswith(ref)):
                by_id.append((k, n))
            elif name == ref:
                by_name.append((k, n))
    return exact or by_id + by_name


def written_at(location: str | Path) -> float | None:
    """A file's or an object's modification time (seconds since the epoch, its own disk's or store's clock)."""
    with contextlib.suppress(Exception):
        if storage.is_url(str(location)):
            return store_objects.modified(storage.info(str(location)))
        return os.stat(location).st_mtime
    return None


def built_from_others(manifest: dict, parents: Iterable[Artifact]) -> str | None:
    """Why a published build of a request is not what the request's ``parents`` make now, or None: a
    parent whose ``digest`` or ``fields_digest`` differs from the one the build recorded in its
    ``parent_refs`` was rebuilt (``--force``: its provenance, at least, is new) or rewritten since. Such
    a build is not reused: its children refuse it (:meth:`Catalog.changed_parents`), so reusing it
    ended the next stage with "rebuild it with --force"; the store rebuilds it in its place."""
    refs = {r.get("id"): r for r in manifest.get("parent_refs", []) if isinstance(r, dict)}
    for p in parents:
        ref = refs.get(p.id) or {}
        if (ref.get("digest") and ref["digest"] != p.manifest.get("digest")) or (
                ref.get("fields_digest") and ref["fields_digest"] != p.manifest.get("fields_digest")):
            return (f"was built from another build of its parent {p.kind}/{p.path.name} (rebuilt or rewritten "
                    "since)")
    return None


def storage_local(location: str) -> str:
    return storage.local_path(location)


def load(path: Path) -> Artifact:
    """The artifact at ``path``: its manifest checked field by field, and against where it sits."""
    path = Path(path)
    manifest = read_manifest(path)
    if where := misplaced(path, manifest):
        raise ArtifactError(where)
    return Artifact(path=path, manifest=manifest)


def _label(a: Artifact) -> str:
    return f"{a.kind}/{a.path.name}"
