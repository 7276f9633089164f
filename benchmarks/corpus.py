"""Corpus-stage throughput against raw Kiwi: MB/s of text through ``kolectra corpus`` (the whole
Beam pipeline: read, clean, filter, dedup, Kiwi, shard, write; start-up included) with 1 and 2
worker processes, against a bare ``Kiwi.split_into_sents(text, return_tokens=True)`` loop over
the same texts in the same process (one thread).

Both sides start cold: the raw loop builds its Kiwi (about 1 s) and pays Kiwi's first analysis
(about 1.6 s: kiwipiepy 0.24's CoNg model initialises lazily) inside its timing, as the pipeline
does in its worker. ``baseline_warm`` is the same loop on a loaded, warmed-up Kiwi, and
``steady_state_ratio`` compares the pipeline without its fixed cost against it: the two sides
with no one-off costs at all.

The machine may be shared, so the measurements are interleaved - raw Kiwi, pipeline x1,
pipeline x2, raw Kiwi again - and the baseline is the mean of the two raw runs. Besides wall
time, CPU seconds are reported (this process plus its worker processes), which load from other
jobs disturbs much less: ``cpu_ratio`` = raw Kiwi CPU / pipeline CPU for the same text, and
``speedup_2_workers_cpu_bound`` = 2 x CPU(1 worker) / CPU(2 workers), the speedup two idle cores
would give (the second worker's start-up, Kiwi load and data transfer are its cost).

Fixed costs, from the same job on 50 lines with 1 and with 2 workers (``fixed_cost_cpu_s``): one
worker runs inside this process (Beam's graph and runner, a Kiwi load and Kiwi's first
analysis); two are worker processes, each starting Python, importing Beam (pandas with it) and
loading its own Kiwi. ``speedup_2_workers_cpu_bound_steady`` is the CPU-bound speedup without
them: 2 x (CPU(1) - fixed(1)) / (CPU(2) - fixed(2)), what is left being the data that crosses
between processes (every shuffled element goes through the launcher) and the workers' own Beam
work.

A third pipeline run is the local default on 2 cores: one in-process worker whose Kiwi analyses
on a pool of 2 threads (``--analysis_threads 2``; the other runs pass 1). ``speedup_2_threads``
is its wall-clock speedup over the 1-thread worker: no second process to start, one Kiwi to load.

value: pipeline MB/s with 1 worker, Kiwi on 1 thread; baseline: raw Kiwi MB/s (1 thread); ratio =
value / baseline (the share of Kiwi's own speed the pipeline keeps, per worker).
``config.speedup_2_workers`` is pipeline(2 worker processes) / pipeline(1 worker).

Full size: the whole NSMC review corpus (``--reviews GLOB`` or ``--data DIR``: 8 files, 662,404
reviews, 57.6 MB of text; ``--files N`` for the first N), about 30 minutes on 2 cores (the raw
loop runs four times and the pipeline twice). ``--quick``: the first 20,000 reviews of
``--reviews``/``--data`` (one JSONL file written to a temporary folder; about 3 minutes on a
shared machine), else the embedded ``pipeline/sample/reviews.jsonl.gz`` (4,000 reviews, 0.34 MB
of text).
Usage: ``python benchmarks/corpus.py [--quick] [--reviews GLOB | --data DIR] [--files N] [--input PATH ...]``.
"""

from __future__ import annotations

import gzip
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import add_data_args, cpu_seconds, data_path, emit, parser, require_data

from kolectra.core.stage import progress

# kolectra.corpus (Beam, Kiwi) is imported where it is used: a run without its data stops with its
# one-line message before paying the imports (tests/test_cli_surface.py)

REPO = Path(__file__).resolve().parents[1]
QUICK_INPUT = REPO / "pipeline" / "sample" / "reviews.jsonl.gz"
QUICK_REVIEWS = 20_000  # --quick with --reviews/--data: the first this many, as vocab.py and examples.py
WHO = "benchmarks/corpus.py"


def rss_mb() -> float:
    """Resident memory of this process now (Linux /proc), in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def load_texts(files: list[str]) -> list[str]:
    from kolectra.corpus import reader
    from kolectra.corpus.config import default_config

    cfg = default_config()
    texts = []
    for path in files:
        for rec in reader.read_file(path, path, cfg.format, cfg.text_field, cfg.id_field, cfg.max_line_bytes):
            if "text" in rec:
                texts.append(rec["text"])
    return texts


def raw_kiwi(texts: list[str], kiwi=None) -> tuple[float, float]:
    """(wall, cpu) seconds of one bare Kiwi pass over the normalised texts; without ``kiwi``,
    building one first (cold, as a script or a worker starts)."""
    from kolectra.corpus.segment import Segmenter

    wall, cpu = time.perf_counter(), cpu_seconds()
    if kiwi is None:
        kiwi = Segmenter().kiwi
    for t in texts:
        if t:
            kiwi.split_into_sents(t, return_tokens=True, return_sub_sents=False)
    return time.perf_counter() - wall, cpu_seconds() - cpu


def first_lines(files: list[str], n: int, dest: Path) -> str:
    """The first ``n`` lines of the (gzipped JSONL) review files, as one file ``dest``."""
    with gzip.open(dest, "wt", encoding="utf-8") as out:
        for path in files:
            with gzip.open(path, "rt", encoding="utf-8") as f:
                for line in f:
                    out.write(line)
                    n -= 1
                    if n == 0:
                        return str(dest)
    return str(dest)


def run_pipeline(files: list[str], workers: int, tmp: Path, threads: int = 1) -> tuple[float, float, dict]:
    from kolectra.corpus.build import build
    from kolectra.corpus.config import default_config

    out = tmp / f"out-{workers}x{threads}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = build(default_config(), files, out, [f"--direct_num_workers={workers}", f"--analysis_threads={threads}"])
    return time.perf_counter() - wall, cpu_seconds() - cpu, result.stats


def main(argv: list[str] | None = None) -> dict:
    ap = parser(__doc__, "about 30 minutes on 2 cores")
    add_data_args(ap, "reviews")
    ap.add_argument("--files", type=int, default=None, help="full size: only the first N review files (default: all)")
    ap.add_argument("--input", action="append", default=[],
                    help="any corpus input instead, path or glob (repeatable; e.g. 'raw/*.txt.gz'; default: the reviews)")
    args = ap.parse_args(argv)
    given = None if args.input else data_path(args, "reviews", WHO)
    full = None if args.input or args.quick else require_data(args, "reviews", WHO)  # stops here without data
    from kolectra.corpus import reader
    from kolectra.corpus.segment import Segmenter
    from kolectra.corpus.text import normalize

    sample_dir = tempfile.TemporaryDirectory(prefix="kolectra-bench-corpus-input-")
    if args.input:
        patterns = args.input
    elif args.quick and given:  # the first 20,000 reviews, as the other stages' quick runs
        patterns = [first_lines(reader.expand_inputs([given]), QUICK_REVIEWS, Path(sample_dir.name, "reviews.jsonl.gz"))]
    elif args.quick:  # no data given: the embedded sample
        patterns = [str(QUICK_INPUT)]
    else:
        patterns = [full]
    files = reader.expand_inputs(patterns)[: args.files] if args.files else reader.expand_inputs(patterns)

    texts = load_texts(files)
    text_mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    clean = [normalize(t) for t in texts]
    progress(f"bench corpus: {len(files)} file(s), {len(texts)} records, {text_mb:.2f} MB of text")

    rss0 = rss_mb()
    t0 = time.perf_counter()
    kiwi = Segmenter().kiwi
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    kiwi.split_into_sents(clean[0] or "워밍업", return_tokens=True)
    first_s = time.perf_counter() - t0
    for t in clean[:200]:  # warm-up: Kiwi's first analyses pay one-off costs
        kiwi.split_into_sents(t or "워밍업", return_tokens=True)
    kiwi_rss = rss_mb() - rss0

    with tempfile.TemporaryDirectory(prefix="kolectra-bench-corpus-") as tmp:
        raw_a = raw_kiwi(clean)
        warm_a = raw_kiwi(clean, kiwi)
        progress(f"bench corpus: raw Kiwi {text_mb / raw_a[0]:.3f} MB/s cold, {text_mb / warm_a[0]:.3f} warm")
        one = run_pipeline(files, 1, Path(tmp))
        progress(f"bench corpus: pipeline x1 {text_mb / one[0]:.3f} MB/s")
        two = run_pipeline(files, 2, Path(tmp))
        progress(f"bench corpus: pipeline x2 {text_mb / two[0]:.3f} MB/s")
        threaded = run_pipeline(files, 1, Path(tmp), threads=2)
        progress(f"bench corpus: pipeline x1, Kiwi on 2 threads {text_mb / threaded[0]:.3f} MB/s")
        warm_b = raw_kiwi(clean, kiwi)
        raw_b = raw_kiwi(clean)
        progress(f"bench corpus: raw Kiwi {text_mb / raw_b[0]:.3f} MB/s cold, {text_mb / warm_b[0]:.3f} warm")
        # fixed cost: the same pipeline on a few lines (Beam start-up, Kiwi load, file writing)
        tiny = Path(tmp, "tiny.txt")
        tiny.write_text("\n".join(t for t in texts[:50] if "\n" not in t) + "\n", encoding="utf-8")
        startup = run_pipeline([str(tiny)], 1, Path(tmp, "tiny"))
        startup_2 = run_pipeline([str(tiny)], 2, Path(tmp, "tiny"))
    sample_dir.cleanup()

    raw_wall = (raw_a[0] + raw_b[0]) / 2
    raw_cpu = (raw_a[1] + raw_b[1]) / 2
    warm_wall = (warm_a[0] + warm_b[0]) / 2
    baseline = text_mb / raw_wall
    value = text_mb / one[0]
    steady = text_mb / max(one[0] - startup[0], 1e-9)
    config = {
        "inputs": [str(Path(f).name) for f in files] if len(files) <= 8 else f"{len(files)} files",
        "records": len(texts),
        "documents_out": one[2]["records_out"],
        "text_mb": round(text_mb, 3),
        "quick": args.quick,
        "preset": "default_config",
        "raw_kiwi_wall_s": [round(raw_a[0], 2), round(raw_b[0], 2)],
        "raw_kiwi_cpu_s": round(raw_cpu, 2),
        "baseline_warm": {"wall_s": [round(warm_a[0], 2), round(warm_b[0], 2)], "mb_s": round(text_mb / warm_wall, 4),
                          "ratio": round(value / (text_mb / warm_wall), 3)},
        "pipeline_1_worker": {"wall_s": round(one[0], 2), "cpu_s": round(one[1], 2), "mb_s": round(value, 4)},
        "pipeline_2_workers": {"wall_s": round(two[0], 2), "cpu_s": round(two[1], 2), "mb_s": round(text_mb / two[0], 4)},
        "speedup_2_workers": round(one[0] / two[0], 3),
        # the local default on 2 cores: one in-process worker whose Kiwi analyses on 2 threads
        "pipeline_1_worker_2_threads": {"wall_s": round(threaded[0], 2), "cpu_s": round(threaded[1], 2),
                                        "mb_s": round(text_mb / threaded[0], 4)},
        "speedup_2_threads": round(one[0] / threaded[0], 3),
        # what 2 idle cores would give: the work (CPU seconds) of each run, spread over its workers;
        # wall-clock speedup is only meaningful on a machine nobody else is using
        "speedup_2_workers_cpu_bound": round(2 * one[1] / two[1], 3) if two[1] else None,
        "speedup_2_workers_cpu_bound_steady": round(2 * (one[1] - startup[1]) / (two[1] - startup_2[1]), 3)
        if two[1] > startup_2[1] else None,
        "cpu_ratio": round(raw_cpu / one[1], 3) if one[1] else None,
        "fixed_cost_s": round(startup[0], 2),
        "fixed_cost_cpu_s": {"1_worker": round(startup[1], 2), "2_workers": round(startup_2[1], 2)},
        "steady_state_ratio": round(steady / (text_mb / warm_wall), 3),
        "kiwi_load_s": round(load_s, 2),
        "kiwi_first_analysis_s": round(first_s, 2),
        "kiwi_rss_mb": round(kiwi_rss, 1),
        # peak resident memory of the largest worker process (Beam SDK harness + Kiwi + bundles)
        "worker_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        # ... and of this process: the runner (it holds the local shuffles) and the raw Kiwi loops
        "launcher_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        # per worker, from CPU seconds (what load from other jobs disturbs least): MB of text an
        # hour of one worker's CPU gets through, the figure docs/corpus.md scales from
        "mb_per_worker_cpu_hour": round(text_mb / one[1] * 3600, 1) if one[1] else None,
        "same_output": one[2] == two[2] == threaded[2],
        "stats_that_differ": sorted(k for k in one[2] if not one[2][k] == two[2].get(k) == threaded[2].get(k)),
    }
    return emit("corpus_throughput", "MB/s of text", round(value, 4),
                "raw kiwipiepy split_into_sents, 1 thread, Kiwi load included", round(baseline, 4), config)


if __name__ == "__main__":
    main(sys.argv[1:])
