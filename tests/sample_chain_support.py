"""The demo chain on a tiny config (``kolectra run``'s code: corpus -> vocab -> examples -> pretrain -> NSMC
and KorQuAD), built once a test process and copied for each module that reads it: tests/test_end_to_end.py
(which adds artifacts to its copy) and tests/test_store_s3.py (its local side of the same request on a
bucket). Each built it before, about 20 CPU s; a copy is 4 MB. A module importing a fixture gets a fixture of
its own, so the built chain is kept here (as tests/export_support.py keeps its checkpoint)."""

from __future__ import annotations

import contextlib
import io
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kolectra.pipeline.run import run_sample
from kolectra.pipeline.store.artifacts import Store

TINY = {
    "vocab": ["vocab_size=3000", "report_baseline=false"],
    "examples": ["max_seq_length=64"],
    "pretrain": ["train.steps=12", "train.log_every=4", "train.batch_size=8", "train.warmup_steps=2"],
    "nsmc": ["max_train_examples=64", "max_eval_examples=32", "epochs=1"],
    "korquad": ["max_train_examples=16", "epochs=1"],
}


@dataclass(frozen=True)
class Built:
    root: Path  # the chain as run_sample left it: copy it, never write into it
    korquad_id: str  # the artifact run_sample returned
    seconds: float  # the build's wall time
    out: str  # what the run printed to stdout and stderr
    err: str


_BUILT: dict[Path, Built] = {}  # the session's temporary folder -> the chain built there


def copy_of_the_chain(tmp_path_factory, dest: Path) -> tuple[Store, Built]:
    """A Store at ``dest`` holding a copy of this process's TINY chain (built on the first call)."""
    session = tmp_path_factory.getbasetemp()
    if session not in _BUILT:
        root = tmp_path_factory.mktemp("sample-chain")
        t0 = time.perf_counter()
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            korquad = run_sample(Store(root), sets=TINY)
        _BUILT[session] = Built(root, korquad.id, time.perf_counter() - t0, out.getvalue(), err.getvalue())
    built = _BUILT[session]
    shutil.copytree(built.root, dest, symlinks=True)
    return Store(dest), built
