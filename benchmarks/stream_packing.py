"""What the examples job's ``packing=stream`` holds for one corpus shard, as the shard grows.

With ``packing=stream`` the documents of a corpus shard are cut into sequences as one stream, so the
step after the shuffle (``corpus/examples_beam.py``'s ``shard_rows``) gets every tokenised document
of the shard at once. A shard is about ``shard_bytes`` of JSON (192 MB by default), so what it holds
per token sets a worker's memory. Measured here on made-up documents (seeded: 1-6 sentences of 3-40
ids below 8,000, about 75 tokens a document, uint16 ids), built 4,096 at a time as the tokenising
step sends them (``stream_block``), then ``shard_rows``: the ``tracemalloc`` peak of the whole
(the blocks included) and bytes a token, the CPU seconds of making the blocks and cutting
the shard (a run without tracing), and a digest of the rows' sequences, which
must match between the sides. With ``--base-tree DIR`` the same runs use another checkout's code (in a
child process whose ``PYTHONPATH`` links that checkout), side by side.

value: this checkout's bytes a token at the largest size; baseline: the same at ``--base-tree`` (or
at this checkout's smallest size without one); ratio = value / baseline.

    python benchmarks/stream_packing.py [--quick] [--sizes 10000,40000,160000] [--base-tree DIR]

Full: 10,000, 40,000 and 160,000 documents (about 12 million tokens at the largest); ``--quick``:
10,000 and 40,000.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path

from common import child_result, cpu_seconds, emit, namespace_of, parser

WHO = "stream_packing"
BATCH = 4096  # documents a tokenising work item sends (ExamplesConfig.batch_documents)


def documents(n: int, seed: int = 0):
    """``n`` made-up documents ``(line, sentences' ids)``, in batches of :data:`BATCH`, lines shuffled."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lines = rng.permutation(n)
    for first in range(0, n, BATCH):
        batch = []
        for line in lines[first:first + BATCH]:
            sents = [rng.integers(5, 8000, int(rng.integers(3, 41))).tolist() for _ in range(int(rng.integers(1, 7)))]
            batch.append((int(line), sents))
        yield batch


def child(n: int) -> dict:
    """One side, one size: the blocks made and ``shard_rows`` run under tracemalloc."""
    import numpy as np

    from kolectra.corpus import examples_beam
    from kolectra.corpus.examples_config import ExamplesConfig

    job = examples_beam.Job(ExamplesConfig(packing="stream"), "", "uint16", 8000, "")
    make = getattr(examples_beam, "stream_block", None)  # this checkout's form; else the lists it replaced

    def run() -> tuple[float, tuple]:
        """CPU seconds of making the blocks and cutting the shard (not of making up the documents)."""
        cpu, blocks = 0.0, []
        for batch in documents(n):
            c0 = cpu_seconds()
            blocks.append(("documents", make(batch, np.dtype(np.uint16)) if make else batch))
            cpu += cpu_seconds() - c0
        c0 = cpu_seconds()
        out = examples_beam.shard_rows(0, blocks, job)
        return cpu + cpu_seconds() - c0, out

    cpu = run()[0]  # untraced: tracing makes every allocation dear
    tracemalloc.start()
    _, (seqs, place, truncated) = run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    digest = hashlib.sha256()
    for column in (seqs.a_U, seqs.b_U, seqs.tokens_T, place.row_U):
        digest.update(np.ascontiguousarray(column).tobytes())
    tokens = int(seqs.tokens_T.size)
    return {"documents": n, "tokens": tokens, "sequences": len(seqs), "truncated": truncated,
            "peak_mb": round(peak / 1e6, 1), "bytes_per_token": round(peak / tokens, 1), "cpu_s": round(cpu, 2),
            "digest": digest.hexdigest()[:16]}


def main(argv: list[str] | None = None) -> dict:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child(int(sys.argv[2]))))
        return {}
    ap = parser(__doc__, "about 5 CPU minutes with --base-tree")
    ap.add_argument("--sizes", default=None, help="documents per shard, comma-separated (default 10000,40000,160000)")
    ap.add_argument("--base-tree", type=Path, help="another kolectra checkout to measure beside this one")
    args = ap.parse_args(argv)
    sizes = [10_000, 40_000] if args.quick else [int(n) for n in (args.sizes or "10000,40000,160000").split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="stream-packing-") as tmp:
        sides = {"this": None}
        if args.base_tree:
            sides["base"] = namespace_of(args.base_tree, Path(tmp) / "base-path")
        for n in sizes:
            for side, pythonpath in sides.items():
                rows.append({"side": side, **child_result(__file__, ["--child", str(n)], pythonpath, WHO)})
                print(f"{WHO}: {rows[-1]}", file=sys.stderr)
            if args.base_tree and len({r["digest"] for r in rows[-2:]}) != 1:
                sys.exit(f"{WHO}: the two sides cut different sequences at {n} documents")
    mine = [r for r in rows if r["side"] == "this"]
    value = mine[-1]["bytes_per_token"]
    if args.base_tree:
        baseline_name, baseline = "base tree, same size", [r for r in rows if r["side"] == "base"][-1]["bytes_per_token"]
    else:
        baseline_name, baseline = f"this checkout at {sizes[0]} documents", mine[0]["bytes_per_token"]
    return emit(WHO, "bytes a token (tracemalloc peak)", value, baseline_name, baseline,
                {"sizes": sizes, "batch_documents": BATCH, "dtype": "uint16"}, rows=rows)


if __name__ == "__main__":
    main()
