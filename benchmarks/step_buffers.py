"""What the corpus job's chunking steps hold while they wait to send, as the input grows, at the
key counts of a large corpus.

Three steps gather documents into chunks per key before a shuffle (``corpus/steps.py``):
``ReadAndClean`` (a file's survivors per dedup bucket), ``IdBuckets`` (kept ids per id bucket, a
bundle's worth) and ``AnalyseAndPlace`` (analysed JSON lines per shard, a bundle's worth). A
chunk goes out when full; the rest wait for the end of the file or bundle. Their keys grow with
the corpus: ``dedup_buckets`` gives 8,192 buckets at 32 GB of input (more beyond), and ``num_shards`` follows
the input (KoELECTRA's 34 GB: about 620 a split). A Beam bundle can hold a whole work item, and
a user's file can be gigabytes: so what waits is measured for one file, or one bundle, of the
first 1, 2 and 4 NSMC review files, at those key counts (8,192 buckets, 620 shards).

Each step runs in process, as a runner calls it (``setup``, ``start_bundle``, ``process`` on
lists of 1,024 documents as the dedup step gives them, ``finish_bundle``), its output consumed
as it comes; the figure is the ``tracemalloc`` peak of Python allocations during the step (Kiwi's
own C++ memory is not in it: ``AnalyseAndPlace``'s analyser is built before). With
``--base-tree DIR`` the same runs are made with another checkout's steps (in a child process
whose ``PYTHONPATH`` links that checkout), side by side.

value: this checkout's largest step peak at the largest size, MB; baseline: the same at
``--base-tree`` (or this checkout's smallest size without one); ratio = value / baseline.

    python benchmarks/step_buffers.py [--quick] [--reviews GLOB | --data DIR] [--sizes 1,2,4]
        [--base-tree DIR] [--steps read,ids,place] [--cpu]

Full: 1, 2 and 4 files, all three steps (Kiwi analyses each size once a tree: about 6 CPU s a MB
of text); ``--quick``: the first 20,000 and 40,000 reviews of the first file.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path

from common import add_data_args, child_result, cpu_seconds, emit, namespace_of, parser, require_data

WHO = "step_buffers"
BUCKETS = 8192  # corpus/build.py's dedup_buckets at 32 GB of uncompressed input
SHARDS = 620  # num_shards a split for 34 GB of plain text (docs/scale.md, the 34 GB case)
STEPS = ("read", "ids", "place")


def write_input(files: list[str], limit: int | None, out: Path) -> int:
    """One JSONL file of the reviews of ``files`` (the first ``limit``): lines written."""
    n = 0
    with out.open("w", encoding="utf-8") as sink:
        for path in files:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                for line in f:
                    if limit is not None and n >= limit:
                        return n
                    sink.write(line)
                    n += 1
    return n


def _docs(path: Path, batch: int = 1024):
    """Lists of (key, document) as the dedup step hands them on, read as they are needed."""
    from kolectra.corpus import outputs

    chunk = []
    with path.open(encoding="utf-8") as f:
        for line, row in enumerate(f, 1):
            text = (json.loads(row).get("text") or "").strip()
            if text:
                chunk.append((outputs.text_key(text), {"source": "reviews", "line": line, "id": f"r{line}", "text": text}))
            if len(chunk) == batch:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def child(step: str, path: Path, trace: bool = True) -> dict:
    """Run one step over the input in this process: its tracemalloc peak and CPU seconds (without
    ``trace``, CPU seconds alone: tracing makes every allocation dearer, zlib's state among them)."""
    import dataclasses

    from kolectra.corpus import inputs, steps
    from kolectra.corpus.config import default_config

    cfg = dataclasses.replace(default_config(), num_shards=SHARDS)
    if step == "read":
        [listed] = inputs.list_inputs([str(path)])
        dofn = steps.ReadAndClean(cfg, BUCKETS, None)
        calls = [(0, [(listed, "reviews")])]
    elif step == "ids":
        dofn, calls = steps.IdBuckets(BUCKETS), _docs(path)
    else:
        dofn, calls = steps.AnalyseAndPlace(cfg, None, 1), _docs(path)
    dofn.setup()
    t0 = cpu_seconds()
    if trace:
        tracemalloc.start()
    out = 0
    if hasattr(dofn, "start_bundle"):
        dofn.start_bundle()
    for call in calls:
        for _ in dofn.process(call):
            out += 1
    for _ in getattr(dofn, "finish_bundle", lambda: ())() or ():
        out += 1
    seconds = cpu_seconds() - t0
    peak = tracemalloc.get_traced_memory()[1] if trace else None
    tracemalloc.stop()
    return {"peak_mb": peak and round(peak / 1e6, 1), "cpu_s": round(seconds, 1), "outputs": out}


def measure(step: str, path: Path, pythonpath: str | None, trace: bool = True) -> dict:
    return child_result(__file__, ["--child" if trace else "--child-cpu", step, str(path)], pythonpath, WHO)


def main(argv: list[str] | None = None) -> dict:
    if argv is None and len(sys.argv) == 4 and sys.argv[1] in ("--child", "--child-cpu"):
        print(json.dumps(child(sys.argv[2], Path(sys.argv[3]), sys.argv[1] == "--child")))
        return {}
    ap = parser(__doc__, "about 20 CPU minutes with --base-tree")
    add_data_args(ap, "reviews")
    ap.add_argument("--sizes", default=None, help="review files per run, comma-separated (default 1,2,4)")
    ap.add_argument("--steps", default=",".join(STEPS), help="which steps: read, ids, place")
    ap.add_argument("--base-tree", type=Path, help="another kolectra checkout to measure beside this one")
    ap.add_argument("--cpu", action="store_true", help="also each step's CPU seconds without tracemalloc")
    args = ap.parse_args(argv)
    import glob

    files = sorted(glob.glob(require_data(args, "reviews", WHO)))
    chosen = [s for s in args.steps.split(",") if s]
    if not files or any(s not in STEPS for s in chosen):
        sys.exit(f"{WHO}: need review files and steps among {', '.join(STEPS)}")
    sizes = [(1, 20_000), (1, 40_000)] if args.quick else [(int(n), None) for n in (args.sizes or "1,2,4").split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="step-buffers-") as tmp:
        tmp = Path(tmp)
        sides = {"this": None}
        if args.base_tree:
            sides["base"] = namespace_of(args.base_tree, tmp / "base-path")
        for n_files, limit in sizes:
            path = tmp / f"reviews-{n_files}-{limit}.jsonl"
            lines = write_input(files[:n_files], limit, path)
            for step in chosen:
                for side, pythonpath in sides.items():
                    got = measure(step, path, pythonpath)
                    if args.cpu:  # CPU seconds again without tracing, the two sides in the other order
                        got["cpu_s_untraced"] = None
                    rows.append({"step": step, "side": side, "lines": lines, **got})
                if args.cpu:
                    for row in reversed(rows[-len(sides):]):
                        row["cpu_s_untraced"] = measure(step, path, sides[row["side"]], trace=False)["cpu_s"]
                for row in rows[-len(sides):]:
                    print(f"{WHO}: {row}", file=sys.stderr)
    mine = [r for r in rows if r["side"] == "this"]
    value = max(r["peak_mb"] for r in mine if r["lines"] == mine[-1]["lines"])
    if args.base_tree:
        base = max(r["peak_mb"] for r in rows if r["side"] == "base" and r["lines"] == mine[-1]["lines"])
        base_name = f"--base-tree {args.base_tree}"
    else:
        base = max(r["peak_mb"] for r in mine if r["lines"] == mine[0]["lines"])
        base_name = "this checkout at the smallest size"
    return emit(WHO, "MB of Python allocations a step holds (tracemalloc peak), largest step, largest size",
                value, base_name, base, {"buckets": BUCKETS, "shards": SHARDS, "sizes": sizes, "steps": chosen},
                runs=rows)


if __name__ == "__main__":
    main()
