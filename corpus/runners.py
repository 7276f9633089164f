"""Where the corpus pipeline runs: Beam pipeline options from the pass-through ``--options`` of
``kolectra corpus``. Part of the corpus stage (``corpus/build.py`` calls it); it decides where
and how parallel the job runs, never what it writes.

- no runner / ``DirectRunner``: the in-process FnApiRunner (never Prism, which downloads a
  binary), with worker processes for large inputs (:func:`local_workers`);
- any other runner: options pass unchanged; ``--corpus_staging`` (:class:`CorpusOptions`) names
  a directory remote workers write to, fetched into the local artifact afterwards.
"""

from __future__ import annotations

import gc
import os

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

# Beam's "DirectRunner" is a switcher that first tries the Prism runner, which downloads a binary
# from GitHub; the FnApiRunner is the in-process batch engine it falls back to. Local runs must
# never touch the network, so both the default and an explicit DirectRunner mean FnApiRunner.
LOCAL_RUNNER = "FnApiRunner"
# Below this much input a second worker process costs more (start-up, a Kiwi load of ~2 s and
# ~0.45 GB each) than it saves: Kiwi analyses about 0.1-0.2 MB of text a second per core.
MULTI_WORKER_MIN_BYTES = 4 << 20
MAX_LOCAL_WORKERS = 8


def local_workers(input_bytes: int, cpus: int | None = None) -> int:
    """Worker processes for a local run when ``--direct_num_workers`` is not given."""
    cpus = cpus or os.cpu_count() or 1
    return 1 if input_bytes < MULTI_WORKER_MIN_BYTES else max(1, min(cpus, MAX_LOCAL_WORKERS))


def pipeline_options(beam_args: list[str], input_bytes: int = 0) -> PipelineOptions:
    """Beam options from the pass-through arguments. A local run (no runner, or DirectRunner) is
    the in-process FnApiRunner with ``direct_num_workers`` worker *processes* (two threads
    sharing one Kiwi showed no gain over one in our measurements, and the rest of the pipeline
    is Python under the GIL); the number defaults to the CPU count for
    inputs over :data:`MULTI_WORKER_MIN_BYTES`. Any other runner and option pass unchanged.
    The output bytes do not depend on any of this."""
    opts = PipelineOptions(list(beam_args))
    std = opts.view_as(StandardOptions)
    if std.runner is None or std.runner.lower() in ("directrunner", "switchingdirectrunner"):
        std.runner = LOCAL_RUNNER
    if std.runner == LOCAL_RUNNER:
        direct = opts.view_as(DirectOptions)
        explicit_mode = any(a.startswith("--direct_running_mode") for a in beam_args)
        if not any(a.startswith("--direct_num_workers") for a in beam_args):
            direct.direct_num_workers = local_workers(input_bytes)
        if direct.direct_num_workers == 0:  # Beam's "as many as CPUs"
            direct.direct_num_workers = os.cpu_count() or 1
        if direct.direct_num_workers > 1 and not explicit_mode:
            direct.direct_running_mode = "multi_processing"
    return opts


# CPython runs a collection every 700 net allocations and a full one every 100 of those. A worker
# holds a bundle's documents (millions of small objects) while Kiwi allocates a Python object per
# token, so with the defaults the full collections add up: about 4 % of Kiwi's time on NSMC reviews
# (benchmarks/corpus.py). Nothing here makes reference cycles worth collecting that often.
GC_THRESHOLD = (50_000, 20, 100)


def tune_gc() -> None:
    """Collect less often in a worker process (called from the analysing DoFn's ``setup``)."""
    gc.set_threshold(*GC_THRESHOLD)


def input_bytes(files: list[str]) -> int:
    try:
        return sum(m.size_in_bytes for r in FileSystems.match(files) for m in r.metadata_list)
    except Exception:  # sizes only tune the worker count; the reader reports unreadable files
        return 0


class CorpusOptions(PipelineOptions):
    """Pipeline options of kolectra's own, parsed from the pass-through Beam arguments."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--corpus_staging",
            default=None,
            help="directory (gs://, s3://, hdfs:// ...) where remote workers write the corpus files; "
            "they are copied into the local artifact afterwards and the staging copy deleted",
        )


# Runners whose workers cannot see the launcher's disk.
REMOTE_RUNNERS = ("DataflowRunner", "dataflow")
