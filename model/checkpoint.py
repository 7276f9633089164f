"""Exact resume for an interrupted pretrain run: atomic step directories of the full training state.

Every ``save_every`` steps the loop writes ``out_dir/checkpoints/step-NNNNNNNN/``: ``state.pt``
(model, optimizer, loader position; written by rank 0) and one ``rank-R.pt`` per rank (its RNG
states and open metrics window), so a resumed run continues with the very batches, masks and
samples the uninterrupted run would have used (same metrics, same weights on CPU). A directory is written under a
temporary name and renamed into place, so a crash mid-save leaves no half checkpoint behind;
the newest ``keep`` survive. After the final export the whole ``checkpoints/`` folder is removed:
the artifact's product is ``hf/``.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import torch

STEP_DIR = re.compile(r"^step-(\d{8})$")


def checkpoints_dir(out_dir: Path) -> Path:
    return Path(out_dir) / "checkpoints"


def latest(out_dir: Path) -> Path | None:
    """The newest complete step directory, or None."""
    root = checkpoints_dir(out_dir)
    if not root.is_dir():
        return None
    steps = sorted(p for p in root.iterdir() if STEP_DIR.match(p.name) and (p / "state.pt").is_file())
    return steps[-1] if steps else None


def save(out_dir: Path, step: int, shared: dict | None, own: dict, rank: int = 0, barrier=lambda: None,
         save_fn=torch.save, keep: int = 2) -> Path:
    """Collective: every rank calls it; rank 0 passes ``shared`` and makes the directory appear."""
    root = checkpoints_dir(out_dir)
    final = root / f"step-{step:08d}"
    tmp = root / f".tmp-step-{step:08d}"
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    barrier()
    save_fn(own, tmp / f"rank-{rank}.pt")
    barrier()
    if rank == 0:
        save_fn(shared, tmp / "state.pt")  # written last: its presence marks a complete directory
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in sorted(p for p in root.iterdir() if STEP_DIR.match(p.name))[:-keep]:
            shutil.rmtree(old)
    barrier()
    return final


def load(step_dir: Path, rank: int = 0) -> tuple[dict, dict]:
    """(shared state, this rank's state). Our own files: they hold numpy RNG state, hence weights_only=False."""
    shared = torch.load(Path(step_dir) / "state.pt", map_location="cpu", weights_only=False)
    own_path = Path(step_dir) / f"rank-{rank}.pt"
    if not own_path.is_file():
        raise FileNotFoundError(f"{own_path}: missing; was this checkpoint written with another number of ranks?")
    return shared, torch.load(own_path, map_location="cpu", weights_only=False)


def clear(out_dir: Path) -> None:
    shutil.rmtree(checkpoints_dir(out_dir), ignore_errors=True)
