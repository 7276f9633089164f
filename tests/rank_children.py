"""The ranks ``torch.multiprocessing`` spawns for tests/test_faults_ranks.py, in a module of their own:
a spawned rank imports the module of the function it runs, and the test module's imports (other test
modules, torch._dynamo through them) cost each rank about 1.7 CPU s more than the trainer's own."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import timedelta
from pathlib import Path


def mirror_rank(rank: int, port: int, examples, tok, out: Path, report: Path) -> None:
    """A rank of a run whose checkpoints a store root copies (``checkpoint_saved``): rank 0's copy fails
    (an unreachable bucket), rank 1's works."""
    import torch.distributed as dist

    from kolectra.model import presets, train

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2",
                      LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))  # the old code's rank 1 ends, if not in one line

    def copied(step_dir: Path) -> None:
        if rank == 0:
            raise OSError(f"{step_dir}: could not be copied to the store (connection reset)")

    cfg = presets.tiny()
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=12, batch_size=8, warmup_steps=3,
                                                             log_every=4, save_every=4, cpu_threads=1))
    try:
        train.pretrain(cfg, examples, tok, out, checkpoint_saved=copied)
        result = "finished"
    except Exception as e:  # noqa: BLE001 - what each rank ended with is the test's subject
        result = f"{type(e).__name__}: {e}"
    (report / f"rank-{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()
