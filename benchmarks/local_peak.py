"""Benchmark of what the corpus job holds at its peak on Beam's local runner (the in-process
FnApiRunner, one worker: launcher, runner and worker in one process), and where.

The corpus job (``corpus/build.py``) runs on the first N NSMC review files with
``--direct_num_workers=1`` (as ``benchmarks/scale.py`` runs it). A thread samples the process's
RSS (``/proc/self/statm``) every 20 ms; each time it passes its highest yet by 2 MB it adds up what
the runner holds for the job at that moment, in bytes of payload (the encoded elements; a
grouping buffer's decoded values by their Python sizes):

- ``stage input``: the buffers handed to the bundle now running (a shuffle's grouped output is
  one encoded stream, made by ``GroupingBuffer.partition``, kept until the bundle ends);
- ``pending``: buffers queued for stages not yet run (``watermark_pending_inputs``, ``ready_inputs``);
- ``outputs``: ``pcoll_buffers``, the running bundle's outputs as the runner collects them
  (a shuffle's input as a ``GroupingBuffer`` table of decoded values);
- ``channel to worker`` / ``channel from worker``: the in-memory data channel's lists of
  ``Elements.Data`` (the runner writes a bundle's whole input into it before the bundle starts,
  and the worker's outputs wait in it until the bundle ends);
- ``state``: the state servicer's lists (side inputs);
- ``traced other``: with ``--tracemalloc``, Python's traced memory less the above;
- the rest of the RSS: the interpreter, Beam, Kiwi's model and its working memory, and memory
  freed but not returned to the system.

It also wraps ``FnApiRunner._execute_bundle`` (measurement only) to record, for each bundle, its
stage, its input and output bytes and the RSS before, after and at most during it.

    python benchmarks/local_peak.py [--files 1] [--preset default|production] [--tracemalloc] [--beam-own] [--reviews GLOB | --data DIR]
    python benchmarks/local_peak.py --workers 2 ...
    python benchmarks/local_peak.py --set write_dropped=true ...   (the corpus job's settings, as kolectra corpus --set)
    python benchmarks/local_peak.py --job examples --corpus CORPUS_DIR --shards 4 --vocab VOCAB_DIR [--workers 2]

``--beam-own``: Beam's own local runner, without ``corpus/beam_local.py``'s changes (the A/B of them).

``--workers N``: ``--direct_num_workers=N`` (N > 1: worker processes, ``multi_processing``). Each
process's own peak (``VmHWM``, read every 0.5 s from /proc by ``vocab_counting.PeakWatch``) is
recorded too: the launcher's, each worker's and their sum, the figures behind the per-worker term
of ``corpus/local_memory.py`` (``MemoryModel.worker_mb``). ``--job examples``: the examples job
instead, on the first ``--shards`` train shards of a corpus artifact, with the WordPiece vocab in
``--vocab`` (trained there on the first review file when it is missing, as ``benchmarks/scale.py``
does); value and baseline as for the corpus job, against ``corpus/examples.py``'s model.

About 0.5-3 CPU minutes a review file (30-37 CPU s on 2026-12-01). value: the launcher's peak RSS, ``peak_rss_mb``, which is
``ru_maxrss`` in MiB (2^20 bytes) despite its name, kept because docs/scale.md quotes it so; the
other memory figures (``launcher_peak_mb``, ``worker_peaks_mb``, ``all_processes_mb`` from
``VmHWM``, the sampler's ``rss_*``) are MB of 10^6 bytes, as is the examples job's baseline
(compare it with ``launcher_peak_mb``). baseline: the
peak docs/scale.md's fit gives for the same text (default preset: 0.77 GB + 6.6 MB per MB with
corpus/beam_local.py's changes, as measured on 2026-12-01 (``FIT``), 0.73 GB + 7.8 with ``--beam-own``; production: 0.90 GB + 5.0, and
0.85 GB + 10.9 with ``--beam-own``).
Figures: docs/scale.md ("What the local runner holds at its peak").
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
import json
import os
import resource
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

from common import add_data_args, emit, parser, reviews_source

WHO = "benchmarks/local_peak.py"
PAGE = os.sysconf("SC_PAGE_SIZE")
# docs/scale.md: MB + MB per MB of text; the default preset's as measured on 2026-12-01 (its 2026-11-29
# fit, 760 + 4.5, is not what the same commit gives on today's machine and packages: "Not a commit")
FIT = {"default": (770.0, 6.6), "production": (900.0, 5.0)}
FIT_BEAM_OWN = {"default": (730.0, 7.8), "production": (850.0, 10.9)}  # --beam-own


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 1e6


def deep_size(value, depth: int = 0) -> int:
    """Python's bytes for a decoded element: strings, bytes, numbers and the containers of them."""
    size = sys.getsizeof(value)
    if depth < 6 and isinstance(value, (list, tuple)):
        size += sum(deep_size(v, depth + 1) for v in value)
    elif depth < 6 and isinstance(value, dict):
        size += sum(deep_size(k, depth + 1) + deep_size(v, depth + 1) for k, v in value.items())
    return size


def buffer_bytes(buf) -> int:
    """The payload a runner buffer holds: its encoded elements, or a grouping table's values."""
    from apache_beam.runners.portability.fn_api_runner.execution import GroupingBuffer, ListBuffer

    if isinstance(buf, ListBuffer):
        return sum(map(len, list(buf._inputs))) + sum(len(b) for part in (buf._grouped_output or ()) for b in part)
    if isinstance(buf, GroupingBuffer):
        if buf._grouped_output:
            return sum(len(b) for part in buf._grouped_output for b in part)
        for _ in range(5):  # the main thread may be adding keys
            try:
                return sum(len(k) + 72 + deep_size(v) for k, v in list(buf._table.items()))
            except RuntimeError:
                continue
    return 0


def queued(queue) -> list:
    return [buf for _, data_input in list(queue._q) for buf in data_input.data.values()]


class Probe:
    """The sampler thread and the bundle wrapper's records."""

    def __init__(self, traced: bool):
        self.traced = traced
        self.context = None  # the runner's FnApiRunnerExecutionContext, once a bundle ran
        self.stage = None
        self.inputs: list = []
        self.bundles: list[dict] = []
        self.peak: dict = {"rss_mb": 0.0}
        self.stage_max = self.stage_top = 0.0
        self.stage_held: dict = {}  # the composition at the running bundle's highest RSS yet
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def composition(self) -> dict:
        ctx = self.context
        parts = {"stage input": sum(map(buffer_bytes, self.inputs))}
        if ctx is not None:
            q = ctx.queues
            pending = queued(q.watermark_pending_inputs) + queued(q.ready_inputs)
            current = {id(b) for b in self.inputs}
            parts["pending"] = sum(buffer_bytes(b) for b in pending if id(b) not in current)
            parts["outputs"] = sum(buffer_bytes(b) for b in list(ctx.pcoll_buffers.values()) if id(b) not in current)
            to_worker = from_worker = 0
            for handlers in list(ctx.worker_handler_manager._cached_handlers.values()):
                for h in (h for h in handlers if hasattr(h.data_conn, "inverse")):  # in process only
                    from_worker += sum(e.ByteSize() for e in list(h.data_conn._inputs) if e is not None)
                    to_worker += sum(e.ByteSize() for e in list(h.data_conn.inverse()._inputs) if e is not None)
            parts["channel to worker"], parts["channel from worker"] = to_worker, from_worker
            state = ctx.worker_handler_manager.state_servicer._state
            parts["state"] = sum(len(b) for v in list(state.values()) for b in list(v))
        out = {k: round(v / 1e6, 2) for k, v in parts.items()}
        if self.traced:
            traced = tracemalloc.get_traced_memory()[0] / 1e6
            out["traced other"] = round(traced - sum(out.values()), 2)
        return out

    def _sample(self):
        while not self.done.wait(0.02):
            now = rss_mb()
            self.stage_top = max(self.stage_top, now)
            if now < self.stage_max + 2 and now < self.peak["rss_mb"] + 2:
                continue
            try:
                parts = self.composition()
            except Exception as e:  # a racing mutation: the next sample tries again
                parts = {"error": repr(e)[:200]}
            if now >= self.stage_max + 2:
                self.stage_max, self.stage_held = now, parts
            if now > self.peak["rss_mb"] + 2:
                self.peak = {"rss_mb": round(max(now, rss_mb()), 1), "stage": self.stage, "held_mb": parts}

    def wrap(self, runner_cls):
        original = runner_cls._execute_bundle
        probe = self

        def _execute_bundle(runner, context, bundle_context_manager, bundle_input):
            probe.context = context
            probe.stage = bundle_context_manager.stage.name
            probe.inputs = list(bundle_input.data.values())
            in_mb = sum(map(buffer_bytes, probe.inputs)) / 1e6
            before = probe.stage_max = probe.stage_top = rss_mb()
            probe.stage_held = {}
            t0 = time.process_time()
            result = original(runner, context, bundle_context_manager, bundle_input)
            outs = [b for _, di in list(context.queues.watermark_pending_inputs._q) for b in di.data.values()]
            probe.bundles.append({
                "stage": probe.stage[:90], "in_mb": round(in_mb, 2),
                "pending_mb": round(sum(map(buffer_bytes, outs)) / 1e6, 2),
                "rss_before": round(before, 1), "rss_max": round(probe.stage_top, 1), "rss_after": round(rss_mb(), 1),
                "held_at_max_mb": probe.stage_held, "cpu_s": round(time.process_time() - t0, 2)})
            probe.inputs = []
            return result

        runner_cls._execute_bundle = _execute_bundle


class Segments:
    """With ``--tracemalloc``: Python's traced memory between marks put at the runner's steps (a
    bundle's start, a grouping buffer's ``partition``, the input's copy into the data channel, the
    worker's processing of the bundle, the collection of its outputs): each segment's peak, and
    the traced memory and RSS at its end."""

    def __init__(self):
        self.rows: list[dict] = []
        self.label = "start"
        self.stage = ""

    def mark(self, label: str) -> None:
        current, peak = tracemalloc.get_traced_memory()
        self.rows.append({"stage": self.stage[:60], "segment": self.label, "traced_peak_mb": round(peak / 1e6, 1),
                          "traced_end_mb": round(current / 1e6, 1), "rss_end_mb": round(rss_mb(), 1)})
        self.label = label
        tracemalloc.reset_peak()

    def wrap(self, owner, name: str, label: str) -> None:
        original = getattr(owner, name)
        segments = self

        def wrapped(*args, **kwargs):
            segments.mark(label)
            try:
                return original(*args, **kwargs)
            finally:
                segments.mark(f"after {label}")

        setattr(owner, name, wrapped)


def run_child(files: list[str], out: Path, preset: str, traced: bool, beam_own: bool = False,
              workers: int = 1, examples: tuple[Path, Path] | None = None, threads: int | None = None,
              sets: tuple[str, ...] = ()) -> dict:
    """The corpus job on ``files``, or with ``examples`` (corpus shards' folder, vocab) the examples
    job, into ``out``, on ``workers`` workers."""
    from apache_beam.runners.portability.fn_api_runner import execution, fn_runner, worker_handlers
    from vocab_counting import PeakWatch

    from kolectra.core.config import override
    from kolectra.corpus import beam_local, build
    from kolectra.corpus import config as corpus_config
    from kolectra.corpus import examples as examples_job
    from kolectra.corpus.examples_config import ExamplesConfig

    cfg = dataclasses.replace(getattr(corpus_config, f"{preset}_config")(), shard_bytes=16 << 20)  # as scale.py
    cfg = override(cfg, sets)  # --set KEY=VALUE, as kolectra corpus takes it
    if beam_own:  # a fingerprint no method has: the local runner keeps Beam's own (corpus/beam_local.py)
        beam_local.FINGERPRINTS = dict.fromkeys(beam_local.FINGERPRINTS, "beam's own")
    probe = Probe(traced)
    probe.wrap(fn_runner.FnApiRunner)
    segments = Segments()
    if traced:
        tracemalloc.start()
        segments.wrap(execution.GroupingBuffer, "partition", "partition")
        segments.wrap(fn_runner.BundleManager, "_send_input_to_worker", "input to channel")
        segments.wrap(worker_handlers.EmbeddedWorkerHandler, "push", "worker")
        segments.wrap(fn_runner.BundleManager, "process_bundle", "bundle")
        inner = fn_runner.FnApiRunner._execute_bundle

        def staged(runner, context, manager, bundle_input):
            segments.stage = manager.stage.name
            return inner(runner, context, manager, bundle_input)

        fn_runner.FnApiRunner._execute_bundle = staged
    watch = PeakWatch()
    watch.start()
    probe.thread.start()
    t0 = time.process_time()
    beam_args = [f"--direct_num_workers={workers}"] + ([f"--analysis_threads={threads}"] if threads else [])
    if examples is None:
        result = build.build(cfg, files, out, beam_args)
    else:
        result = examples_job.build(ExamplesConfig(allow_other_corpus_vocab=True), examples[0], examples[1], out, beam_args)
    probe.done.set()
    probe.thread.join()
    watch.stop()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    if traced:
        segments.mark("end")
    return {"cpu_s": round(time.process_time() - t0, 1), "beam_local": beam_local.installed(),
            "workers_cpu_s": round(kids.ru_utime + kids.ru_stime, 1),
            # MiB (ru_maxrss is KiB), as docs/scale.md quotes this field; the *_mb figures below are 10^6 bytes
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            **watch.by_process(), "all_processes_mb": round(sum(watch.peaks.values()) * 1.024e-3),
            "documents": result.stats.get("records_out", result.stats.get("documents")),
            "dropped": sum(result.stats.get("dropped", {}).values()),
            "peak": probe.peak, "bundles": probe.bundles,
            "segments": [r for r in segments.rows if r["traced_peak_mb"] - r["traced_end_mb"] > 1 or "worker" in r["segment"]]}


def text_mb(path: str) -> float:
    """The text of a review file (gzipped JSONL), of a plain text file's lines (a document each), or
    of a Parquet file's ``text`` column."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet inputs need it

        column = pq.read_table(path, columns=["text"]).column("text")
        return sum(len(t.encode("utf-8")) for t in column.to_pylist() if t) / 1e6
    if path.endswith(".txt"):
        with open(path, encoding="utf-8") as f:
            return sum(len(line.rstrip("\n").encode("utf-8")) for line in f) / 1e6
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return sum(len(json.loads(line).get("text", "").encode("utf-8")) for line in f) / 1e6


def main() -> None:
    p = parser(__doc__, "1 review file, about 2 CPU minutes")
    add_data_args(p, "reviews")
    p.add_argument("--files", type=int, default=1, help="the first N review files")
    p.add_argument("--preset", choices=("default", "production"), default="default")
    p.add_argument("--out", type=Path, help="keep the corpus here (default: a temporary folder, removed)")
    p.add_argument("--beam-own", action="store_true", help="keep Beam's own local runner, without corpus/beam_local.py's changes")
    p.add_argument("--tracemalloc", action="store_true", help="also split Python's traced memory from the rest (slower)")
    p.add_argument("--workers", type=int, default=1, help="--direct_num_workers (over 1: worker processes)")
    p.add_argument("--analysis-threads", type=int, help="--analysis_threads: Kiwi's threads a worker (default: its share of the CPUs)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="the corpus job's settings, as `kolectra corpus --set` (e.g. write_dropped=true)")
    p.add_argument("--job", choices=("corpus", "examples"), default="corpus")
    p.add_argument("--corpus", type=Path, help="--job examples: a corpus artifact")
    p.add_argument("--shards", type=int, default=1, help="--job examples: its first N train shards")
    p.add_argument("--vocab", type=Path, help="--job examples: a vocab folder (trained here when missing)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="kolectra-peak-") as tmp:
        if args.job == "examples":
            if args.corpus is None or args.vocab is None:
                p.error("--job examples needs --corpus and --vocab")
            row, config, baseline = examples_run(args, Path(tmp))
        else:
            files = sorted(glob.glob(reviews_source(args, WHO)))[:args.files]
            mb = sum(map(text_mb, files))
            row = run_child(files, args.out or Path(tmp) / "corpus", args.preset, args.tracemalloc, args.beam_own, args.workers,
                            threads=args.analysis_threads, sets=tuple(args.sets))
            base, slope = (FIT_BEAM_OWN if args.beam_own else FIT)[args.preset]
            baseline = round(base + slope * mb, 1)
            config = {"files": args.files, "text_mb": round(mb, 2), "preset": args.preset,
                      "tracemalloc": args.tracemalloc, "beam_own": args.beam_own, "sets": args.sets}
    for b in row["bundles"] + row["segments"]:
        print(json.dumps(b), file=sys.stderr)
    print(json.dumps(row["peak"]), file=sys.stderr)
    emit("local_peak", f"MiB (2^20 bytes, ru_maxrss) of peak RSS of the {args.job} job's launcher on the local runner "
         "(lower is better)",
         row["peak_rss_mb"], "docs/scale.md's fit" if args.job == "corpus" else "corpus/examples.py's model", baseline,
         {**config, "workers": args.workers, "analysis_threads": args.analysis_threads, "load_1m": round(os.getloadavg()[0], 2)}, **row)


def examples_run(args, tmp: Path) -> tuple[dict, dict, float]:
    """The examples job on the first ``--shards`` train shards of ``--corpus`` (linked into a
    corpus folder of their own), with ``--vocab`` (trained on the first review file when missing)."""
    from kolectra.corpus import shards
    from kolectra.corpus.examples import memory_model, parts_per_shard
    from kolectra.corpus.runners import input_bytes, pipeline_options

    if not (args.vocab / "tokenizer.json").is_file():
        from scale import train_vocab  # noqa: PLC0415 - the scale benchmark's vocab, trained the same way

        train_vocab(sorted(glob.glob(reviews_source(args, WHO)))[0], args.vocab)
    picked = shards.shard_paths(args.corpus, "train")[:args.shards]
    data = tmp / "corpus" / shards.DATA_DIR
    data.mkdir(parents=True)
    for path in picked:
        (data / path.name).symlink_to(path.resolve())
    size = input_bytes([str(p) for p in picked])
    row = run_child([], args.out or tmp / "examples", args.preset, args.tracemalloc, args.beam_own, args.workers,
                    examples=(tmp / "corpus", args.vocab))
    return row, {"corpus": str(args.corpus), "shards": len(picked), "input_mb": round(size / 1e6, 2)}, \
        round(memory_model(parts_per_shard(pipeline_options([f"--direct_num_workers={args.workers}"]), len(picked)))
              .peak_bytes(size) / 1e6, 1)


if __name__ == "__main__":
    main()
