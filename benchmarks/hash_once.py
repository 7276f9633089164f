"""Benchmark: what pretraining's checks of its examples read, each file hashed once a run against
every check reading it.

    python benchmarks/hash_once.py [--quick] [--mb N]

An examples-kind artifact of ``--mb`` MB of random shards is published on a local root, left to
settle (core/filehash.py remembers a digest only for a file last changed over 2 s before it was
read), then checked as ``kolectra pretrain`` checks it: ``require`` before the request is made,
``Store.build``'s check of its parents, and the loader's pin of every shard
(``model.shard_guard.pin``, inside the build). The baseline is the same sequence with every file's
change time moved before each check (``os.utime`` to its own times), so no check can take a digest
from an earlier one: every check reads every file, as each did before filehash. Both alternate,
``--rounds`` times, medians.

``value``: bytes hashed a run, as a share of the artifact's bytes (1.0: each file once);
``baseline``: the same for every check reading. ``extra``: the checks' CPU seconds a run, both ways,
and sha256's CPU seconds per GB on this machine (page cache warm), from which 34 GB's cost follows.
``--quick``: 64 MB, 3 rounds (seconds). Full: 1,024 MB, 3 rounds.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from common import cpu_seconds, emit, parser


def settle(files: list[Path], settled_ns: int) -> None:
    newest = max(f.stat().st_ctime_ns for f in files)
    time.sleep(max(0.0, (newest + settled_ns - time.time_ns()) / 1e9 + 0.05))


def touch(files: list[Path]) -> None:
    """Move each file's change time (its modification time kept): no remembered digest applies."""
    for f in files:
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))


def one_run(store, art, files: list[Path], every_check_reads: bool) -> tuple[int, float]:
    """(bytes hashed, CPU s) of pretraining's three checks of ``art``."""
    from kolectra.core import filehash
    from kolectra.core.stage import StageOutput
    from kolectra.model import shard_guard
    from kolectra.pipeline.store.request import Request

    hashes = {e["path"]: e["sha256"] for e in art.manifest["files"]}
    between = (lambda: touch(files)) if every_check_reads else (lambda: None)
    touch(files)  # both arms start alike: nothing remembered, every file settled
    settle(files, filehash.SETTLED_NS)
    read0, cpu0 = filehash.hashed()["bytes"], cpu_seconds()

    def produce(out: Path) -> StageOutput:
        between()
        for f in files:
            shard_guard.pin(f, hashes[f.relative_to(art.path).as_posix()])
        (out / "metrics.json").write_text("{}")
        return StageOutput(stats={})

    store.require(art, "examples")
    between()
    req = Request(kind="eval", name="checks", stage_version=1, config={"t": time.time_ns()}, parents=(art,))
    store.build(req, produce)
    return filehash.hashed()["bytes"] - read0, cpu_seconds() - cpu0


def sha256_cpu_per_gb(path: Path) -> float:
    from kolectra.core import filehash

    touch([path])  # a young file: read again
    c0 = cpu_seconds()
    filehash.sha256(path)
    return (cpu_seconds() - c0) / (path.stat().st_size / 1e9)


def main() -> None:
    p = parser(__doc__, "about a minute")
    p.add_argument("--mb", type=int, default=None, help="the examples' size (default: 64 quick, 1024 full)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    mb = args.mb or (64 if args.quick else 1024)

    from kolectra.core import verbosity
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store.artifacts import Store
    from kolectra.pipeline.store.request import Request

    verbosity.set_level(verbosity.QUIET)  # -q: the store's "reusing" lines are not the benchmark's output
    with tempfile.TemporaryDirectory(prefix="kolectra-hash-once-") as tmp:
        store = Store(Path(tmp) / "root")

        def shards(out: Path) -> StageOutput:
            (out / "data").mkdir()
            for i in range(max(1, mb // 16)):
                (out / "data" / f"shard-{i:05d}.bin").write_bytes(os.urandom(min(mb, 16) << 20))
            return StageOutput(stats={})

        art = store.build(Request(kind="examples", name="random", stage_version=1, config={"mb": mb}), shards)
        files = sorted((art.path / "data").iterdir())
        size = sum(e["bytes"] for e in art.manifest["files"])
        runs: dict[bool, list[tuple[int, float]]] = {False: [], True: []}
        for _ in range(args.rounds):
            for every in (True, False):
                runs[every].append(one_run(store, art, files, every))
        per_gb = sha256_cpu_per_gb(files[0])
    read = {k: statistics.median(r[0] for r in v) / size for k, v in runs.items()}
    cpu = {k: statistics.median(r[1] for r in v) for k, v in runs.items()}
    emit("hash_once", "bytes hashed a run / the examples' bytes (lower is better)", round(read[False], 4),
         "every check reads every file (before core/filehash.py)", round(read[True], 4),
         {"mb": mb, "rounds": args.rounds, "quick": args.quick},
         cpu_s_checks=cpu[False], cpu_s_checks_baseline=cpu[True], sha256_cpu_s_per_gb=round(per_gb, 3),
         cpu_s_at_34_gb={"now": round(read[False] * 34 * per_gb, 1), "before": round(read[True] * 34 * per_gb, 1)},
         note="ratio = value / baseline: lower is better here")


if __name__ == "__main__":
    main()
