"""One rank of a torchrun job failing in work of its own, outside a checkpoint's save (a checkpoint's
parts: tests/test_faults_sigterm.py): rank 0's disk full while it writes a log step's lines, the
export, the metrics log it opens on --resume; a rank whose copy of a checkpoint to the store fails.
Every rank ends in one line with status 2: the failing rank its own, the others naming it. Before,
the others went on to the next collective: gloo on one machine reported the closed connection as
an internal error (status 1, a traceback log); NCCL would have held them until its timeout."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch.multiprocessing as mp

from kolectra.model import checkpoint
from tests.model_support import build_examples, build_tokenizer
from tests.rank_children import mirror_rank
from tests.test_faults_interrupts import REPO
from tests.test_faults_pretrain import _copy, chain  # noqa: F401  (the chain fixture)
from tests.test_faults_sigterm import _ended, _one_line, _training
from tests.test_model_ddp import _free_port

SETS = ["train.batch_size=8", "train.warmup_steps=2", "train.log_every=1", "train.lr=3e-3", "train.cpu_threads=1"]
OTHER = "kolectra pretrain: error: rank 0 of this run failed to {} (its own line says why); this rank stops too"


def _ranks(root: Path, ex: str, steps: int, fsize_0: int, save_every: int = 0, extra=()) -> list[subprocess.Popen]:
    """Two ranks of ``kolectra pretrain`` (gloo, RANK/WORLD_SIZE as torchrun sets them); rank 0 under a
    file-size limit of ``fsize_0`` bytes a file (a real EFBIG past it: Python ignores SIGXFSZ)."""
    port = _free_port()

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_0, fsize_0))

    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "pretrain", "--examples", ex, "--out", str(root),
           *(f"--set={s}" for s in SETS if not s.startswith(("train.steps", "train.save_every"))), "--steps", str(steps), "--save-every", str(save_every), *extra]
    return [subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=limited if rank == 0 and fsize_0 else None,
                             env={**os.environ, "PYTHONPATH": str(REPO), "MASTER_ADDR": "127.0.0.1",
                                  "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": "2",
                                  "LOCAL_RANK": str(rank)}) for rank in (0, 1)]


def _lines(ranks: list[subprocess.Popen]) -> tuple[str, str]:
    (code0, err0), (code1, err1) = _ended(ranks[0], ""), _ended(ranks[1], "")
    assert (code0, code1) == (2, 2), err0[-2000:] + err1[-2000:]  # before: rank 1 1 (gloo's "internal error")
    return _one_line(err0), _one_line(err1)


def test_rank_0_failing_to_write_a_log_step_ends_every_rank_at_that_step(chain, tmp_path):  # noqa: F811
    """The lines of a log step (metrics.jsonl, TensorBoard's events) cross rank 0's limit at about step 8:
    rank 1 learns it in the all-reduce the ranks make at log steps anyway (SIGTERM's)."""
    store, ex = _copy(chain, tmp_path / "root")
    line0, line1 = _lines(_ranks(store.root, ex, steps=40, fsize_0=6000))
    assert re.match(r"kolectra pretrain: error: \S+/out/(tensorboard|metrics\.jsonl): the file-size limit was "
                    r"reached; checkpoint: nothing published", line0), line0
    m = re.fullmatch(re.escape(OTHER.format("log step @ (metrics.jsonl, TensorBoard's events)")).replace("@", r"(\d+)"),
                     line1)
    assert m and 1 < int(m.group(1)) < 40, line1
    assert store.list("checkpoint") == []


def test_rank_0_failing_to_export_ends_every_rank_after_the_export(chain, tmp_path):  # noqa: F811
    """The export's model.safetensors (590 kB) is past rank 0's limit; its lines (7 kB) are not. Before,
    rank 1 waited for it in the barrier after the export."""
    store, ex = _copy(chain, tmp_path / "root")
    line0, line1 = _lines(_ranks(store.root, ex, steps=6, fsize_0=100_000))
    assert re.match(r"kolectra pretrain: error: \S+/out/hf/discriminator: the file-size limit was reached", line0), line0
    assert line1 == OTHER.format("export the model (hf/)"), line1
    assert store.list("checkpoint") == []


def test_rank_0_failing_to_open_its_metrics_log_on_resume_ends_every_rank_before_the_first_step(
        chain, tmp_path):  # noqa: F811
    """--resume rewrites metrics.jsonl up to the checkpoint's step (5.5 kB here) on rank 0, past its
    limit of 1 kB: rank 1, which loaded its part, learns it before the first step's all-reduce."""
    store, ex = _copy(chain, tmp_path / "root")
    first = _ranks(store.root, ex, steps=100000, fsize_0=0, save_every=5)
    try:
        deadline = time.monotonic() + 120
        while not list(store.root.glob("**/checkpoints/step-00000005/manifest.json")) and time.monotonic() < deadline:
            assert first[0].poll() is None and first[1].poll() is None, first[0].communicate()[1][-2000:]
            time.sleep(0.02)
    finally:
        for proc in first:  # a machine lost: the run is kept, --resume continues it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    line0, line1 = _lines(_ranks(store.root, ex, steps=100000, fsize_0=1000, save_every=5, extra=["--resume"]))
    (run,) = (store.root / ".work").iterdir()
    assert line0.startswith(f"kolectra pretrain: error: {run}/out/metrics.jsonl.part: the file-size limit was "
                            "reached; checkpoint: its working state is kept in "), line0  # before: no file named
    assert line1 == OTHER.format("start (its shards, checkpoint or metrics log)"), line1
    assert checkpoint.latest(run / "out") is not None  # kept for the next --resume


def test_a_rank_whose_examples_change_under_it_ends_the_others_in_one_line_on_gloo(chain, tmp_path):  # noqa: F811
    """Rank 1 alone reads shard 1 (the deal of this seed); its guard sees the file changed and ends rank 1
    inside a step, before the gradient all-reduce, where rank 0 waits: gloo reports the closed
    connection, which is told as another rank's end (NCCL would wait for its timeout)."""
    store, ex = _copy(chain, tmp_path / "root")
    ranks = _ranks(store.root, ex, steps=100000, fsize_0=0)
    try:
        seen = _training(ranks[0], "pretrain 3/100000 ")
        assert ranks[1].poll() is None, seen
        shard = Path(ex) / "data" / "shard-00001.arrow"
        later = time.time() + 100
        os.utime(shard, (later, later))  # a change time that moved: "rewritten in place"
    finally:
        line0, line1 = _lines(ranks)
    assert line1.startswith(f"kolectra pretrain: error: {shard}: rewritten in place while training read it"), line1
    assert line0.startswith("kolectra pretrain: error: another rank of this run ended during a training step (its "
                            "line, if it printed one, says why; gloo: its connection closed); this rank stops too"), line0


def test_a_rank_whose_checkpoint_copy_fails_ends_every_rank_at_that_save(tmp_path):
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=64, seq_len=32)
    (tmp_path / "out").mkdir()
    mp.start_processes(mirror_rank, args=(_free_port(), examples, tok, tmp_path / "out", tmp_path), nprocs=2,
                       join=True, start_method="spawn")
    r0, r1 = (json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1))
    assert r0.startswith("OSError: ") and "step-00000004: could not be copied" in r0, r0
    assert r1 == ("AnotherRankFailed: rank 0 of this run failed to copy checkpoint step-00000004 to the store "
                  "(its own line says why); this rank stops too"), r1
