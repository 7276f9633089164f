"""Benchmark: the artifact store on an S3-compatible server against a local root, side by side.

    python benchmarks/store.py [--quick] [--reviews GLOB | --data DIR] [--rounds N]

Starts moto's S3 server on 127.0.0.1 (``pip install 'moto[server]' s3fs``, what the tests use) and
points the standard environment at it. Then, in one run:

- the corpus job (Beam, default options) over the same reviews, publishing into the bucket
  (workers write the shards under the artifact's prefix, the launcher writes the manifest)
  against the same request into a local root; the two alternate, ``--force`` each time; medians;
- the pretraining loader reading the examples artifact from the bucket (a fresh cache each round:
  every shard downloaded and checked against its SHA-256, then batches read) against the same
  loader on the local artifact; batches/s over ``--batches`` batches of 32 rows;
- what the trainer consumes: steps/s of the ``small`` preset's step on this CPU (the step the
  trainer runs), so the loader's headroom over it (``loader_vs_trainer``) is measured, not assumed;
- the bytes each rank of 1, 2 and 4 fetches from the bucket (``bytes_per_rank``; a fresh cache a
  rank, as separate machines have): the files the trainer asks for (``model.shard_order.rank_files``),
  downloaded and checked by ``Store.local(art, only=...)``, for the examples as built and for the same
  rows in about 32 shards (``shard_size`` set from the row count).

``--bytes-only``: only the bytes per rank (no timings, a little CPU): ``value`` is the largest
rank's share of the artifact's bytes with 4 ranks, ``baseline`` the share every rank fetched
before the shard-aware order (1.0, the whole artifact).

``value``: the loader's batches/s from the bucket, cold (download included); ``baseline``: from the
local root. The corpus figures and the headroom are in ``extra``. The local server has no network
latency or bandwidth limit: a cloud bucket is slower to download from, which the headroom covers.

``--quick``: the embedded sample's 4,000 reviews (or the first 20,000 of ``--reviews``), 3 rounds,
about a minute on 2 cores. Full: 20,000 reviews, 5 rounds, a few minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from common import SAMPLE_REVIEWS, add_data_args, data_path, emit, moto_server, parser


def input_file(args, tmp: Path) -> str:
    """The reviews as one JSONL file (``--reviews``: its first files, up to the size's limit)."""
    import glob
    import gzip

    limit = 4_000 if args.quick and data_path(args, "reviews", "benchmarks/store.py") is None else 20_000
    source = data_path(args, "reviews", "benchmarks/store.py")
    files = sorted(glob.glob(source)) if source else [str(SAMPLE_REVIEWS)]
    out, n = tmp / "reviews.jsonl", 0
    with open(out, "wb") as f:
        for path in files:
            for line in gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb"):
                f.write(line)
                n += 1
                if n >= limit:
                    return str(out)
    return str(out)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def loader_rate(examples_dir: Path, batches: int) -> float:
    from kolectra.model.data import ExampleLoader

    loader = ExampleLoader(examples_dir, batch_size=32, seed=0)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(loader)
    loader.close()
    return batches / (time.perf_counter() - t0)


def trainer_rate(vocab_size: int, seq_len: int, steps: int = 3) -> float:
    """Steps/s of the ``small`` preset's training step at batch 32 (the trainer's own step)."""
    import dataclasses

    import step_bench as bench

    from kolectra.model import presets

    model_cfg = dataclasses.replace(presets.small().model, vocab_size=vocab_size)
    runner = bench.build_runner("kolectra", model_cfg, seq_len, 32, bf16=False, device="cpu", fill=1.0, seed=0)
    runner.step()  # warm-up
    return 1.0 / statistics.median(runner.step() for _ in range(steps))


def bytes_per_rank(remote, art, tmp: Path, seed: int = 0) -> dict[str, list[int]]:
    """Bytes each rank of 1, 2 and 4 fetches of ``art`` (a fresh cache per rank), by world size."""
    from kolectra.model import shard_order

    shards = json.loads(art.read_bytes("index.json"))["shards"]
    out, before = {}, os.environ.get("KOLECTRA_CACHE")
    for world in (1, 2, 4):
        out[str(world)] = []
        for rank in range(world):
            cache = tmp / f"rank-cache-{world}-{rank}"
            os.environ["KOLECTRA_CACHE"] = str(cache)
            d = remote.local(art, shard_order.rank_files(shards, seed, rank, world).__contains__)
            out[str(world)].append(sum(p.stat().st_size for p in d.rglob("*")
                                       if p.is_file() and p.name != "manifest.json"))
            shutil.rmtree(cache)
    os.environ["KOLECTRA_CACHE"] = before or ""
    return out


def bytes_report(remote, c_remote, v_remote, ex_remote, tmp: Path) -> dict:
    """bytes_per_rank for the examples as built and for the same rows in about 32 shards."""
    from kolectra.pipeline import stages

    rows = ex_remote.manifest["stats"]["examples"]
    many = stages.examples(remote, c_remote, v_remote, sets=["max_seq_length=128", f"shard_size={-(-rows // 32)}"])
    report = {}
    for name, art in (("as_built", ex_remote), ("about_32_shards", many)):
        report[name] = {"shards": len(json.loads(art.read_bytes("index.json"))["shards"]),
                        "artifact_bytes": sum(f["bytes"] for f in art.manifest["files"]),
                        "bytes_per_rank": bytes_per_rank(remote, art, tmp)}
    return report


def main() -> None:
    p = parser(__doc__, "a few minutes on 2 cores")
    add_data_args(p, "reviews")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--bytes-only", action="store_true", help="only the bytes each rank of 1, 2 and 4 fetches")
    args = p.parse_args()
    rounds = args.rounds or (3 if args.quick else 5)
    os.environ.setdefault("KOLECTRA_VERBOSITY", "0")
    server, endpoint = moto_server("benchmarks/store.py")
    tmp = Path(tempfile.mkdtemp(prefix="kolectra-bench-store-"))
    try:
        from kolectra.core import storage
        from kolectra.pipeline import stages
        from kolectra.pipeline.store.artifacts import Store
        from kolectra.pipeline.store.factory import open_store

        storage.reset()
        fs, _ = storage.filesystem("s3://bench")
        fs.mkdir("bench")
        os.environ["KOLECTRA_CACHE"] = str(tmp / "cache")
        src = input_file(args, tmp)
        local, remote = Store(tmp / "local"), open_store("s3://bench/root")
        if args.bytes_only:
            c_remote = stages.corpus(remote, [src])
            v_remote = stages.vocab(remote, c_remote, sets=["vocab_size=8000", "report_baseline=false"])
            ex_remote = stages.examples(remote, c_remote, v_remote, sets=["max_seq_length=128"])
            report = bytes_report(remote, c_remote, v_remote, ex_remote, tmp)
            many = report["about_32_shards"]
            emit("store_bytes_per_rank", "share of the artifact's bytes", max(many["bytes_per_rank"]["4"])
                 / many["artifact_bytes"], "every_rank_fetches_all", 1.0,
                 {"reviews": src, "ranks": [1, 2, 4], "endpoint": endpoint}, extra=report)
            return
        corpus_local, corpus_remote = [], []
        for i in range(rounds):
            corpus_local.append(timed(lambda: stages.corpus(local, [src], force=i > 0)))
            corpus_remote.append(timed(lambda: stages.corpus(remote, [src], force=i > 0)))
        c_local, c_remote = local.list("corpus")[0], remote.list("corpus")[0]
        assert c_local.manifest["digest"] == c_remote.manifest["digest"], "the bucket's corpus differs"
        v = stages.vocab(local, c_local, sets=["vocab_size=8000", "report_baseline=false"])
        ex_local = stages.examples(local, c_local, v, sets=["max_seq_length=128"])
        v_remote = stages.vocab(remote, c_remote, sets=["vocab_size=8000", "report_baseline=false"])
        ex_remote = stages.examples(remote, c_remote, v_remote, sets=["max_seq_length=128"])
        rows = ex_local.manifest["stats"]["examples"]
        batches = min(args.batches, max(1, rows // 32))
        from_store, from_disk, download = [], [], []
        for _ in range(rounds):
            shutil.rmtree(tmp / "cache", ignore_errors=True)
            t0 = time.perf_counter()
            cached = remote.local(ex_remote)
            download.append(time.perf_counter() - t0)
            read = batches / loader_rate(cached, batches)
            from_store.append(batches / (download[-1] + read))
            from_disk.append(loader_rate(ex_local.path, batches))
        trainer = trainer_rate(8000 + 5, 128, steps=1 if args.quick else 3)
        store_rate, disk_rate = statistics.median(from_store), statistics.median(from_disk)
        emit("store_loader_cold", "batches/s", store_rate, "local_root_loader", disk_rate,
             {"reviews": src, "rounds": rounds, "batches": batches, "batch_size": 32, "rows": rows,
              "examples_bytes": sum(f["bytes"] for f in ex_remote.manifest["files"]), "endpoint": endpoint},
             extra={"loader_from_store_batches_per_s": [round(x, 2) for x in from_store],
                    "loader_local_batches_per_s": [round(x, 2) for x in from_disk],
                    "download_and_verify_s": [round(x, 3) for x in download],
                    "trainer_small_steps_per_s": round(trainer, 4),
                    "loader_vs_trainer": round(store_rate / trainer, 1),
                    "corpus_to_bucket_s": [round(x, 2) for x in corpus_remote],
                    "corpus_to_local_s": [round(x, 2) for x in corpus_local],
                    "corpus_local_over_bucket": round(statistics.median(corpus_local)
                                                      / statistics.median(corpus_remote), 3),
                    "bytes_per_rank": bytes_report(remote, c_remote, v_remote, ex_remote, tmp),
                    "load_average": os.getloadavg()})
    finally:
        server.terminate()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
