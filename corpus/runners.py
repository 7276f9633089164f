"""Where the corpus pipeline runs: Beam pipeline options from the pass-through ``--options`` of
``kolectra corpus``. Part of the corpus stage (``corpus/build.py`` calls it); it decides where
and how parallel the job runs, never what it writes.

- no runner / ``DirectRunner``: the in-process FnApiRunner (never Prism, which downloads a
  binary), with worker processes for large inputs on 4 or more CPUs (:func:`local_workers`)
  and Kiwi analysing on each worker's share of the CPUs (:func:`analysis_threads`);
- any other runner: options pass unchanged; ``--corpus_staging`` (:class:`CorpusOptions`) names
  a directory remote workers write to, fetched into the local artifact afterwards.

It also decides how much of Beam the user sees (:func:`set_verbosity`): by default nothing of
Beam's own logging (its harness logs 40-odd INFO/WARNING lines per job, and every import warns
that apitools is missing); kolectra's progress lines and bars instead, and failures as one
exception naming the input: Ctrl-C during a job is one ``KeyboardInterrupt`` (:func:`interruptible`,
``corpus/interruption.py``), options Beam refuses one :class:`BeamOptionError` (:func:`new_pipeline`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import sys
from typing import Iterator

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.environments import SubprocessSDKEnvironment

from kolectra.core import scratch, storage
from kolectra.core.errors import EnvironmentProblem, UserInputError
from kolectra.core.verbosity import VERBOSE
from kolectra.corpus import beam_local, interruption
from kolectra.corpus.beam_logging import set_verbosity, verbosity  # noqa: F401  (this module's API)
from kolectra.corpus.interruption import Interruption, interruptible  # noqa: F401  (this module's API)
from kolectra.corpus.worker_watch import WorkerDied, WorkerWatch  # noqa: F401  (WorkerDied: this module's API)

# Beam's "DirectRunner" is a switcher that first tries the Prism runner, which downloads a binary
# from GitHub; the FnApiRunner is the in-process batch engine it falls back to. Local runs must
# never touch the network, so both the default and an explicit DirectRunner mean FnApiRunner,
# as :class:`LocalRunner` (Beam instantiates a runner named by its dotted class path).
LOCAL_RUNNER = "kolectra.corpus.runners.LocalRunner"
# Below this much input a second worker process costs more (start-up, a Kiwi load of ~2 s and
# ~0.45 GB each) than it saves: Kiwi analyses about 0.1-0.2 MB of text a second per core.
MULTI_WORKER_MIN_BYTES = 4 << 20
MAX_LOCAL_WORKERS = 8
# CPUs per local worker process above that size: its Kiwi (and the examples stage's tokenizer)
# runs that many threads. On 2 cores one in-process worker with Kiwi on 2 threads was at least as
# fast as 2 worker processes, with one Kiwi in memory instead of two (docs/corpus.md, "Kiwi's
# thread pool"); processes still split the pipeline's Python work, which threads cannot, so
# larger machines get one process per this many CPUs.
CPUS_PER_LOCAL_WORKER = 2
# After the runner failed, how long to wait for a dead worker's exit to be reported (the runner
# can see the closed channel first): the difference between one clear line and a gRPC error.
DEATH_REPORT_WAIT = 3.0


def local_workers(input_bytes: int, cpus: int | None = None) -> int:
    """Worker processes for a local run when ``--direct_num_workers`` is not given: one below
    :data:`MULTI_WORKER_MIN_BYTES`, else one per :data:`CPUS_PER_LOCAL_WORKER` CPUs (up to
    :data:`MAX_LOCAL_WORKERS`); :func:`analysis_threads` gives each its share of the CPUs."""
    cpus = cpus or os.cpu_count() or 1
    if input_bytes < MULTI_WORKER_MIN_BYTES:
        return 1
    return max(1, min(cpus // CPUS_PER_LOCAL_WORKER, MAX_LOCAL_WORKERS))


class ReusedViews(PipelineOptions):
    """Beam's options, whose view of each options class is made once and reused.

    Beam's ``view_as`` builds an argparse parser of the class's options and parses the flags again
    on every call, and Beam calls it for each transform it applies (type checks, output types): about
    600 times while the corpus job's graph is built and run, 170 times for the examples job, 0.2-0.5
    ms each, about 0.3 CPU s of a corpus job on 20,000 reviews (docs/benchmarks.md). Every view
    reads and writes the one shared store of values (``_all_options``), so a kept view says what a
    new one would; only the parsing is saved. The kept views are not pickled with the options."""

    def view_as(self, cls):
        views = self.__dict__.setdefault("_views", {})  # not through __setattr__: options only
        view = views.get(cls)
        if view is None:
            view = views[cls] = super().view_as(cls)
        return view

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_views", None)
        return state


def pipeline_options(beam_args: list[str], input_bytes: int = 0) -> PipelineOptions:
    """Beam options from the pass-through arguments. A local run (no runner, or DirectRunner) is
    the in-process FnApiRunner with ``direct_num_workers`` worker *processes* (Beam's
    ``multi_threading`` mode showed no gain in our measurements: the pipeline's Python runs
    under one GIL; Kiwi's own threads are :func:`analysis_threads`); the number defaults to
    :func:`local_workers`. Any other runner and option pass unchanged. The output bytes do not
    depend on any of this."""
    opts = ReusedViews(list(beam_args))
    std = opts.view_as(StandardOptions)
    if std.runner is None or std.runner.lower() in ("directrunner", "switchingdirectrunner", "fnapirunner"):
        std.runner = LOCAL_RUNNER
    if std.runner == LOCAL_RUNNER:
        direct = opts.view_as(DirectOptions)
        explicit_mode = any(a.startswith("--direct_running_mode") for a in beam_args)
        explicit_workers = any(a.startswith("--direct_num_workers") for a in beam_args)
        # what the user left to kolectra: the memory check may take fewer workers (local_memory.py)
        opts.__dict__["_chosen"] = frozenset(
            name for name, given in (("workers", explicit_workers), ("mode", explicit_mode)) if not given)
        if not explicit_workers:
            direct.direct_num_workers = local_workers(input_bytes)
        if direct.direct_num_workers == 0:  # Beam's "as many as CPUs"
            direct.direct_num_workers = os.cpu_count() or 1
        if direct.direct_num_workers > 1 and not explicit_mode:
            direct.direct_running_mode = "multi_processing"
    return opts


def chosen_locally(options: PipelineOptions) -> frozenset[str]:
    """Which of the local runner's ``"workers"`` (count) and ``"mode"`` :func:`pipeline_options`
    chose because the arguments left them out: those the memory check may lower to fit."""
    return options.__dict__.get("_chosen", frozenset())


def runner_label(options: PipelineOptions, peak: float | None = None) -> str:
    """How a job's progress line names where it runs: the local runner with its workers, their mode and
    the memory check's estimate (``peak``, bytes), the same words in every stage; else the runner."""
    runner = options.view_as(StandardOptions).runner
    if runner != LOCAL_RUNNER:
        return str(runner)
    direct = options.view_as(DirectOptions)
    memory = f", about {peak / 1e9:,.1f} GB at its peak" if peak else ""
    return (f"the local runner (Beam's FnApiRunner), {direct.direct_num_workers} worker(s) "
            f"({direct.direct_running_mode}){memory}")


class BeamOptionError(UserInputError):
    """Beam refused the pipeline options before the job started (an unknown ``--runner``, options a
    runner requires); the message lists what Beam said, on one line."""


@contextlib.contextmanager
def new_pipeline(options: PipelineOptions) -> Iterator[beam.Pipeline]:
    """``with beam.Pipeline(options=options) as p``: the graph is built in the block and runs at its
    end. Beam creates the runner and validates the options for it first, raising a ValueError whose
    lines name the options; that is the user's input, not a bug.

    Beam removes the pipeline's local temp folder (``beam-pipeline-temp*`` in the system's temp
    directory) only in ``run()``, so a job stopped before it runs (bad input found while the graph
    is built, Ctrl-C) would leave one behind each time: it is removed here however the block ends.
    After ``kill -9``, an OOM kill or the third Ctrl-C nothing runs, and no sweep knew Beam's name: the
    folder is a kolectra scratch folder instead (``kolectra-beam-<pid>-...``, core/scratch.py), which
    the next command's sweep removes once this process is gone."""
    try:
        p = beam.Pipeline(options=options)
    except ValueError as e:
        said = "; ".join(line.strip().rstrip(".:") for line in str(e).splitlines() if line.strip())
        raise BeamOptionError(f"Beam refused the pipeline options: {said}") from None
    try:
        shutil.rmtree(p.local_tempdir, ignore_errors=True)  # Beam's, empty: nothing used it yet
        p.local_tempdir = scratch.mkdtemp("beam")
        with p:
            yield p
    finally:
        shutil.rmtree(p.local_tempdir, ignore_errors=True)


class RunnerSetupError(EnvironmentProblem):
    """The runner cannot start from this launcher: a library it needs is not installed, or its job
    server cannot be fetched. The message names what to install or pass (exit 2, never a bug)."""


def runner_setup_problem(e: BaseException, runner: str) -> str | None:
    """What the user must install or pass, if ``e`` is a runner that could not start (else None)."""
    text = str(e)
    if "apache_beam[gcp]" in text or "apache-beam[gcp]" in text:
        return (f"{runner} needs Google Cloud's libraries on this launcher: pip install 'kolectra[gcp]' "
                "(Beam's GCP extra and gcsfs), then run the same command again")
    if runner in REMOTE_RUNNERS and type(e).__module__.startswith(("google.api_core", "google.auth")):
        # Google's client refused or gave up (Beam's checks of the options, staging, submitting): after
        # retrying for minutes where the launcher cannot reach Google, this was an "internal error"
        said = text.splitlines()[0][:300] if text else type(e).__name__
        return (f"{runner}: Google Cloud did not answer this launcher as needed ({type(e).__name__}: {said}); "
                "check that it reaches *.googleapis.com, its credentials, --project, --region and "
                "--temp_location, then run the same command again")
    if "job server jar" in text:
        spark = "spark" in text.lower()
        flag = "--spark_job_server_jar" if spark else "--flink_job_server_jar"
        url = next((w for w in text.split() if w.startswith("http") and ".jar" in w), "").rstrip(":.")
        version = "" if spark else " with --flink_version matching the Flink cluster"  # Spark has no such flag
        return (f"{runner} could not fetch its job-server jar{f' ({url})' if url else ''}: this machine cannot "
                f"reach Maven. Download the jar where you can and pass {flag} PATH, or start the job server "
                f"yourself and pass --job_endpoint HOST:8099{version} (docs/scale.md)")
    return None


def _dataflow_credentials(runner: str) -> None:
    """Dataflow submits with Google's application-default credentials; without them Beam retries for
    minutes, then goes on anonymously and fails at submission. Refuse before the job instead."""
    try:
        # Beam's Dataflow client first: kolectra[gcs] alone brings google.auth (gcsfs's) but not Beam's GCP
        # extra, and was told about credentials, then after setting them up, about the extra
        import apache_beam.runners.dataflow.internal.apiclient  # noqa: F401, PLC0415 - installed by kolectra[gcp]
        import google.auth  # noqa: PLC0415 - installed by kolectra[gcp]
        from google.auth.exceptions import DefaultCredentialsError  # noqa: PLC0415
    except ImportError:
        raise RunnerSetupError(runner_setup_problem(ImportError("apache_beam[gcp]"), runner)) from None
    try:
        google.auth.default()
    except DefaultCredentialsError:
        raise RunnerSetupError(
            f"{runner} needs Google credentials on this launcher: set GOOGLE_APPLICATION_CREDENTIALS to a "
            "service account key file, or run `gcloud auth application-default login`") from None


@contextlib.contextmanager
def runner_setup(options: PipelineOptions) -> Iterator[None]:
    """Around a pipeline's run: a runner that cannot start here is one :class:`RunnerSetupError`."""
    runner = options.view_as(StandardOptions).runner or ""
    if runner in REMOTE_RUNNERS:
        _dataflow_credentials(runner)
    try:
        yield
    except Exception as e:  # noqa: BLE001 - what runner_setup_problem does not name is raised as it is
        why = runner_setup_problem(e, options.view_as(StandardOptions).runner or "the runner")
        if why is None:
            raise
        raise RunnerSetupError(why) from None


# CPython runs a collection every 700 net allocations and a full one every 100 of those. A worker
# holds a bundle's documents (millions of small objects) while Kiwi allocates a Python object per
# token, so with the defaults the full collections add up: about 4 % of Kiwi's time on NSMC reviews
# (benchmarks/corpus.py). Nothing here makes reference cycles worth collecting that often.
GC_THRESHOLD = (50_000, 20, 100)


def tune_gc() -> None:
    """Collect less often in a worker process (called from the analysing DoFn's ``setup``)."""
    gc.set_threshold(*GC_THRESHOLD)


def input_bytes(files: list[str]) -> int:
    """Total size of existing files (no globbing: ``data[1].txt`` is one file)."""
    total = 0
    for f in files:
        try:
            total += int(storage.info(f)["size"]) if "://" in f else os.path.getsize(f)
        except Exception:  # noqa: BLE001 - sizes only tune the worker count; the reader reports unreadable files
            pass
    return total


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
        parser.add_argument(
            "--local_memory_gb",
            type=float,
            default=None,
            help="the memory a local run may use, in GB (default: this machine's); a job whose estimated "
            "peak is larger is refused before it starts (docs/scale.md)",
        )
        parser.add_argument(
            "--analysis_threads",
            type=int,
            default=None,
            help="Kiwi's analysing threads in each worker (default: for local runs, the CPUs shared among "
            "the local workers; for other runners 1, since their workers take a core each)",
        )


def cpus_per_worker(options: PipelineOptions, cpus: int | None = None) -> int:
    """The CPUs each worker may keep busy with native threads (Kiwi's, the tokenizer's): for the
    local runner the CPUs divided among its workers (one in-process worker on 2 cores: 2), else 1
    (remote runners such as Dataflow start an SDK process per core)."""
    if options.view_as(StandardOptions).runner != LOCAL_RUNNER:
        return 1
    cpus = cpus or os.cpu_count() or 1
    return max(1, cpus // max(1, options.view_as(DirectOptions).direct_num_workers or 1))


def analysis_threads(options: PipelineOptions, cpus: int | None = None) -> int:
    """Kiwi's analysing threads per worker: ``--analysis_threads``, else :func:`cpus_per_worker`."""
    given = options.view_as(CorpusOptions).analysis_threads
    if given is not None:
        if given < 1:
            raise UserInputError(f"--analysis_threads {given}: give 1 or more threads (or leave it out for the default)")
        return given
    return cpus_per_worker(options, cpus)


# Runners whose workers cannot see the launcher's disk.
REMOTE_RUNNERS = ("DataflowRunner", "dataflow")


class LocalRunner(FnApiRunner):
    """Beam's FnApiRunner whose worker processes (``multi_processing``) are
    ``python -m kolectra.corpus.worker``: the same SDK harness, without the INFO lines each
    worker would print to the terminal (see ``corpus/worker.py``). Otherwise FnApiRunner as is, but
    for ``corpus/beam_local.py``'s changes to it (the same elements, each held for less time)."""

    def run_pipeline(self, pipeline, options):
        beam_local.install()  # the runner lets go of a stage's input sooner (corpus/beam_local.py)
        direct = options.view_as(DirectOptions)
        if direct.direct_running_mode != "multi_processing":
            return super().run_pipeline(pipeline, options)
        self._default_environment = SubprocessSDKEnvironment.from_command_string(
            f"exec {sys.executable} -m {interruption.WORKER_MODULE}")  # exec: no shell that Ctrl-C would kill
        os.environ["KOLECTRA_LAUNCHER_PID"] = str(os.getpid())  # the workers end with it (corpus/worker.py)
        # FnApiRunner would replace that environment in multi_processing mode; the worker count
        # (direct_num_workers) is what makes it parallel, whatever the mode's name
        direct.direct_running_mode = "in_memory"
        try:
            # Ctrl-C: stop the workers now, for any job run here (examples too); a worker that
            # dies fails the job at once instead of leaving the runner waiting for it
            # (and the sends to them give up, or Beam's teardown would wait to close their channels)
            with Interruption(on_stop=beam_local.give_up_sends) as stop, \
                    WorkerWatch(stop.fail, verbosity() >= VERBOSE) as watch:
                try:
                    return super().run_pipeline(pipeline, options)
                except BaseException:
                    if stop.happened:
                        raise
                    # the runner may see the closed channel before the worker's thread reports
                    if watch.reported.wait(DEATH_REPORT_WAIT) or stop.failure is not None:
                        # a worker killed by SIGTERM (SIGHUP) with the launcher (a process group's stop): terminated
                        told = str(stop.failure or watch.error)
                        if stop.terminated_soon(DEATH_REPORT_WAIT if "SIGTERM" in told or "SIGHUP" in told else 0.0):
                            raise stop.stopped("interrupted: the job's workers were stopped") from None
                        raise (stop.failure or watch.error) from None
                    raise
        finally:
            direct.direct_running_mode = "multi_processing"
