"""Exact resume for an interrupted pretrain run: verified, atomic step directories of the training state.

Every ``save_every`` steps the loop writes ``out_dir/checkpoints/step-NNNNNNNN/``:

- ``model.safetensors``: the weights, each shared tensor once (the generator's embeddings and
  tied output layer are the discriminator's; ``state.pt`` lists the aliases);
- ``optimizer.pt``: AdamW's moments and step counts;
- ``state.pt``: step, the learning-rate schedule's position, loader position, the resolved
  config, a fingerprint of the vocabulary and the not-learning warning standing then, if one does
  (``health``: a resumed run ends with the straight run's verdict; written by rank 0);
- ``rank-R.pt``: each rank's RNG states (torch, numpy, python, and the accelerator's) and its
  open metrics window, so a resumed run continues with the very batches, masks and samples the
  uninterrupted run would have used;
- ``manifest.json``, written last: bytes and sha256 of every file. A directory counts only with
  a manifest whose hashes match, so a save cut short, a truncated or an altered file is skipped
  and the previous checkpoint used.

Directories are built under a temporary name, their files and the directory flushed to the disk
(``fsync``), then renamed into place; the newest ``keep_checkpoints`` survive, and only once the
new one is on the disk. Step directories newer than the one a run resumes from (damaged, or
written by a version that cannot load them) are set aside as ``step-N.skipped`` by the run's
first save: they would otherwise count toward ``keep_checkpoints`` and push out intact ones. Nothing here is unpickled with ``weights_only=False``: numpy
arrays (numpy's RNG state) are stored as tensors; a checkpoint that still does not load (a
pickle ``weights_only`` refuses) is skipped like a damaged one (:func:`load_latest`). The
``checkpoints/`` folder is working state, not the product (``hf/``): the artifact store sets it
aside while it publishes the artifact and deletes it only after (a direct caller of
``pretrain`` has it removed after the export).
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
import resource
import shutil
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from kolectra.core import filehash
from kolectra.core.errors import EnvironmentProblem
from kolectra.core.stage import progress
from kolectra.model.checkpoint_layout import OPERATIONAL, checkpoints_dir  # torch-free: pretrain reads them first
from kolectra.model.checkpoint_writes import FULL, CheckpointWriteError, synced, writing_into  # noqa: F401 - torch-free: export

STEP_DIR = re.compile(r"^step-(\d{8})$")
MANIFEST = "manifest.json"
FORMAT = 2
REQUIRED = ("model.safetensors", "optimizer.pt", "state.pt")  # rank 0's files; rank-R.pt is checked on load


# --- plain-data encoding for weights_only loading ------------------------------------------------

def encode(obj):
    """numpy arrays -> tensors (tagged), numpy scalars -> Python numbers; the rest as is."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(obj).copy())}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(encode(v) for v in obj)
    return obj


def decode(obj):
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__"}:
            return obj["__ndarray__"].numpy()
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(decode(v) for v in obj)
    return obj


# --- weights ------------------------------------------------------------------------------------

def split_shared(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """(each distinct tensor once, on the host; alias name -> stored name).

    ``state`` comes from ``state_dict(keep_vars=True)``: a tensor shared between modules is then
    the same object under each of its names (identity works on every device, data_ptr does not).
    """
    unique, aliases, seen = {}, {}, {}
    for name, t in state.items():
        key = id(t)
        if key in seen:
            aliases[name] = seen[key]
            continue
        seen[key] = name
        unique[name] = t.detach().to("cpu").contiguous()
    return unique, aliases


def join_shared(unique: dict[str, torch.Tensor], aliases: dict[str, str]) -> dict[str, torch.Tensor]:
    return {**unique, **{alias: unique[name] for alias, name in aliases.items()}}


# --- integrity ----------------------------------------------------------------------------------

def problems(step_dir: Path) -> list[str]:
    """Why ``step_dir`` is not a usable checkpoint (empty list = complete and intact)."""
    manifest_path = Path(step_dir) / MANIFEST
    if not manifest_path.is_file():
        return [f"{manifest_path}: missing (the save did not finish)"]
    try:
        files = json.loads(manifest_path.read_text(encoding="utf-8"))["files"]
        entries = sorted((str(name), int(want["bytes"]), str(want["sha256"])) for name, want in files.items())
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:  # cut short, edited, garbled
        return [f"{manifest_path}: unreadable ({type(e).__name__}: {str(e)[:100]})"]
    out = [f"{manifest_path}: lists no {name}" for name in REQUIRED if name not in {n for n, _, _ in entries}]
    for name, size, sha in entries:
        path = Path(step_dir) / name
        if "/" in name or name in ("", ".", ".."):
            out.append(f"{manifest_path}: {name!r} is not a file of the checkpoint")
        elif not path.is_file():
            out.append(f"{path}: missing")
        elif path.stat().st_size != size:
            out.append(f"{path}: {path.stat().st_size} bytes, manifest says {size}")
        elif filehash.sha256(path) != sha:
            out.append(f"{path}: sha256 differs from the manifest")
    return out


def intact(out_dir: Path) -> Iterator[Path]:
    """Complete, intact step directories, newest first; damaged ones are reported and skipped."""
    root = checkpoints_dir(out_dir)
    if not root.is_dir():
        return
    for step_dir in sorted((p for p in root.iterdir() if STEP_DIR.match(p.name)), reverse=True):
        found = problems(step_dir)
        if not found:
            yield step_dir
        else:
            progress(f"pretrain: skipping checkpoint {step_dir.name}: {found[0]}")


def latest(out_dir: Path) -> Path | None:
    """The newest complete, intact step directory, or None."""
    return next(intact(out_dir), None)


def load_latest(out_dir: Path, rank: int = 0) -> tuple[Path, dict] | None:
    """(step directory, :func:`load`) of the newest checkpoint that is intact *and* loads.

    Hashes prove a checkpoint is the one that was written, not that it is loadable: one written by
    another version can hold objects ``weights_only`` refuses to unpickle. That one is reported and
    the previous checkpoint used, as for a damaged one."""
    for step_dir in intact(out_dir):
        try:
            return step_dir, load(step_dir, rank)
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, KeyError, TypeError,
                 SafetensorError) as e:
            progress(f"pretrain: skipping checkpoint {step_dir.name}: it does not load "
                     f"({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})")
    return None


def trim_log(path: Path, step: int) -> None:
    """Keep the lines of ``metrics.jsonl`` up to ``step`` that parse: a line cut short by a kill or a
    full disk is dropped (naming the file and line), not left to block the resume. Read and written
    a line at a time: a long run's log is never held whole."""
    if not path.is_file():
        return
    dropped, tmp = [], path.with_name(path.name + ".part")
    try:
        with path.open(encoding="utf-8", errors="replace") as lines, tmp.open("w", encoding="utf-8") as out:
            for number, line in enumerate(lines, 1):
                line = line.rstrip("\r\n")
                try:
                    row = json.loads(line) if line.strip() else None
                except json.JSONDecodeError:
                    dropped.append(number)
                    continue
                if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] <= step:
                    out.write(line + "\n")
                elif row is not None and not (isinstance(row, dict) and isinstance(row.get("step"), int)):
                    dropped.append(number)
    except OSError as e:  # a full disk: write() and close() say so without the file's name
        if e.filename or not e.errno:
            raise
        raise OSError(e.errno, e.strerror, str(tmp)) from e
    if dropped:
        progress(f"pretrain: {path}: line(s) {', '.join(map(str, dropped[:5]))} unreadable (cut short?); dropped")
    os.replace(tmp, path)


# --- save / load --------------------------------------------------------------------------------

# How a write that did not reach the disk is worded by torch's zip writer (inline_container.cc:
# "file write failed", or "unexpected pos" under a file-size limit; a file that fits its 64 kB buffer,
# as rank-R.pt and state.pt do, fails at the buffer's flush: "basic_ios::clear: iostream error"),
# safetensors ("I/O error: ... (os error 28)") and the OS; any other RuntimeError (transformers'
# shared-tensor refusal, a bug) is no disk's.
WRITE_FAILED = ("inline_container.cc", "write failed", "iostream error", "I/O error", "IoError", "os error",
                "No space left", "too large", "Quota exceeded")
# the errno a library's words carry: safetensors' "(os error 122)" (Rust's io::Error), its debug form
# "code: 122", torch's "open file failed with strerror: Read-only file system"
_ERRNO_SAID = re.compile(r"\(os error (\d+)\)|\bcode: (\d+)|strerror: ([^\n.]+)")
_STRERROR = {os.strerror(n): n for n in sorted(errno.errorcode, reverse=True)}  # the smallest number a text has


def said_errno(text: str) -> int | None:
    """The errno a library's message names (a quota, a read-only disk, permissions as well as a full disk), or None."""
    found = _ERRNO_SAID.search(text)
    if found is None:
        return None
    number, words = found.group(1) or found.group(2), found.group(3)
    return int(number) if number else _STRERROR.get(words.strip())


def refused_with(path: Path) -> int | None:
    """The errno the disk gives 64 kB more written to ``path``, a file whose write failed and which is
    discarded (torch's zip writer says only "unexpected pos" or "iostream error": a disk quota on a
    roomy disk read as an input/output error); None where the disk takes them, or ``path`` is no file."""
    try:
        if not path.is_file():
            return None
        with path.open("ab") as f:
            f.write(bytes(1 << 16))
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        return e.errno or None
    return None


def written(path: Path, write, what: str = "checkpoint") -> None:
    """``write(path)`` and its bytes synced to the disk; its failure as an OSError naming the file
    (or folder): torch and safetensors report a full disk as RuntimeError or SafetensorError, without
    the file's name. The partial step directory is removed by :func:`save`, once every rank knows."""
    try:
        write(path)
        synced(path)
    except (OSError, RuntimeError, SafetensorError) as e:
        text, soft_limit = str(e), resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if not isinstance(e, OSError) and not any(w in text for w in WRITE_FAILED):
            raise  # not a write that failed (transformers' shared-tensor refusal, a bug): as it is
        code = e.errno if isinstance(e, OSError) and e.errno else said_errno(text) or (
            errno.ENOSPC if "No space left" in text or "error 28" in text or "code: 28" in text else
            errno.EFBIG if "too large" in text or "error 27" in text or "code: 27" in text else
            # torch's zip writer only says its write failed: the disk, asked again, says why; else
            # a full disk, or the file-size limit
            refused_with(path) or (errno.ENOSPC if shutil.disk_usage(path.parent).free < (64 << 20) else
                                   errno.EFBIG if soft_limit != resource.RLIM_INFINITY else errno.EIO))
        raise CheckpointWriteError(code, f"{os.strerror(code)} ({what} not written)", str(path)) from e


class CheckpointNotWritten(EnvironmentProblem):
    """Another rank's part of a checkpoint failed (its own error says why): this rank ends too."""


def _space_note(code: int, root: Path, soft_limit: int) -> str | None:
    """What the disk (or the size limit) has against what a checkpoint takes: the newest complete one's bytes."""
    try:
        steps = sorted(p for p in root.iterdir() if STEP_DIR.match(p.name))
        took = f"; the last checkpoint ({steps[-1].name}) took {_mb(sum(f.stat().st_size for f in steps[-1].iterdir()))}" \
            if steps else ""
        if code == errno.EFBIG and soft_limit != resource.RLIM_INFINITY:
            return f"checkpoint not written: the file-size limit (ulimit -f) is {_mb(soft_limit)} a file{took}"
        if code == errno.EDQUOT:  # the disk's free space says nothing of a user's quota
            return f"checkpoint not written: your quota on that disk is used up (quota -s shows it){took}"
        if code == errno.ENOSPC:
            return f"checkpoint not written: {_mb(shutil.disk_usage(root).free)} free on that disk{took}"
    except OSError:  # the figures are a help; the error is the report
        pass
    return None


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def save(out_dir: Path, step: int, model_state: dict | None, optimizer_state: dict | None, shared: dict | None,
         own: dict, rank: int = 0, barrier=lambda: None, save_fn=torch.save, keep: int = 2,
         agree: Callable[[bool], list[int] | None] | None = None) -> Path:
    """Collective: every rank calls it with its ``own`` state; rank 0 passes the rest and makes the
    directory appear (manifest last, then an atomic rename).

    Every rank ends the same way: after each part (rank 0 makes the directory; each rank writes its
    file; rank 0 the rest) ``agree(failed)`` (collective: the ranks where it failed, also the
    barrier) tells every rank whether one failed; then the partial ``.tmp-step-N`` is removed, the
    failing rank raises its error (the file, and the space: :func:`_space_note`) and the others
    :class:`CheckpointNotWritten` naming it. Before, a rank whose disk was full left the others
    waiting at the next barrier until torch.distributed's timeout (30 min). Without ``agree``, or
    where it returns None (an XLA pod's hosts have no host group), ``barrier`` separates the parts
    and a failure is raised where it happened."""
    root = checkpoints_dir(out_dir)
    final = root / f"step-{step:08d}"
    tmp = root / f".tmp-step-{step:08d}"

    def part(work: Callable[[], None]) -> None:
        error = None
        try:
            work()
        except Exception as e:  # noqa: BLE001 - raised below, once every rank knows
            error = e
        failed = agree(error is not None) if agree is not None else None
        if failed is None:
            failed = [rank] if error is not None else []
            if not failed:
                barrier()
        if not failed:
            return
        shutil.rmtree(tmp, ignore_errors=True)  # the partial step directory: free what it took
        if error is None:
            newest = max((p.name for p in root.iterdir() if STEP_DIR.match(p.name)), default=None) \
                if root.is_dir() else None  # none: rank 0 could not make it (this run's first save)
            raise CheckpointNotWritten(
                f"checkpoint {final.name} not written: rank {', '.join(map(str, failed))} could not write its part "
                f"(its own line says why); {f'the newest checkpoint is {newest}' if newest else 'no earlier checkpoint'}")
        if isinstance(error, CheckpointWriteError) and (
                note := _space_note(error.errno, root, resource.getrlimit(resource.RLIMIT_FSIZE)[0])):
            error.add_note(note)
        raise error

    def make_dir() -> None:
        if rank == 0:
            root.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()

    def own_part() -> None:
        tmp.mkdir(parents=True, exist_ok=True)  # a rank on another machine than rank 0 writes its part there
        written(tmp / f"rank-{rank}.pt", lambda path: save_fn(encode(own), path))

    def publish() -> None:
        if rank != 0:
            return
        unique, aliases = split_shared(model_state)
        written(tmp / "model.safetensors", lambda path: save_file(
            unique, str(path), metadata={"format": str(FORMAT), "step": str(step)}))
        written(tmp / "optimizer.pt", lambda path: save_fn(optimizer_state, path))
        written(tmp / "state.pt", lambda path: save_fn(
            encode({**shared, "step": step, "aliases": aliases, "format": FORMAT}), path))
        files = {p.name: {"bytes": p.stat().st_size, "sha256": filehash.sha256(p)} for p in sorted(tmp.iterdir())}
        written(tmp / MANIFEST, lambda path: path.write_text(
            json.dumps({"format": FORMAT, "step": step, "files": files}, indent=1), encoding="utf-8"))
        synced(tmp)  # the directory's entries (every rank's file is in by the previous part's end)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        synced(root)  # the rename, before older checkpoints go
        steps = sorted(p for p in root.iterdir() if STEP_DIR.match(p.name))
        for newer in steps[steps.index(final) + 1:]:
            # past the step this run saves: left by an earlier process and skipped when this one
            # resumed (damaged, or not loadable); counted, it would push out an intact checkpoint
            aside = newer.with_name(newer.name + ".skipped")
            shutil.rmtree(aside, ignore_errors=True)
            os.replace(newer, aside)
            progress(f"pretrain: {newer.name} was skipped on resume; set aside as {aside.name}, "
                     "no longer counted toward train.keep_checkpoints")
        for old in steps[:steps.index(final) + 1][:-keep]:
            shutil.rmtree(old)

    try:
        for work in (make_dir, own_part, publish):
            part(work)
    except KeyboardInterrupt:  # a stop (Ctrl-C, a second SIGTERM) cut the save short: as a failed part, the
        if rank == 0:  # partial folder goes (rank 0's: it makes it and renames it in), else the run's working
            shutil.rmtree(tmp, ignore_errors=True)  # state was it alone, 'kept ... continues it' and never loaded
        raise
    return final


def _load(path: Path):
    return torch.load(path, map_location="cpu", weights_only=True)


def load(step_dir: Path, rank: int = 0) -> dict:
    """``{"model", "optimizer", "state", "own"}`` from a verified step directory."""
    step_dir = Path(step_dir)
    own_path = step_dir / f"rank-{rank}.pt"
    if not own_path.is_file():
        raise FileNotFoundError(f"{own_path}: missing; was this checkpoint written with another number of ranks?")
    state = decode(_load(step_dir / "state.pt"))
    model = join_shared(load_file(str(step_dir / "model.safetensors")), state["aliases"])
    return {"model": model, "optimizer": _load(step_dir / "optimizer.pt"), "state": state,
            "own": decode(_load(own_path))}


# --- compatibility ------------------------------------------------------------------------------

# OPERATIONAL (the settings a resume may change): model/checkpoint_layout.py


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def differences(saved: dict, now: dict) -> list[str]:
    """``key: saved value -> current value`` for each setting that differs (operational ones aside)."""
    a, b = _flatten(saved), _flatten(now)
    return [f"{k}: {a.get(k, '(absent)')!r} -> {b.get(k, '(absent)')!r}" for k in sorted(set(a) | set(b))
            if k not in OPERATIONAL and a.get(k) != b.get(k)]


def clear(out_dir: Path) -> None:
    shutil.rmtree(checkpoints_dir(out_dir), ignore_errors=True)
