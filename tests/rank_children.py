"""The ranks ``torch.multiprocessing`` spawns for tests/test_faults_ranks.py and tests/test_model_ddp.py,
in a module of their own: a spawned rank imports the module of the function it runs, and a test
module's imports (pytest, other test modules, torch._dynamo through some) cost each rank 0.3 to 1.7 CPU s
more than the trainer's own. So stdlib imports only here; each rank imports what it runs, and what a test
module holds (its ``SETS``) comes as an argument."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from datetime import timedelta
from pathlib import Path


def _ended() -> None:
    """This rank's work is done and reported: end its process as the ``kolectra`` command ends
    (pipeline/cli/exiting.py: threads joined, atexit handlers and weakref finalizers run, streams flushed,
    less the interpreter's freeing of torch's, transformers' and Inductor's modules, about 1.7 CPU s a
    process here). Only after a rank returned: one that raised ends as before."""
    from kolectra.pipeline.cli.exiting import exit_now

    exit_now(0)


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
    _ended()


SHARINGS = ("es", "gdes")  # ELECTRA's embedding sharing and DeBERTa-v3's gradient-disentangled one

# the resumed ranks take the killed ones' lease over at once (its holder, of this machine, has ended: the test
# says so), not once it expired; so the lease keeps its length: one of 4 s, as there before, is lost by a
# renewal failing after a 4 s stall of a loaded machine's store
QUICK_POLL = {"KOLECTRA_LEASE_POLL_SECONDS": "0.2"}


def _join(rank: int, world: int, port: int, **more: str) -> None:
    """The variables torchrun sets for this rank (and ``more``)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), **more)


def sharing_rank(rank: int, world: int, port: int, examples, tok, out, report) -> None:
    """Trains once per sharing in one process group: the ranks are started once (each spawn of two
    ranks costs about 10 CPU s of imports); the trainer's own group set-up is in the tests."""
    import torch.distributed as dist

    from kolectra.model import presets, train

    _join(rank, world, port)
    dist.init_process_group("gloo")
    pair = train.ElectraPair
    try:
        for sharing in SHARINGS:
            built = []

            class Recorded(pair):  # keeps a handle on the trained model to compare ranks
                def __init__(self, *a, **k):
                    super().__init__(*a, **k)
                    built.append(self)

            train.ElectraPair = Recorded
            cfg = presets.tiny()
            cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=12, batch_size=8, warmup_steps=3,
                                                                     log_every=4, lr=3e-3, cpu_threads=1),
                                      model=dataclasses.replace(cfg.model, embedding_sharing=sharing))
            result = train.pretrain(cfg, examples, tok, out / sharing)
            digest = hashlib.sha256()
            for name, p in sorted(built[0].state_dict().items()):
                digest.update(name.encode() + p.detach().numpy().tobytes())
            (report / f"rank-{rank}-{sharing}.json").write_text(json.dumps({"weights": digest.hexdigest(),
                                                                            "stats": result.stats}))
    finally:
        train.ElectraPair = pair
        dist.destroy_process_group()
    _ended()


def stage_rank(rank: int, world: int, port: int, root: str, report: str, sets: list[str]) -> None:
    """A rank as ``torchrun -m kolectra.pipeline.cli pretrain`` starts it: the whole stage, store included;
    it reports what the stage returned and the bytes it read to hash (core/filehash.py)."""
    _join(rank, world, port)
    from kolectra.core import filehash
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.artifacts import Store

    store = Store(root)
    art = stages.pretrain(store, str(store.list("examples")[0].path), preset="tiny", sets=sets)
    (Path(report) / f"rank-{rank}.json").write_text(json.dumps({"path": str(art.path),
                                                                "read": filehash.hashed()["bytes"]}))
    _ended()


def bucket_rank(rank: int, world: int, port: int, root: str, examples: str, cache: str, report: str, sets: list[str],
                die_at: int = 0, resume: bool = False) -> None:
    """A rank on a machine of its own (its own cache) training from a bucket: the rows its order hands
    out in epoch 0 are recorded; with ``die_at`` it is killed in that training step."""
    _join(rank, world, port, KOLECTRA_CACHE=cache, **QUICK_POLL)
    from kolectra.core import storage
    from kolectra.model import shard_order
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.factory import open_store
    from tests.fault_child import kill_in_training_step  # kolectra's imports only

    real, seen = shard_order.RankOrder.positions, []

    def recorded(self, epoch, start, stop):
        out = real(self, epoch, start, stop)
        seen.extend(out.tolist() if epoch == 0 else [])
        return out

    shard_order.RankOrder.positions = recorded
    if die_at:
        kill_in_training_step(die_at)
    storage.reset()
    art = stages.pretrain(open_store(root), examples, preset="tiny", sets=sets, resume=resume)
    Path(report, f"rank-{rank}.json").write_text(json.dumps({"path": str(art.path), "rows": sorted(set(seen))}))
    _ended()


def late_rank(rank: int, world: int, port: int, root: str, examples: str, report: str, late: float,
              sets: list[str]) -> None:
    """A rank whose ``init_process_group`` call is timed, then ends the process once the group is
    formed; rank 0 starts ``late`` seconds after the follower (as one waiting on a lease does)."""
    import time

    import torch.distributed as dist

    _join(rank, world, port, KOLECTRA_CACHE=str(Path(report, f"cache-{rank}")))
    from kolectra.pipeline import stages
    from kolectra.pipeline.store.factory import open_store

    real = dist.init_process_group

    def timed(*a, **k):
        called = time.time()
        real(*a, **k)
        joined = time.time()
        # neither rank leaves before both are in the group: rank 0's exit takes its store away, and a
        # follower still finishing its own init_process_group then fails (seen once under load 10)
        dist.barrier()
        Path(report, f"rank-{rank}.json").write_text(json.dumps({"called": called, "joined": joined}))
        os._exit(0)

    dist.init_process_group = timed
    time.sleep(late if rank == 0 else 0)
    stages.pretrain(open_store(root), examples, preset="tiny", sets=sets)


def resume_rank(rank: int, world: int, port: int, examples, tok, base: str, report: str) -> None:
    """Trains straight (12 steps, saved every 4) in one folder, then resumes with each rank in a folder of
    its own, as machines of a store root do (rank 1's holds only what it fetched from the store): rank 0
    with steps 4 and 8, rank 1 with step 4, then with none. Reports each run's export and resumed step."""
    import shutil

    import torch.distributed as dist

    from kolectra.model import presets, train

    _join(rank, world, port)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    cfg = presets.tiny()
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=12, batch_size=8, warmup_steps=2,
                                                             log_every=4, save_every=4, lr=3e-3, cpu_threads=1))
    base, got = Path(base), {}
    try:
        straight = train.pretrain(cfg, examples, tok, base / "straight", clear_checkpoints=False)
        got["straight"] = straight.stats["resumed_from_step"]
        for case, rank_1_holds in (("older", ["step-00000004"]), ("none", [])):
            mine = base / case / f"rank-{rank}"
            if rank == 0:
                shutil.copytree(base / "straight" / "checkpoints", base / case / "rank-0" / "checkpoints")
                for step in rank_1_holds:
                    shutil.copytree(base / "straight" / "checkpoints" / step,
                                    base / case / "rank-1" / "checkpoints" / step)
            dist.barrier()
            got[case] = train.pretrain(cfg, examples, tok, mine, resume=True).stats["resumed_from_step"]
        # rank 1 fails before the agreement (its shards are missing): it meets rank 0's in the start's
        mine, own = base / "shards" / f"rank-{rank}", examples
        shutil.copytree(base / "straight" / "checkpoints", mine / "checkpoints")
        if rank == 1:
            own = shutil.copytree(examples, base / "shards" / "examples")
            for f in (own / "data").iterdir():
                f.unlink()
        try:
            train.pretrain(cfg, own, tok, mine, resume=True)
        except Exception as e:  # noqa: BLE001 - the test compares the lines
            got["shards"] = f"{type(e).__name__}: {e}"
        got["kept"] = sorted(p.name for p in (mine / "checkpoints").iterdir())
        (Path(report) / f"rank-{rank}.json").write_text(json.dumps(got))
    finally:
        dist.destroy_process_group()
    _ended()


def epochs_rank(rank: int, world: int, port: int, examples, tok, out: str, report: str) -> None:
    import torch.distributed as dist

    from kolectra.model import presets, train

    _join(rank, world, port)
    dist.init_process_group("gloo")
    try:
        cfg = presets.tiny()
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=10, batch_size=12, warmup_steps=2,
                                                                 log_every=5, cpu_threads=1))
        stats = train.pretrain(cfg, examples, tok, Path(out) / f"rank-{rank}").stats
        (Path(report) / f"rank-{rank}.json").write_text(json.dumps(stats))
    finally:
        dist.destroy_process_group()
    _ended()
