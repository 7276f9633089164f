"""Data-parallel pretraining over two CPU processes (gloo): ranks stay in sync, rank 0 writes; on a
bucket each rank fetches only its own shards, and a killed pair resumes to a straight run's weights.
The ranks' functions are in tests/rank_children.py, which a spawned rank imports instead of this module."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import time
from pathlib import Path

import torch.multiprocessing as mp

from tests.model_support import build_examples, build_tokenizer
from tests.rank_children import SHARINGS, bucket_rank, epochs_rank, late_rank, resume_rank, sharing_rank, stage_rank
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)


def _free_port() -> int:
    """A port for rank 0's rendezvous store, free now and below the range the kernel hands out itself (an
    outgoing connection's port, another process's bind to port 0): the ranks bind it seconds later (imports,
    a lease, a fetch), and on a loaded machine running many tests a port from that range can be taken
    meanwhile. Where that range starts too low, one from it, as before."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    # the system's randomness, not the module's: a test process that trained in-process has seeded `random`
    # (the run's seed), so two xdist workers (or two tests of one) drew the same ports in the same order
    for port in random.SystemRandom().sample(range(max(low - 12000, 10000), low), 50) if low > 12000 else ():
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_train_in_sync(tmp_path):
    """For each embedding sharing: identical weights on both ranks, metrics averaged over ranks and
    written once by rank 0, the loss going down, the export written."""
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=100, seq_len=32)
    out, report = tmp_path / "out", tmp_path / "report"
    for sharing in SHARINGS:
        (out / sharing).mkdir(parents=True)
    report.mkdir()
    mp.start_processes(sharing_rank, args=(2, _free_port(), examples, tok, out, report), nprocs=2, join=True,
                       start_method="spawn")
    for sharing in SHARINGS:
        r0, r1 = (json.loads((report / f"rank-{r}-{sharing}.json").read_text()) for r in (0, 1))
        assert r0["weights"] == r1["weights"], sharing  # gradients were averaged: identical updates everywhere
        assert r0["stats"]["ranks"] == 2 and r0["stats"]["final"] == r1["stats"]["final"], sharing  # averaged
        rows = [json.loads(x) for x in (out / sharing / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [4, 8, 12], sharing  # written once, by rank 0
        assert rows[-1]["loss"] < rows[0]["loss"], (sharing, rows)
        assert (out / sharing / "hf" / "discriminator" / "model.safetensors").is_file(), sharing


def test_every_rank_runs_the_stage_and_rank_0_alone_publishes(tmp_path):
    """Each rank runs the same build on one root: rank 0 reserves and publishes it, the others train
    in its run directory and return what it published (no rank waits on another's request lock).
    Each rank reads each file of its inputs once to hash it (the store's check, the build's check of
    its parents and the loader's pin share one read); rank 0 also reads the checkpoint as it seals it."""
    from kolectra.pipeline.store.artifacts import Store
    from tests.model_support import small_chain
    from tests.test_store_hash_once import SETS, _bytes, _settled

    store = Store(tmp_path / "root")
    _, vocab, ex = small_chain(store)
    _settled(store.root)  # only files changed over filehash.SETTLED_NS ago are read once
    report = tmp_path / "report"
    report.mkdir()
    mp.start_processes(stage_rank, args=(2, _free_port(), str(store.root), str(report), SETS), nprocs=2, join=True,
                       start_method="spawn")
    [art] = store.list("checkpoint")
    ranks = [json.loads((report / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert {r["path"] for r in ranks} == {str(art.path)}
    assert store.verify(art) == [] and art.manifest["stats"]["ranks"] == 2
    assert not any((store.root / ".work").iterdir())
    assert [r["read"] for r in ranks] == [_bytes(ex) + _bytes(vocab) + _bytes(art), _bytes(ex) + _bytes(vocab)]


def test_a_follower_joins_the_group_only_once_a_late_rank_0_creates_it(bucket, tmp_path):
    """Before: the follower called init_process_group at once and sat in c10d's connect retry, whose
    pause grows to 60 s (+-50 %), so it joined up to 90 s after rank 0 was ready; now it waits for
    rank 0's store to listen (polled every 0.5 s) and only then calls it."""
    from kolectra.pipeline.store.factory import open_store
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    store = open_store(f"{bucket}/late")
    _, _, ex = small_chain(store, shard_size=8)
    report = tmp_path / "report"
    report.mkdir()
    port = _free_port()
    procs = [mp.get_context("spawn").Process(target=late_rank, args=(r, 2, port, store.url, str(ex.path),
                                                                     str(report), 5.0, SETS)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0]
    r0, r1 = (json.loads((report / f"rank-{r}.json").read_text()) for r in (0, 1))
    assert r1["called"] > r0["called"], r0["called"] - r1["called"]  # not before rank 0's store could answer


def _cached_bytes(cache: Path) -> dict[str, int]:
    """The examples' files a machine fetched (its cache), with their sizes."""
    # beside the copy: its reader lock (<copy>.lock, pipeline/store/copies.py), not a fetched file
    [copy] = [p for p in (cache / "artifacts" / "examples").iterdir() if p.is_dir()]
    return {p.relative_to(copy).as_posix(): p.stat().st_size for p in copy.rglob("*")
            if p.is_file() and p.name != "manifest.json"}


def test_two_machines_on_a_bucket_fetch_half_the_examples_each_and_resume_exactly(bucket, tmp_path, capfd):
    """Two gloo ranks with separate caches: each fetches about half of the examples' bytes (its own
    4 of 8 shards, index.json and stats.json), their rows in an epoch are disjoint and cover the examples, and
    both killed in step 10 (each rank's part of checkpoint 8 is in the bucket) then resumed on fresh
    machines return the one checkpoint rank 0 published, with the weights of a straight run, and
    leave no run state or lock in the bucket."""
    import torch.multiprocessing as mp

    from kolectra.core import storage
    from kolectra.pipeline.store.factory import open_store
    from tests.model_support import small_chain
    from tests.test_faults_pretrain import SETS

    def ranks(root: str, examples: str, machines: str, **kw) -> list[int]:
        report = tmp_path / machines
        report.mkdir()
        port = _free_port()
        procs = [mp.get_context("spawn").Process(target=bucket_rank, args=(
            r, 2, port, root, examples, str(tmp_path / f"{machines}-cache-{r}"), str(report), SETS), kwargs=kw)
            for r in range(2)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + 900
        for p in procs:
            p.join(timeout=max(deadline - time.monotonic(), 1))
        left = [p for p in procs if p.exitcode is None]
        for p in left:  # a rank still running fails the test alone, not the next phase's ranks beside it
            p.kill()
            p.join()
        return [None if p in left else p.exitcode for p in procs]

    weights = {}
    for name in ("straight", "resumed"):
        store = open_store(f"{bucket}/{name}")
        _, _, ex = small_chain(store, shard_size=8)  # 8 shards of 8 rows
        if name == "resumed":
            assert ranks(store.url, str(ex.path), "killed", die_at=10) == [-9, -9]
            kept = storage.listing(f"{store.url}/.work")
            assert {k.rsplit("/", 1)[1] for k in kept if "/step-00000008/" in k} >= {
                "rank-0.pt", "rank-1.pt", "manifest.json"}, sorted(kept)
            capfd.readouterr()
            assert ranks(store.url, str(ex.path), "resumed", resume=True) == [0, 0]
            err = capfd.readouterr().err
            assert "is held by no process: that process of this machine has ended (killed: kill -9" in err, err[-3000:]
        else:
            assert ranks(store.url, str(ex.path), "straight") == [0, 0]
            total = sum(f["bytes"] for f in ex.manifest["files"])
            fetched = [_cached_bytes(tmp_path / f"straight-cache-{r}") for r in range(2)]
            assert set(fetched[0]) & set(fetched[1]) == {"index.json", "stats.json"}  # stats.json: read_inputs' check
            assert all(len(f) == 6 and 0.4 < sum(f.values()) / total < 0.6 for f in fetched), (fetched, total)
            rows = [json.loads((tmp_path / "straight" / f"rank-{r}.json").read_text())["rows"] for r in range(2)]
            assert not set(rows[0]) & set(rows[1]) and sorted(rows[0] + rows[1]) == list(range(64))
        [art] = store.list("checkpoint")
        # every rank returns what rank 0 published
        assert {json.loads((tmp_path / name / f"rank-{r}.json").read_text())["path"] for r in range(2)} == {
            str(art.path)}
        assert store.verify(art) == []
        assert storage.children(f"{store.url}/.work") == [] and storage.children(f"{store.url}/.locks") == []
        weights[name] = art.read_bytes("hf/discriminator/model.safetensors")
    assert art.manifest["stats"]["resumed_from_step"] == 8
    assert weights["resumed"] == weights["straight"]


def test_ranks_holding_different_checkpoints_resume_from_the_newest_they_all_hold(tmp_path, capfd):
    """A copy to the store cut short (a preemption, a second SIGTERM) leaves rank 0's machine a newer
    checkpoint than the store's, which the other machines fetch. Each rank resumed from its own newest:
    rank 0 at step 8, rank 1 at step 4, with other weights; they paired steps they did not share and,
    rank 0 done first, waited on each other for ever (seen on moto: 2 ranks, SIGTERM did not end them).
    Now every rank resumes from step 4, the newest they all hold, to a straight run's weights; with
    none in common every rank starts fresh; a rank failing before the agreement ends both in one line each."""
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=64, seq_len=32, shard_size=16)
    report = tmp_path / "report"
    report.mkdir()
    port = _free_port()
    procs = [mp.get_context("spawn").Process(target=resume_rank, args=(r, 2, port, examples, tok, str(tmp_path),
                                                                        str(report))) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    for p in procs:
        if p.exitcode is None:
            p.kill()
    assert [p.exitcode for p in procs] == [0, 0]  # before: rank 1 still stepping, rank 0 waiting in the export
    got = [json.loads((report / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [{k: r.pop(k) for k in ("straight", "older", "none")} for r in got] == [
        {"straight": 0, "older": 4, "none": 0}] * 2
    assert got[0] == {"shards": "AnotherRankFailed: rank 1 of this run failed to start (its shards, checkpoint or "
                                "metrics log) (its own line says why); this rank stops too",
                      "kept": ["step-00000004", "step-00000008"]}, got[0]
    assert got[1]["shards"].startswith("ExamplesError: ") and "missing" in got[1]["shards"], got[1]
    weights = {case: (tmp_path / case / "rank-0" / "hf" / "discriminator" / "model.safetensors").read_bytes()
               for case in ("older", "none")}
    straight = (tmp_path / "straight" / "hf" / "discriminator" / "model.safetensors").read_bytes()
    assert weights == {"older": straight, "none": straight}
    err = capfd.readouterr().err
    assert ("the ranks' newest checkpoints differ (step-00000008 on rank 0, step-00000004 on rank 1: a copy to the "
            "store cut short leaves the other machines an older one); every rank resumes from step-00000004") in err
    assert ("the ranks' newest checkpoints differ (step-00000008 on rank 0, none on rank 1); with none common to "
            "every rank, every rank starts fresh") in err


def test_epochs_count_the_passes_the_ranks_make_and_the_rows_each_epoch_leaves_out(tmp_path, capfd):
    """103 rows on 3 ranks (34, 34 and 35 rows), batch 12 (4 a rank): each rank reads 8 batches of
    its share an epoch, 96 rows in all, and drops the tail of its order, 7 rows. 10 steps are 1.25
    passes; stats said 1.165 (steps x batch / rows), counted no tail, and the start's line gave
    rank 0's share alone ("34 of 103 rows")."""
    tok = build_tokenizer(tmp_path / "tok")
    examples = build_examples(tmp_path / "examples", tok, n=103, seq_len=32, shard_size=25)
    report = tmp_path / "report"
    report.mkdir()
    mp.start_processes(epochs_rank, args=(3, _free_port(), examples, tok, str(tmp_path / "out"), str(report)),
                       nprocs=3, join=True, start_method="spawn")
    for r in range(3):
        stats = json.loads((report / f"rank-{r}.json").read_text())
        assert stats["examples_seen"] == 120 and stats["epochs"] == 1.25, stats
        assert stats["examples_per_epoch"] == 96 and stats["examples_left_out_per_epoch"] == 7, stats
    err = capfd.readouterr().err
    assert "the examples' 5 shard(s) are dealt to 3 ranks: each reads 2 to 3 of them and 34 to 35 of 103 rows" \
        in err, err
