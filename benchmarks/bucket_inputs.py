"""Benchmark: what listing corpus inputs in a bucket costs the launcher, per input file.

    python benchmarks/bucket_inputs.py [--quick] [--sizes 5000,20000] [--base-tree DIR] [--base-max N]
                                       [--run-bytes N]

``kolectra corpus --input 's3://bucket/crawl/*.jsonl.gz'`` lists the matching objects before the
job and identifies each (size and ETag: ``corpus/inputs.py``). Before, fsspec's glob answered with
one dict of every match and each object was then asked for again, a HEAD per file; now the
listing is read a page (1,000 keys) at a time and identifies each object itself
(``core/store_glob.py``). This runs moto's S3 server in this process (its thread; objects put
through its backend, so a bucket of tens of thousands of objects is made in seconds) and, for
each size, a fresh client process per side that lists ``s3://bench/nN/part-*.jsonl.gz`` as
``corpus.inputs.list_inputs`` does:

- ``requests``: the requests the client made (botocore's ``before-call`` events), by operation;
- ``cpu_s``: the client's CPU seconds (the server's are not counted); ``wall_s`` on moto, which
  answers a page in O(objects) time (0.6 s a page at 20,000 keys): a real bucket's figure is the
  requests times its latency;
- ``peak_mb``: tracemalloc's peak while listing (a second pass), ``rss_mb``: the process's peak RSS
  after the first (Beam's and botocore's imports are most of it);
- ``digest``: SHA-256 of the identities in order: the same on both sides.

``--base-tree DIR`` (a checkout of the commit before, e.g. ``git worktree add /tmp/base 3997180``)
runs the same in that tree, at the sizes up to ``--base-max`` (a HEAD a file is slow: 12.6 ms each on
moto). ``--run-bytes``: the launcher's name-sort run (``corpus.inputs.NAME_RUN_BYTES``, 16 MiB) set
smaller on this side, to see the peak level off at sizes moto can list. ``value``: requests a file
now, at the largest size both sides ran; ``baseline``: before.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

from common import child_result, emit, moto_in_process, namespace_of, parser

WHO = "benchmarks/bucket_inputs.py"
BUCKET = "bench"


def child(n: int, run_bytes: int | None) -> None:
    from kolectra.core import storage
    from kolectra.corpus import inputs

    if run_bytes:
        inputs.NAME_RUN_BYTES = run_bytes
    pattern = f"s3://{BUCKET}/n{n}/part-*.jsonl.gz"
    fs, _ = storage.filesystem(pattern)
    fs.connect()
    sent: Counter = Counter()
    fs.s3.meta.events.register("before-call.s3", lambda model, **_: sent.update([model.name]))
    t0, c0 = time.perf_counter(), time.process_time()
    listed = inputs.list_inputs([pattern])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    digest = hashlib.sha256("\n".join(f.identity for f in listed).encode()).hexdigest()
    count, requests = len(listed), dict(sent)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before tracemalloc's own tables
    del listed
    tracemalloc.start()
    sum(1 for _ in inputs.iter_inputs([pattern]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"files": count, "requests": requests, "requests_per_file": round(sum(requests.values()) / count, 4),
                      "cpu_s": round(cpu, 2), "wall_s_on_moto": round(wall, 1), "peak_mb": round(peak / 1e6, 2),
                      "rss_mb": round(rss_mb, 1), "digest": digest}))


def serve_and_fill(sizes: list[int]):
    """moto's server in a thread of this process, with ``sizes[i]`` objects under ``n<size>/``."""
    server, backend = moto_in_process(BUCKET)
    for n in sizes:
        for i in range(n):  # a distinct body each: distinct ETags, as real files have
            backend.put_object(BUCKET, f"n{n}/part-{i:07d}-of-{n:07d}.jsonl.gz", f"{n}:{i}\n".encode())
    return server


def main() -> None:
    p = parser(__doc__, "about 10 minutes on 2 cores, most of it moto answering pages and the base side's HEADs")
    p.add_argument("--sizes", help="comma-separated object counts (default 5000,20000,50000; --quick 2000,10000)")
    p.add_argument("--base-tree", type=Path, help="a checkout of the commit before, run beside this one")
    p.add_argument("--base-max", type=int, default=10_000, help="the largest size the base side runs (default 10,000)")
    p.add_argument("--run-bytes", type=int, help="this side's name-sort run in bytes (default: the launcher's 16 MiB)")
    p.add_argument("--child", nargs=2, metavar=("N", "RUN_BYTES"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(int(args.child[0]), int(args.child[1]) or None)
        return
    sizes = [int(s) for s in (args.sizes or ("2000,10000" if args.quick else "5000,20000,50000")).split(",")]
    server = serve_and_fill(sizes)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sides = {"now": None}
            if args.base_tree:
                sides["base"] = namespace_of(args.base_tree, Path(tmp) / "base-path")
            for n in sizes:
                for side, pythonpath in sides.items():
                    if side == "base" and n > args.base_max:
                        continue
                    run_bytes = args.run_bytes if side == "now" and args.run_bytes else 0
                    rows.append({"side": side, "size": n, **child_result(__file__, ["--child", str(n), str(run_bytes)],
                                                                         pythonpath, WHO)})
                    print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        server.stop()
    both = [n for n in sizes if {r["side"] for r in rows if r["size"] == n} == set(sides)]
    at = max(both) if both else max(sizes)
    now = next(r for r in rows if r["side"] == "now" and r["size"] == at)
    base = next((r for r in rows if r["side"] == "base" and r["size"] == at), None)
    same = None if base is None else base["digest"] == now["digest"]
    emit("bucket_inputs", "requests per input file", now["requests_per_file"], "HEAD per file (fsspec glob, then info)",
         base["requests_per_file"] if base else None, {"sizes": sizes, "base_max": args.base_max,
                                                       "run_bytes": args.run_bytes}, rows=rows, same_identities=same)


if __name__ == "__main__":
    main()
