"""An artifact's ``manifest.json``: hashing a built directory, reading a manifest, verifying files.

The store (:mod:`kolectra.pipeline.store.artifacts`) decides *when* a manifest is written (last, just
before the directory is renamed into place); this module decides *what* it says and whether a
directory still matches it. A manifest is data read from disk, so it is checked before anything
acts on it: every listed path must be a plain relative path inside the artifact (no ``..``, no
absolute path, no symlink leading out), or the manifest is refused as a whole and no file it
names is opened. Artifacts hold regular files and directories only: a stage that leaves a
symlink in its directory is refused when the directory is sealed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import socket
import stat
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Iterator

from kolectra.core import filehash, url_secrets
from kolectra.core.errors import UserInputError
from kolectra.core.keys import relative_path_problem
from kolectra.pipeline.store import layout

SCHEMA = "kolectra.artifact/1"
MANIFEST = "manifest.json"
# the store's liveness mark in a build directory (pipeline/store/workspace.py): never part of an artifact
BUILD_LOCK = ".kolectra-build.lock"
KINDS = ("corpus", "vocab", "examples", "checkpoint", "eval", "study")
# the largest manifest read: a corpus of 8,192 shards lists about 2 MB; a bigger one is refused unread
MAX_MANIFEST = 64 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_ID = re.compile(r"^[0-9a-f]{16}$")


class ArtifactError(UserInputError):
    """A missing, incomplete or tampered artifact; the message names the file."""


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read once per process while the file is unchanged (core/filehash.py):
    a parent checked before the build and again by the stage costs one read of its files."""
    return filehash.sha256(path)


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


# Not a package: the Unicode database of the running Python, which NFC, the character categories and
# the symbol filter read (Python 3.12's 15.0 makes emoji such as U+1FAE8 symbols, 3.11's 14.0 unassigned)
UNICODE = "unicodedata"


def library_versions(names: Iterable[str]) -> dict[str, str]:
    return {name: _version(name) for name in names}


@functools.cache  # installed packages do not change under a running process; a lookup scans sys.path
def _version(name: str) -> str:
    if name == UNICODE:
        import unicodedata  # noqa: PLC0415

        return unicodedata.unidata_version
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def kolectra_version() -> str:
    try:
        return metadata.version("kolectra")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def commit_label(provenance: dict) -> str:
    """The code an artifact was built by, as ``artifacts show`` and ``report`` name it: ``git 0123456789ab``
    (``git 0123456789ab with uncommitted changes`` where ``git_dirty`` says so), or for an installed
    kolectra (no checkout: ``git_commit`` null) ``no git checkout`` (it read ``git None``)."""
    commit = provenance.get("git_commit")
    if not (isinstance(commit, str) and commit):
        return "no git checkout"
    return f"git {commit[:12]}" + (" with uncommitted changes" if provenance.get("git_dirty") is True else "")


def _git_commit() -> str | None:
    """The commit of the checkout this code runs from, or None: an install (a wheel in site-packages)
    has none, even inside a git repository of its own (a project's venv) whose commit says nothing of
    kolectra's code, so the commit counts only where git tracks this very file."""
    here = Path(__file__).resolve()
    try:
        for args in (["ls-files", "--error-unmatch", "--", here.name], ["rev-parse", "HEAD"]):
            out = subprocess.run(["git", "-C", str(here.parent), *args],
                                 capture_output=True, text=True, timeout=5, check=False)
            if out.returncode != 0:
                return None
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


# kolectra's own code in a checkout (pyproject.toml's package-dir; docs and tests left out): an edit to any
# tracked file there since the commit makes the commit alone no record of the code that ran
_CODE_PATHS = ("kolectra", "core", "corpus", "vocab", "model", "finetune", "pipeline", "pyproject.toml")


def _git_dirty() -> bool | None:
    """Whether tracked files of kolectra's code differ from the checkout's commit (``git status``, untracked
    files left out: a new module counts once a tracked one imports it), or None where git cannot say. Only
    asked where :func:`_git_commit` found a checkout."""
    source_root = Path(__file__).resolve().parents[2]  # <root>/pipeline/store/manifest.py
    try:
        out = subprocess.run(["git", "-C", str(source_root), "status", "--porcelain", "--untracked-files=no",
                              "--", *_CODE_PATHS], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def provenance(libraries: Iterable[str], started: str, finished: str) -> dict:
    return {"kolectra": kolectra_version(), "libraries": library_versions(libraries),
            "python": platform.python_version(), "git_commit": (commit := _git_commit()),
            "git_dirty": _git_dirty() if commit else None, "host": socket.gethostname(),
            "platform": platform.platform(), "argv": [url_secrets.redacted(a) for a in sys.argv], "started": started, "finished": finished}


def fingerprint_inputs(paths: Iterable[Path]) -> list[dict]:
    """Raw inputs (files or whole directories) as path, bytes and sha256 — the lineage's leaves."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            h, total = hashlib.sha256(), 0
            for q in sorted(q for q in p.rglob("*") if q.is_file()):
                h.update(f"{q.relative_to(p).as_posix()}\0{sha256_file(q)}\n".encode())
                total += q.stat().st_size
            out.append({"path": str(p.resolve()), "bytes": total, "sha256": h.hexdigest(), "dir": True})
        elif p.is_file():
            out.append({"path": str(p.resolve()), "bytes": p.stat().st_size, "sha256": sha256_file(p)})
        else:
            raise ArtifactError(f"input not found: {p}")
    return out


def input_key(record: dict) -> dict:
    """What of an input record goes into the request id: its content hash, or for inputs
    identified by their listing (the corpus stage's: path, size, mtime and ctime or a store's checksum,
    ``corpus/inputs.py``) that identity; their sha256 is of the bytes read, known after the run."""
    if "identity" in record:
        return {"identity": record["identity"], "bytes": record["bytes"]}
    return {"sha256": record["sha256"], "bytes": record["bytes"]}


# ---- sealing a built directory ----------------------------------------------------------------
def _walk(root: Path) -> Iterator[Path]:
    """Every entry under ``root`` (files, directories, symlinks), never following a symlink."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames) + sorted(filenames):
            yield Path(dirpath) / name


def hash_tree(root: Path) -> list[dict]:
    """path, bytes and sha256 of every file under ``root``; a symlink anywhere is refused."""
    files = []
    for f in sorted(_walk(root)):
        if f == root / BUILD_LOCK:
            continue
        if f.is_symlink():
            raise ArtifactError(f"{f}: a symlink in a stage's output; artifacts hold regular files only")
        if not (f.is_file() or f.is_dir()):  # a FIFO, socket or device: never listed, so never checked
            raise ArtifactError(f"{f}: not a regular file in a stage's output; artifacts hold regular files only")
        if f.is_file():
            files.append({"path": f.relative_to(root).as_posix(), "bytes": f.stat().st_size,
                          "sha256": sha256_file(f)})
    return files


# what a manifest says besides its files, covered by ``fields_digest``: everything but the file list
# and the digests themselves (the store's checksums ride in the file entries, outside both)
UNCOVERED = ("files", "digest", "fields_digest")


def fields_digest(manifest: dict) -> str:
    """sha256 of a manifest's own fields (config, stats, parents, parent_refs, inputs, provenance,
    ...) as canonical JSON: ``digest`` covers the files only, so an edit to the fields alone would
    verify. Recorded in the manifest and, for each parent, in its children's ``parent_refs``.

    Hashed as the fields read back from ``manifest.json``: a key that is not a string (a stage's
    ``{10: n, 2: m}``) is written as text and sorts differently once it is one, so the digest taken
    before writing would not match the manifest it was written into."""
    fields = json.loads(json.dumps({k: v for k, v in manifest.items() if k not in UNCOVERED}))
    return hashlib.sha256(canonical(fields)).hexdigest()


_NOTICED: set[str] = set()  # manifests whose missing fields_digest this process has already mentioned


def fields_problem(manifest: dict, mp: Any) -> str | None:
    """Why ``manifest``'s fields do not match its ``fields_digest`` (None when they do, or when it
    was written before manifests recorded one: then a notice, once per manifest and process, says
    its fields cannot be checked)."""
    if "fields_digest" not in manifest:
        if str(mp) not in _NOTICED:
            from kolectra.core.stage import progress  # noqa: PLC0415

            _NOTICED.add(str(mp))
            progress(f"{mp}: written before manifests covered their own fields (no fields_digest); its files are "
                     "checked, its config, stats and parents cannot be. Harmless, nothing to do: it is used as "
                     "it is, and what this kolectra builds records one")
        return None
    if fields_digest(manifest) != manifest["fields_digest"]:
        return (f"{mp}: its fields (config, stats, parents, provenance ...) were edited after publishing "
                "(fields_digest does not match them)")
    return None


def files_digest(files: list[dict]) -> str:
    """sha256 of the file list as written: ``digest`` covers each file's path and sha256 only, so
    an edited ``bytes`` or a removed store ``checksum`` (what ``verify --quick`` and a stage's check
    compare a bucket's objects with) verified. Covered in turn by ``fields_digest``."""
    return hashlib.sha256(canonical(sorted(files, key=lambda e: e["path"]))).hexdigest()


def files_problem(manifest: dict, mp: Any) -> str | None:
    """Why ``manifest``'s file list does not match its ``files_digest`` (None when it does, or when
    it was written before manifests recorded one)."""
    if "files_digest" in manifest and files_digest(manifest["files"]) != manifest["files_digest"]:
        return f"{mp}: its file list (sizes, store checksums) was edited after publishing (files_digest does not match it)"
    return None


def digest(files: list[dict]) -> str:
    h = hashlib.sha256()
    for e in sorted(files, key=lambda e: e["path"]):
        h.update(f"{e['path']}\0{e['sha256']}\n".encode())
    return h.hexdigest()


def write_json(path: Path, obj: Any) -> None:
    """Written in full (flushed to disk) under another name, then renamed: never half a file."""
    write_whole(path, [(json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()])


def write_whole(path: Path, chunks: Iterable[bytes]) -> dict:
    """``chunks`` written in full (flushed to disk) under another name, then renamed: never half a
    file. Its ``bytes`` and ``sha256``, of the bytes written (not read back)."""
    tmp, h, size = path.with_name(path.name + ".part"), hashlib.sha256(), 0
    try:
        with open(tmp, "wb", buffering=1 << 20) as f:
            for data in chunks:
                h.update(data)
                size += f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:  # a full disk: say which file
        raise OSError(e.errno, e.strerror, str(path)) from e
    os.replace(tmp, path)
    return {"bytes": size, "sha256": h.hexdigest()}


# ---- reading and checking ---------------------------------------------------------------------
def unsafe_path(rel: Any) -> str | None:
    """Why ``rel`` may not name a file of an artifact (None: a plain relative path inside it)."""
    why = relative_path_problem(rel, "the artifact")
    if why:
        return why
    if rel == MANIFEST:
        return "is the manifest itself"
    return None


def read_manifest(path: Path) -> dict:
    """The manifest of the artifact directory ``path``, checked field by field (ArtifactError)."""
    mp = Path(path) / MANIFEST
    try:
        if not stat.S_ISREG(os.stat(mp).st_mode):  # a FIFO would block the read, /dev/zero never end it
            raise ArtifactError(f"{mp}: not a regular file")
        with open(mp, "rb") as f:
            text = f.read(MAX_MANIFEST + 1)
    except FileNotFoundError:
        raise ArtifactError(f"{mp}: missing (incomplete artifact)") from None
    if len(text) > MAX_MANIFEST:
        raise ArtifactError(f"{mp}: larger than {MAX_MANIFEST:,} bytes; not a manifest")
    return parse_manifest(text, mp)


def parse_manifest(text: bytes, mp: Any) -> dict:
    """A manifest's bytes (read from ``mp``, a path or a URL), checked field by field (ArtifactError)."""
    try:
        manifest = json.loads(text.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{mp}: not valid JSON ({e})") from None
    except RecursionError:
        raise ArtifactError(f"{mp}: not a manifest (JSON nested too deep)") from None
    except ValueError as e:  # what the parser refuses besides syntax: an integer of over 4,300 digits
        raise ArtifactError(f"{mp}: not a manifest ({str(e).split(';')[0][:120]})") from None
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{mp}: not a JSON object")
    try:  # JSON's "\\ud800" reads as a lone surrogate, which the digests (UTF-8) and a terminal cannot take
        canonical(manifest)
    except UnicodeEncodeError as e:
        raise ArtifactError(f"{mp}: not a manifest (holds {e.object[e.start:e.end]!r}, a lone surrogate no UTF-8 "
                            "text can hold)") from None
    for key in ("schema", "kind", "name", "id", "files", "digest"):
        if key not in manifest:
            raise ArtifactError(f"{mp}: lacks {key!r}")
    why = _malformed(manifest)
    if why:
        raise ArtifactError(f"{mp}: {why}; refusing the whole manifest")
    return manifest


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)  # JSON true is no byte count


def _entries_malformed(manifest: dict) -> str | None:
    """Why a list of entries (files, parents, parent_refs, inputs) is not what the store reads."""
    seen: set[str] = set()
    for e in manifest["files"] if isinstance(manifest["files"], list) else [None]:
        if not (isinstance(e, dict) and _is(e.get("bytes"), int) and e["bytes"] >= 0
                and isinstance(e.get("sha256"), str) and _SHA256.match(e["sha256"])):
            return f"malformed file entry {json.dumps(e)[:80]}"
        why = unsafe_path(e.get("path"))
        if why or e["path"] in seen:
            return f"file entry {repr(e.get('path'))[:200]} {why or 'is listed twice'}"
        seen.add(e["path"])
    # ids name directories (``*-<id>`` is globbed under a root): a "*" would find any artifact of a kind
    if not all(isinstance(p, str) and _ID.match(p) for p in manifest.get("parents", [])):
        return "'parents' holds something that is not an id"
    for ref in manifest.get("parent_refs", []):
        if not (isinstance(ref, dict) and isinstance(ref.get("id"), str) and _ID.match(ref["id"])
                and all(isinstance(ref.get(k, ""), str) for k in ("kind", "name", "digest", "fields_digest", "path"))):
            return f"malformed parent reference {json.dumps(ref)[:80]}"
    for inp in manifest.get("inputs", []):
        if not (isinstance(inp, dict) and isinstance(inp.get("path"), str) and _is(inp.get("bytes"), int)
                and isinstance(inp.get("sha256"), str)):
            return f"malformed input entry {json.dumps(inp)[:80]}"
    return _inputs_file_malformed(manifest)


def _inputs_file_malformed(manifest: dict) -> str | None:
    """Why ``inputs_file``/``inputs_count`` (the records past INPUTS_INLINE, :mod:`.inputs`) are not
    a file the manifest lists, with that file's bytes and sha256, and a count of at least ``inputs``."""
    if "inputs_file" not in manifest and "inputs_count" not in manifest:
        return None
    spec, count = manifest.get("inputs_file"), manifest.get("inputs_count")
    if not (_is(count, int) and count >= len(manifest.get("inputs", []))):
        return f"inputs_count {count!r} is not a count of at least its {len(manifest.get('inputs', []))} inputs"
    entry = next((e for e in manifest["files"] if isinstance(spec, dict) and e["path"] == spec.get("path")), None)
    if entry is None or any(spec.get(k) != entry[k] for k in ("bytes", "sha256")):
        return f"inputs_file {json.dumps(spec)[:80]} is not a file the manifest lists, with its bytes and sha256"
    return None


def _malformed(manifest: dict) -> str | None:
    """Why the fields the store, the lineage and the CLI read are not of the type they read (or None).

    A manifest is data on disk: one edited by hand, cut short or written by something else is
    refused here, as one message naming it, rather than failing deep inside whoever reads it."""
    if manifest["schema"] != SCHEMA:
        return f"schema {manifest['schema']!r} is not {SCHEMA!r} (written by another program or version)"
    if manifest["kind"] not in KINDS:
        return f"kind {manifest['kind']!r} is not one of {', '.join(KINDS)}"
    if not (isinstance(manifest["id"], str) and _ID.match(manifest["id"])):
        return f"id {manifest['id']!r} is not 16 hexadecimal digits"
    # the NAME of a directory NAME-ID (gc publishes a leftover build under it): one plain path part
    if not (isinstance(manifest["name"], str) and relative_path_problem(manifest["name"], "") is None
            and "/" not in manifest["name"]):
        return f"name {str(manifest['name'])[:80]!r} is not a name (one part of a directory name)"
    for key in ("digest", "fields_digest", "files_digest"):
        if key in manifest and not (isinstance(manifest[key], str) and _SHA256.match(manifest[key])):
            return f"{key} {manifest[key]!r} is not a sha256"
    for key, kind in (("files", list), ("parents", list), ("parent_refs", list), ("inputs", list),
                      ("config", dict), ("stats", dict), ("provenance", dict), ("compute", dict),
                      ("stage_version", int)):
        if key in manifest and not _is(manifest[key], kind):
            return f"{key!r} is not a JSON {'object' if kind is dict else kind.__name__}"
    return _entries_malformed(manifest)


def misplaced(path: Path, manifest: dict) -> str | None:
    """Why an artifact directory inside a root (``ROOT/<kind>/<name>-<id>``) does not sit where its
    manifest says it belongs (an edited manifest, or a directory moved or renamed by hand)."""
    path = Path(path) if isinstance(path, str) else path  # a local Path or a store's UPath
    if path.parent.name not in KINDS or not _ID.match(path.name.rpartition("-")[2]):
        return None  # not named as in a root (a build directory, a copy put elsewhere): nothing to compare
    # (a store prefix, a UPath, has no symlinks: asking would cost two requests per manifest read)
    if isinstance(path, Path) and (path.is_symlink() or not path.resolve().is_relative_to(path.parent.parent.resolve())):
        # its files would be checked where the link leads, which the store neither built nor guards
        return (f"{path}: leads through a symlink to {path.resolve()}; an artifact in a root is a directory "
                "of its own inside it (copy it in, or pass the directory it leads to)")
    if path.parent.name != manifest["kind"] or not path.name.endswith(f"-{manifest['id']}"):
        return (f"{path / MANIFEST}: says {manifest['kind']}/...-{manifest['id']}, but the directory is "
                f"{path.parent.name}/{path.name} (edited, moved or renamed by hand)")
    return None


def verify_dir(path: Path) -> list[str]:
    """Every mismatch between the manifest and the files on disk, one message each."""
    path = Path(path)
    try:
        manifest = read_manifest(path)
    except ArtifactError as e:
        return [str(e)]
    problems, listed, inside = [], set(), path.resolve()
    if where := misplaced(path, manifest):
        problems.append(where)
    for entry in manifest["files"]:
        f = path / entry["path"]
        listed.add(entry["path"])
        if not f.resolve().is_relative_to(inside):
            problems.append(f"{f}: leads out of the artifact through a symlink; not read")
        elif not f.is_file():
            problems.append(f"{f}: missing")
        elif f.stat().st_size != entry["bytes"]:
            problems.append(f"{f}: size {f.stat().st_size} != {entry['bytes']} in manifest")
        elif sha256_file(f) != entry["sha256"]:
            problems.append(f"{f}: sha256 differs from manifest")
    for f in _walk(path):
        rel = f.relative_to(path).as_posix()
        if rel == BUILD_LOCK and f.is_file() and not f.is_symlink() and f.stat().st_size == 0:
            continue  # a kill between publishing and removing the store's mark (an empty file)
        if f.is_symlink():
            problems.append(f"{f}: a symlink (added after publishing; artifacts hold regular files only)")
        elif not (f.is_file() or f.is_dir()):
            problems.append(f"{f}: not a regular file (added after publishing; artifacts hold regular files only)")
        elif f.is_file() and rel != MANIFEST and rel not in listed:
            problems.append(f"{f}: not in manifest (added after publishing)")
    if digest(manifest["files"]) != manifest["digest"]:
        problems.append(f"{path / MANIFEST}: digest does not match its file list")
    if why := files_problem(manifest, path / MANIFEST):
        problems.append(why)
    if why := fields_problem(manifest, path / MANIFEST):
        problems.append(why)
    # what the kind must hold and the manifest does not list (lost before it was sealed)
    problems += layout.missing(manifest["kind"], path, manifest.get("stats", {}), manifest.get("config", {}), listed)
    return problems
