"""A build's request and its naming: what a stage run is asked to do (:class:`Request`, whose hash is the
artifact id), what is checked of the build before it is sealed (:func:`check_layout`, :func:`reserved`) and
what its manifest says (:func:`manifest_of`), and which name and folder a request is published or rebuilt
under when its id's folder already exists under another (:func:`own_first`, :func:`folder_name`,
:func:`in_its_folder`) with the lines that say so (:func:`reusing`, :func:`forced_over`).

Shared by both kinds of root: the local store (:mod:`.artifacts`, which builds and publishes) and a store
URL's (:mod:`.remote`, :mod:`.remote_runs`). It knows nothing of locks, renames or buckets.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from pathlib import Path
from typing import Collection, Iterable

from kolectra.core.stage import StageOutput, progress
from kolectra.pipeline.store import inputs, layout, workspace
from kolectra.pipeline.store.catalog import Artifact
from kolectra.pipeline.store.manifest import (
    MANIFEST,
    SCHEMA,
    ArtifactError,
    canonical,
    digest,
    fields_digest,
    files_digest,
    input_key,
    library_versions,
    provenance,
)

ID_CHARS = 16
ID_BATCH = 4096  # input keys canonicalised at a time for the request id


@dataclasses.dataclass(frozen=True)
class Request:
    """What a stage run is asked to do; its hash is the artifact id."""

    kind: str
    name: str
    stage_version: int
    config: dict
    parents: tuple[Artifact, ...] = ()
    # fingerprints of raw inputs (see fingerprint_inputs): a tuple, or an inputs.RecordFile (a corpus
    # launcher's one record per input file, kept in a file and read again as often as asked)
    inputs: Collection[dict] = ()
    libraries: tuple[str, ...] = ()
    # dotted config keys that do not change the result (how often to log or checkpoint):
    # recorded in the manifest, left out of the id, so changing them finds the same artifact
    operational: tuple[str, ...] = ()

    def key(self) -> dict:
        return {**self._key_fields(), "inputs": [input_key(i) for i in self.inputs]}

    def _key_fields(self) -> dict:
        """The key without its inputs: what :meth:`id` hashes whole."""
        return {
            "kind": self.kind,
            "stage_version": self.stage_version,
            "config": _without(self.config, self.operational),
            "parents": [p.id for p in self.parents],
            "libraries": library_versions(self.libraries),
        }

    def id(self) -> str:
        """sha256 of ``canonical(self.key())``, fed a part at a time: the input keys go in batches of
        :data:`ID_BATCH`, never as one list and one text of them all (a corpus's grow with its input
        files: docs/scale.md). Worked out once per request: a local build asks for it seven times."""
        if "_id" not in self.__dict__:
            h, fields = hashlib.sha256(), self._key_fields()
            for n, name in enumerate(sorted([*fields, "inputs"])):  # canonical's order: sorted keys
                h.update(b"{" if n == 0 else b",")
                h.update(canonical(name) + b":")
                if name != "inputs":
                    h.update(canonical(fields[name]))
                    continue
                h.update(b"[")
                keys, sep = map(input_key, self.inputs), b""  # read once, in order (a RecordFile's too)
                while batch := list(itertools.islice(keys, ID_BATCH)):
                    h.update(sep + canonical(batch)[1:-1])  # a list's text less its brackets
                    sep = b","
                h.update(b"]")
            h.update(b"}")
            object.__setattr__(self, "_id", h.hexdigest()[:ID_CHARS])  # frozen: set once, as a cache
        return self.__dict__["_id"]


def check_layout(request: Request, out: Path, output: StageOutput) -> None:
    """Refuse to seal a build that lacks what its own records name (:mod:`.layout`)."""
    lost = layout.missing(request.kind, out, output.stats, request.config)
    if lost:
        raise ArtifactError(f"{request.kind}: not publishing a build that lacks what it describes (deleted while "
                            "it ran? a .tmp shared with another root?): " + "; ".join(lost[:5]))


def reserved(out: Path) -> None:
    """Refuse a build whose stage wrote a file the store writes (the manifest, the inputs' file)."""
    for name in (MANIFEST, inputs.INPUTS_FILE):
        if (out / name).exists():
            raise ArtifactError(f"stage wrote its own {name}; that name is reserved")


def manifest_of(request: Request, output: StageOutput, files: list[dict], started: str,
                run: "workspace.Run | None") -> dict:
    """The manifest of a sealed build (on a local root or a store): what was asked, what was made."""
    manifest = {
        "schema": SCHEMA, "kind": request.kind, "name": request.name, "id": request.id(),
        "parents": [p.id for p in request.parents],
        "parent_refs": [{"id": p.id, "kind": p.kind, "name": p.name, "digest": p.manifest["digest"],
                         **({"fields_digest": p.manifest["fields_digest"]} if "fields_digest" in p.manifest else {}),
                         "path": str(p.path.resolve()) if isinstance(p.path, Path) else str(p.path)}
                        for p in request.parents],
        **inputs.fields(request.inputs, files), "config": request.config, "stage_version": request.stage_version,
        "files": files, "digest": digest(files), "files_digest": files_digest(files), "stats": output.stats,
        "provenance": provenance(request.libraries, started, workspace.now()),
    }
    if run is not None and run.id != request.id():
        manifest["provenance"]["continued_from"] = {"request": run.id, "config": run.request.get("config")}
    if output.compute is not None:
        manifest["compute"] = output.compute
    manifest["fields_digest"] = fields_digest(manifest)  # last: it covers every field above but the files
    return manifest


def forced_over(run: workspace.Run | None, force: bool, copy_there: bool) -> None:
    """A ``--force`` rebuild's run over a copy of its id published there: ``--resume`` alone reuses that copy
    and leaves the run as it was, so its lines name ``--force --resume`` (a caller's own words stand:
    ``kolectra run --force`` rebuilt the parents, so its checkpoint is stale and the run is continued)."""
    if run is not None and force and copy_there and run.again == workspace.Run.again:
        run.again = "--force --resume"


def reusing(request: Request, folder) -> str:
    """The line saying ``request`` reuses its id's ``folder`` (a path or URL): under another name, that the
    name given is not used (a bucket's line said only '(same request; --force rebuilds)', and ``artifacts
    show NAME`` then found nothing with no word of why)."""
    # request.name is --name's or the stage's default (a run without --name names no flag)
    note = "" if str(folder).rstrip("/").rpartition("/")[2] == f"{request.name}-{request.id()}" else (
        f"; the id is the identity: the name {request.name} (--name, else the stage's default) names only new builds")
    return f"{request.kind}: reusing {folder} (same request{note}; --force rebuilds)"


def own_first(request: Request, existing: list) -> list:
    """``existing`` (its id's folders, paths or URLs) with the one named as ``request`` first: of two copies of
    one id (``a-<id>``, ``b-<id>``, left by older versions), ``--name b --force`` rebuilt ``a-<id>``, saying
    the name b "names only new builds", and ``--name b`` reused ``a-<id>`` with the same words."""
    own = f"{request.name}-{request.id()}"
    return sorted(existing, key=lambda d: str(d).rstrip("/").rpartition("/")[2] != own)


def folder_name(request: Request, existing: list) -> str:
    """The name ``request`` is published under: its folder's (the first of ``existing``, its id's folders,
    paths or URLs, by :func:`own_first`) where there is one, else its own."""
    existing = own_first(request, existing)
    if not existing:
        return request.name
    folder = str(existing[0]).rstrip("/").rpartition("/")[2]
    return (folder[:-len(request.id()) - 1] if folder.endswith("-" + request.id()) else "") or request.name


def in_its_folder(request: Request, existing: list) -> Request:
    """``request`` under the name of the folder it is rebuilt in (``--force``, a damaged or stale copy):
    the rebuild replaces that folder (:meth:`Store._publish_as`), so its manifest names the folder's name,
    not the ``--name`` given (which ``artifacts show`` did not find: the manifest said one name, the
    folder another). ``existing``: the folders (paths or URLs) of the request's id, the first one used."""
    name, existing = folder_name(request, existing), own_first(request, existing)
    if name == request.name:
        return request
    progress(f"{request.kind}: rebuilding {existing[0]} in place, under its name {name} (the id is the identity: "
             f"the name {request.name} (--name, else the stage's default) names only new builds; "
             f"`kolectra artifacts show {name}` finds it)")
    renamed = dataclasses.replace(request, name=name)
    object.__setattr__(renamed, "_id", request.id())  # the same request: not hashed again
    return renamed


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
