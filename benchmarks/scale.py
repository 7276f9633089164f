"""Benchmark of how the corpus and examples stages scale: CPU seconds per MB of text and peak
memory at 1, 2, 4 and 8 NSMC review shards (1 and 2 with ``--quick``), the launcher's side and
the worker's side apart, with straight lines fitted through them (issue 41).

Each size runs in fresh processes (``--child``), for this checkout and, with ``--base-tree DIR``,
for another checkout of kolectra (``git worktree add /tmp/base <commit>``: imported through a
``kolectra`` namespace of links to its folders, put first on ``PYTHONPATH``), interleaved size by
size so the machine's load falls on both alike:

- ``corpus``: ``corpus.build.build`` on the first N review files, ``--preset`` default or
  production (near-dup on: its Beam stages and shuffles are in the job's peak), one in-process
  worker (``--direct_num_workers=1``): CPU seconds of the process and its peak RSS
  (``ru_maxrss``). With the local runner the launcher, the runner's shuffles and the worker are
  one process: this is the local runner's peak, what ``corpus/runners.py`` estimates before a job.
- ``examples``: ``corpus.examples.build`` on that corpus (its train split) with a WordPiece
  vocab trained here once on the first file (as ``benchmarks/examples.py`` does), the same way.
- worker side, per-step probes: the per-group steps a distributed runner gives one worker at a
  time, on that run's largest group. ``corpus_group``: ``outputs.write_shard`` on the largest
  output shard's documents, handed over lazily (as a distributed runner's grouped values are),
  in reverse order (the step must sort). ``examples_group``: ``examples_beam.write_shard`` on the
  largest corpus shard's sequence blocks (made by the real ``TokenizeAndPack`` before the probe
  starts). Reported: the group's size (its JSON lines, or its tokens) and the step's peak
  Python-allocated memory (``tracemalloc``, numpy's arrays included) above what it was handed.

This checkout's corpus runs with ``--set shard_bytes`` = ``--shard-mb`` (16 MB by default, so the
shard count follows the input over 1-8 review files, as 128-256 MB shards would over a corpus of
many GB); the base checkout with its own defaults.

Slopes are least-squares lines ``a + b * MB`` through the sizes. value: MB of text of the largest
size per MB of the corpus shard writer's peak (worker side; higher is better); baseline: the same
for ``--base-tree`` (or this checkout's figure when none is given).

    python benchmarks/scale.py [--quick] [--preset production] [--reviews GLOB | --data DIR] [--base-tree /tmp/base]

Full: 1, 2, 4, 8 of the 8 files (57.6 MB of text), about 30 CPU minutes a checkout; ``--quick``:
1 and 2 files, about 6 CPU minutes a checkout (Kiwi's analysis is most of it; 25 minutes of wall
time for one checkout on the shared 2-core machine). Figures: docs/scale.md.
"""

from __future__ import annotations

import glob
import gzip
import json
import resource
import sys
import tempfile
import tracemalloc
from pathlib import Path

from common import REPO, add_data_args, child_result, emit, namespace_of, parser, require_data

WHO = "benchmarks/scale.py"
STAGES = ("corpus", "examples", "corpus_group", "examples_group")


# ---------------------------------------------------------------- children (one measurement each)


def _usage() -> dict:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
            "peak_rss_mb": max(me.ru_maxrss, kids.ru_maxrss) / 1024}


def child_corpus(files: list[str], out: Path, shard_mb: float, preset: str = "default") -> dict:
    import dataclasses

    from kolectra.corpus import build
    from kolectra.corpus import config as corpus_config

    cfg = getattr(corpus_config, f"{preset}_config")()
    if hasattr(cfg, "shard_bytes"):  # this checkout: shards of a fixed size; the base: its constant
        cfg = dataclasses.replace(cfg, shard_bytes=int(shard_mb * (1 << 20)))
    before = _usage()
    result = build.build(cfg, files, out, ["--direct_num_workers=1"])
    after = _usage()
    return {"cpu_s": after["cpu_s"] - before["cpu_s"], "peak_rss_mb": after["peak_rss_mb"],
            "num_shards": result.stats["num_shards"], "documents": result.stats["records_out"]}


def child_examples(corpus: Path, vocab: Path, out: Path) -> dict:
    from kolectra.corpus import examples
    from kolectra.corpus.examples_config import ExamplesConfig

    before = _usage()
    result = examples.build(ExamplesConfig(allow_other_corpus_vocab=True), corpus, vocab, out, ["--direct_num_workers=1"])
    after = _usage()
    return {"cpu_s": after["cpu_s"] - before["cpu_s"], "peak_rss_mb": after["peak_rss_mb"],
            "tokens": result.stats["tokens"]}


def _largest_shard(corpus: Path) -> tuple[int, Path, int]:
    """(index, path, uncompressed bytes) of the largest train shard."""
    from kolectra.corpus.shards import shard_paths

    sizes = []
    for i, path in enumerate(shard_paths(corpus, "train")):
        with gzip.open(path, "rb") as f:
            sizes.append((sum(len(b) for b in iter(lambda: f.read(1 << 20), b"")), i, path))
    size, i, path = max(sizes)
    return i, path, size


def child_corpus_group(corpus: Path, out: Path) -> dict:
    """The largest shard's documents as the shard writer's group: chunks of 512 (position, line),
    made lazily, positions descending (the writer sorts them ascending)."""
    from kolectra.corpus import outputs

    _, path, size = _largest_shard(corpus)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        n = sum(1 for _ in f)
    num_shards = len(list((corpus / "data").glob("train-*")))
    # the chunks as the job hands them to the writer: packed since the shard shuffle carries them
    # compressed; a --base-tree from before that takes them as lists
    pack = getattr(outputs, "pack_chunk", lambda chunk: chunk)

    def chunks():
        with gzip.open(path, "rt", encoding="utf-8") as f:
            chunk = []
            for i, line in enumerate(f):
                chunk.append((("s", n - i), line.rstrip("\n")))
                if len(chunk) == 512:
                    yield pack(chunk)
                    chunk = []
            if chunk:
                yield pack(chunk)

    tracemalloc.start()
    outputs.write_shard((("train", 0), chunks()), str(out), num_shards)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"group_mb": size / 1e6, "step_peak_mb": peak / 1e6, "documents": n}


def child_examples_group(corpus: Path, vocab: Path, out: Path) -> dict:
    import numpy as np

    from kolectra.corpus import examples_beam
    from kolectra.corpus.examples import load_tokenizer
    from kolectra.corpus.examples_config import ExamplesConfig
    from kolectra.corpus.packing import ids_dtype

    shard, path, _ = _largest_shard(corpus)
    tok = load_tokenizer(vocab)
    job = examples_beam.Job(cfg=ExamplesConfig(allow_other_corpus_vocab=True), tokenizer_path=str(vocab / "tokenizer.json"),
                            dtype=ids_dtype(tok.get_vocab_size()).name, vocab_size=tok.get_vocab_size(), out_dir=str(out))
    fn = examples_beam.TokenizeAndPack(job)
    fn.setup()
    blocks = [v for v in fn.process((0, [(shard, str(path), 0, 1)])) if isinstance(v, tuple)]
    tokens = int(sum(len(b[1].tokens_T) for _, b in blocks))
    tracemalloc.start()
    reports = list(examples_beam.write_shard((shard, [b for _, b in blocks]), job))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows = sum(r[2] for r in reports if r[:2] == ("tally", "examples"))
    return {"group_tokens": tokens, "group_mb": tokens * np.dtype(job.dtype).itemsize / 1e6, "rows": rows,
            "step_peak_mb": peak / 1e6}


def run_child(argv: list[str]) -> None:
    what, rest = argv[0], argv[1:]
    if what == "corpus":
        out = child_corpus(rest[3:], Path(rest[0]), float(rest[1]), rest[2])
    elif what == "examples":
        out = child_examples(Path(rest[0]), Path(rest[1]), Path(rest[2]))
    elif what == "corpus_group":
        out = child_corpus_group(Path(rest[0]), Path(rest[1]))
    else:
        out = child_examples_group(Path(rest[0]), Path(rest[1]), Path(rest[2]))
    print(json.dumps(out))


# ---------------------------------------------------------------- the launcher


def measure(what: str, args: list[str], pythonpath: str | None) -> dict:
    return child_result(__file__, ["--child", what, *args], pythonpath, WHO)


def text_mb(path: str) -> float:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return sum(len(json.loads(line).get("text", "").encode("utf-8")) for line in f) / 1e6


def fit(xs: list[float], ys: list[float]) -> dict:
    """Least-squares ``a + b x`` (b = 0 with one point)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    return {"intercept": round(my - b * mx, 3), "per_mb": round(b, 4)}


def train_vocab(first: str, where: Path) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from examples import train_vocab as train  # noqa: PLC0415 - the examples benchmark's own vocab

    docs = []
    with gzip.open(first, "rt", encoding="utf-8") as f:
        for line in f:
            docs.append(("", json.loads(line).get("text", "")))
    return train(docs, where)


def main() -> None:
    p = parser(__doc__, "1-8 review files, about 30 CPU minutes a checkout")
    add_data_args(p, "reviews")
    p.add_argument("--base-tree", type=Path, help="another kolectra checkout to measure beside this one")
    p.add_argument("--shard-mb", type=float, default=16.0, help="this checkout's corpus shard_bytes, in MB")
    p.add_argument("--preset", choices=("default", "production"), default="default",
                   help="the corpus job's preset (production: near-dup and web-text cleaning on)")
    p.add_argument("--sizes", default=None, help="review files per run, comma-separated (default 1,2,4,8; --quick 1,2)")
    args = p.parse_args()
    files = sorted(glob.glob(require_data(args, "reviews", WHO)))
    sizes = [int(s) for s in (args.sizes or ("1,2" if args.quick else "1,2,4,8")).split(",")]
    if max(sizes) > len(files):
        sys.exit(f"{WHO}: {max(sizes)} files asked for, {len(files)} given")
    mb = [text_mb(f) for f in files[:max(sizes)]]
    with tempfile.TemporaryDirectory(prefix="kolectra-scale-") as tmp:
        tmp = Path(tmp)
        vocab = train_vocab(files[0], tmp / "vocab")
        sides = {"this": None}
        if args.base_tree:
            sides["base"] = namespace_of(args.base_tree, tmp / "base-path")
        rows: dict[str, list[dict]] = {side: [] for side in sides}
        for n in sizes:
            for side, path in sides.items():
                corpus = tmp / f"{side}-corpus-{n}"
                row = {"files": n, "text_mb": round(sum(mb[:n]), 2)}
                row["corpus"] = measure("corpus", [str(corpus), str(args.shard_mb), args.preset, *files[:n]], path)
                row["examples"] = measure("examples", [str(corpus), str(vocab), str(tmp / f"{side}-ex-{n}")], path)
                row["corpus_group"] = measure("corpus_group", [str(corpus), str(tmp / f"{side}-g-{n}")], path)
                row["examples_group"] = measure("examples_group", [str(corpus), str(vocab), str(tmp / f"{side}-eg-{n}")], path)
                for stage in ("corpus", "examples"):
                    row[stage]["cpu_s_per_mb"] = round(row[stage]["cpu_s"] / row["text_mb"], 3)
                rows[side].append(row)
                print(f"{WHO}: {side} {n} file(s): " + json.dumps(row), file=sys.stderr)
    summary = {}
    for side, table in rows.items():
        xs = [r["text_mb"] for r in table]
        summary[side] = {
            "cpu_s": {s: fit(xs, [r[s]["cpu_s"] for r in table]) for s in ("corpus", "examples")},
            "launcher_peak_rss_mb": {s: fit(xs, [r[s]["peak_rss_mb"] for r in table]) for s in ("corpus", "examples")},
            "worker_step_peak_mb": {s: fit(xs, [r[s]["step_peak_mb"] for r in table]) for s in ("corpus_group", "examples_group")},
            "largest_group_mb": {s: fit(xs, [r[s]["group_mb"] for r in table]) for s in ("corpus_group", "examples_group")},
        }

    def efficiency(side: str) -> float:
        last = rows[side][-1]
        return round(last["text_mb"] / max(last["corpus_group"]["step_peak_mb"], 1e-6), 3)

    base = "base" if "base" in rows else "this"
    emit("scale", "MB of text per MB of the corpus shard writer's peak (worker side, largest size)",
         efficiency("this"), f"{base}: {args.base_tree or 'this checkout'}", efficiency(base),
         {"sizes": sizes, "shard_mb": args.shard_mb, "preset": args.preset, "rows": rows, "fits": summary})


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        run_child(sys.argv[2:])
    else:
        main()
