"""The artifact store: versioned, hash-linked, atomically published stage outputs.

Every stage run becomes ``ROOT/<kind>/<name>-<id>/``. The id is a hash of the *request* — kind,
stage version, resolved config, parent ids, raw-input fingerprints and the versions of the
libraries that decide the output — so asking for the same thing twice finds the existing
artifact instead of recomputing it. The directory is built under ``ROOT/.tmp/``, its
``manifest.json`` (file hashes, digest, stats, provenance) is written last, and only then is it
renamed into place: a killed run never leaves something that looks complete.

Stage code never sees any of this; it writes files into the directory it is handed and returns
a :class:`core.stage.StageOutput` (see :meth:`Store.build`).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import uuid
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable

from kolectra.core.stage import StageOutput, progress

SCHEMA = "kolectra.artifact/1"
KINDS = ("corpus", "vocab", "examples", "checkpoint", "eval", "study")
MANIFEST = "manifest.json"
ID_CHARS = 16
_CHUNK = 1 << 20


class ArtifactError(RuntimeError):
    """A missing, incomplete or tampered artifact; the message names the file."""


def default_root() -> Path:
    return Path(os.environ.get("KOLECTRA_HOME", "artifacts"))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def library_versions(names: Iterable[str]) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def kolectra_version() -> str:
    try:
        return metadata.version("kolectra")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def fingerprint_inputs(paths: Iterable[Path]) -> list[dict]:
    """Raw inputs (files or whole directories) as path, bytes and sha256 — the lineage's leaves."""
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files = sorted(q for q in p.rglob("*") if q.is_file())
            h = hashlib.sha256()
            total = 0
            for q in files:
                h.update(f"{q.relative_to(p).as_posix()}\0{sha256_file(q)}\n".encode())
                total += q.stat().st_size
            out.append({"path": str(p.resolve()), "bytes": total, "sha256": h.hexdigest(), "dir": True})
        elif p.is_file():
            out.append({"path": str(p.resolve()), "bytes": p.stat().st_size, "sha256": sha256_file(p)})
        else:
            raise ArtifactError(f"input not found: {p}")
    return out


@dataclasses.dataclass(frozen=True)
class Artifact:
    path: Path
    manifest: dict

    @property
    def id(self) -> str:
        return self.manifest["id"]

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def name(self) -> str:
        return self.manifest["name"]

    @property
    def parents(self) -> list[str]:
        return list(self.manifest.get("parents", []))

    def parent_of_kind(self, store: "Store", kind: str) -> "Artifact":
        for pid in self.parents:
            parent = store.resolve(pid)
            if parent.kind == kind:
                return parent
        raise ArtifactError(f"{self.path}: has no {kind} parent")


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
            "inputs": [{"sha256": i["sha256"], "bytes": i["bytes"]} for i in self.inputs],
            "libraries": library_versions(self.libraries),
        }

    def id(self) -> str:
        return hashlib.sha256(_canonical(self.key())).hexdigest()[:ID_CHARS]


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
    def list(self, kind: str | None = None) -> list[Artifact]:
        kinds = [kind] if kind else list(KINDS)
        out = []
        for k in kinds:
            for d in sorted((self.root / k).glob("*")):
                if (d / MANIFEST).is_file():
                    out.append(load(d))
        return out

    def find(self, kind: str, artifact_id: str) -> Artifact | None:
        for d in sorted((self.root / kind).glob(f"*-{artifact_id}")):
            if (d / MANIFEST).is_file():
                return load(d)
        return None

    def resolve(self, ref: str | Path, kind: str | None = None) -> Artifact:
        """An artifact directory, ``name-id``, an id, an id prefix (>= 6) or a name, if unambiguous."""
        p = Path(ref)
        if p.is_dir() and (p / MANIFEST).is_file():
            return load(p)
        if p.is_dir() and ("/" in str(ref) or p.is_absolute()):
            raise ArtifactError(f"{p}: not a complete artifact ({MANIFEST} missing)")
        ref = str(ref)
        exact, by_name = [], []
        for k in [kind] if kind else KINDS:
            for d in (self.root / k).glob("*"):
                if not (d / MANIFEST).is_file():
                    continue
                name, _, aid = d.name.rpartition("-")
                if d.name == ref or aid == ref or (len(ref) >= 6 and aid.startswith(ref)):
                    exact.append(d)
                elif name == ref:
                    by_name.append(d)
        hits = exact or by_name
        if not hits:
            where = f"{self.root}/{kind}" if kind else str(self.root)
            raise ArtifactError(f"no artifact {ref!r} under {where}")
        if len(hits) > 1:
            raise ArtifactError(f"{ref!r} is ambiguous: " + ", ".join(str(h) for h in sorted(hits)))
        return load(hits[0])

    # ---- checking ------------------------------------------------------------------------
    def verify(self, art: Artifact | str | Path) -> list[str]:
        """Every mismatch between the manifest and the files on disk, one message each."""
        if not isinstance(art, Artifact):
            try:
                art = self.resolve(art)
            except (ArtifactError, json.JSONDecodeError) as e:
                return [str(e)]
        return verify_dir(art.path)

    def require(self, ref: Artifact | str | Path, kind: str | None = None) -> Artifact:
        """Resolve and verify a parent before a stage reads it; refuse it naming the files."""
        art = ref if isinstance(ref, Artifact) else self.resolve(ref, kind)
        if kind and art.kind != kind:
            raise ArtifactError(f"{art.path}: is a {art.kind} artifact, expected {kind}")
        problems = verify_dir(art.path)
        if problems:
            raise ArtifactError(
                f"refusing {art.kind} artifact {art.path}: it does not match its manifest:\n  "
                + "\n  ".join(problems)
            )
        return art

    # ---- building ------------------------------------------------------------------------
    def build(
        self,
        request: Request,
        produce: Callable[[Path], StageOutput],
        force: bool = False,
        resumable: bool = False,
        resume: bool = False,
    ) -> Artifact:
        """Return the artifact for ``request``, producing it (atomically) only if needed.

        A ``resumable`` stage (pretraining) is built in a lasting work directory,
        ``ROOT/.work/<kind>-<name>-<id>/``, that survives a failed or killed run: with
        ``resume`` the same request continues there from the stage's own checkpoints; without
        it the directory is cleared first.
        """
        if request.kind not in KINDS:
            raise ArtifactError(f"unknown artifact kind {request.kind!r}")
        for parent in request.parents:
            self.require(parent)
        aid = request.id()
        final = self.root / request.kind / f"{request.name}-{aid}"
        existing = self.find(request.kind, aid)
        if existing is not None and not force:
            problems = verify_dir(existing.path)
            if not problems:
                progress(f"{request.kind}: reusing {existing.path} (same request; --force rebuilds)")
                return existing
            progress(f"{request.kind}: existing {existing.path} is damaged ({problems[0]}); rebuilding")

        if resumable:
            tmp = self.root / ".work" / f"{request.kind}-{request.name}-{aid}"
            if tmp.exists() and not resume:
                shutil.rmtree(tmp)
            elif tmp.exists():
                progress(f"{request.kind}: resuming in {tmp}")
            elif resume:
                progress(f"{request.kind}: nothing to resume for this request; starting fresh")
            tmp.mkdir(parents=True, exist_ok=True)
            (tmp / MANIFEST).unlink(missing_ok=True)
        else:
            tmp = self.root / ".tmp" / f"{request.kind}-{request.name}-{aid}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir(parents=True)
        started = _now()
        try:
            output = produce(tmp)
            finished = _now()
            if (tmp / MANIFEST).exists():
                raise ArtifactError(f"stage wrote its own {MANIFEST}; that name is reserved")
            files = _hash_tree(tmp)
            manifest = {
                "schema": SCHEMA,
                "kind": request.kind,
                "name": request.name,
                "id": aid,
                "parents": [p.id for p in request.parents],
                "parent_refs": [
                    {"id": p.id, "kind": p.kind, "name": p.name, "digest": p.manifest["digest"]}
                    for p in request.parents
                ],
                "inputs": list(request.inputs),
                "config": request.config,
                "stage_version": request.stage_version,
                "files": files,
                "digest": _digest(files),
                "stats": output.stats,
                "provenance": {
                    "kolectra": kolectra_version(),
                    "libraries": library_versions(request.libraries),
                    "python": platform.python_version(),
                    "git_commit": _git_commit(),
                    "host": socket.gethostname(),
                    "platform": platform.platform(),
                    "argv": sys.argv,
                    "started": started,
                    "finished": finished,
                },
            }
            if output.compute is not None:
                manifest["compute"] = output.compute
            _write_json(tmp / MANIFEST, manifest)  # last: its presence means "complete"
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():
                trash = self.root / ".tmp" / f"trash-{final.name}-{uuid.uuid4().hex[:8]}"
                os.replace(final, trash)
                shutil.rmtree(trash, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            if resumable:
                progress(f"{request.kind}: stopped; its checkpoints stay in {tmp} (rerun with --resume)")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        return load(final)

    # ---- lineage -------------------------------------------------------------------------
    def lineage_lines(self, art: Artifact) -> list[str]:
        """The lineage tree back to the raw inputs, as text lines."""
        lines = [_label(art)]
        seen: set[str] = set()

        def walk(a: Artifact, prefix: str) -> None:
            children: list[tuple[str, Artifact | dict | str]] = []
            for pid in a.parents:
                try:
                    children.append(("artifact", self.resolve(pid)))
                except ArtifactError:
                    children.append(("missing", pid))
            for inp in a.manifest.get("inputs", []):
                children.append(("input", inp))
            for i, (what, child) in enumerate(children):
                last = i == len(children) - 1
                branch, cont = ("└── ", "    ") if last else ("├── ", "│   ")
                if what == "artifact":
                    again = child.id in seen
                    lines.append(prefix + branch + _label(child) + (" (see above)" if again else ""))
                    if not again:
                        seen.add(child.id)
                        walk(child, prefix + cont)
                elif what == "input":
                    lines.append(
                        prefix + branch
                        + f"input {child['path']} ({child['bytes']:,} bytes, sha256 {child['sha256'][:12]})"
                    )
                else:
                    lines.append(prefix + branch + f"MISSING parent {child}")

        walk(art, "")
        return lines


def load(path: Path) -> Artifact:
    path = Path(path)
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(f"{path / MANIFEST}: missing (incomplete artifact)") from None
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{path / MANIFEST}: not valid JSON ({e})") from None
    for key in ("schema", "kind", "id", "files", "digest"):
        if key not in manifest:
            raise ArtifactError(f"{path / MANIFEST}: lacks {key!r}")
    return Artifact(path=path, manifest=manifest)


def verify_dir(path: Path) -> list[str]:
    path = Path(path)
    try:
        art = load(path)
    except ArtifactError as e:
        return [str(e)]
    problems = []
    listed = {}
    for entry in art.manifest["files"]:
        rel = entry["path"]
        listed[rel] = entry
        f = path / rel
        if not f.is_file():
            problems.append(f"{f}: missing")
            continue
        size = f.stat().st_size
        if size != entry["bytes"]:
            problems.append(f"{f}: size {size} != {entry['bytes']} in manifest")
        elif sha256_file(f) != entry["sha256"]:
            problems.append(f"{f}: sha256 differs from manifest")
    for f in sorted(path.rglob("*")):
        rel = f.relative_to(path).as_posix()
        if f.is_file() and rel != MANIFEST and rel not in listed:
            problems.append(f"{f}: not in manifest (added after publishing)")
    if _digest(art.manifest["files"]) != art.manifest["digest"]:
        problems.append(f"{path / MANIFEST}: digest does not match its file list")
    return problems


def _hash_tree(root: Path) -> list[dict]:
    files = []
    for f in sorted(root.rglob("*")):
        if f.is_file():
            files.append({
                "path": f.relative_to(root).as_posix(),
                "bytes": f.stat().st_size,
                "sha256": sha256_file(f),
            })
    return files


def _digest(files: list[dict]) -> str:
    h = hashlib.sha256()
    for e in sorted(files, key=lambda e: e["path"]):
        h.update(f"{e['path']}\0{e['sha256']}\n".encode())
    return h.hexdigest()


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _label(a: Artifact) -> str:
    return f"{a.kind}/{a.path.name}"
