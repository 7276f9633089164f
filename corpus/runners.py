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
exception naming the input: Ctrl-C during a job is one ``KeyboardInterrupt`` (:func:`interruptible`),
options Beam refuses one :class:`BeamOptionError` (:func:`new_pipeline`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from typing import Iterator

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.environments import SubprocessSDKEnvironment

from kolectra.core import storage
from kolectra.core.errors import EnvironmentProblem, UserInputError
from kolectra.core.verbosity import VERBOSE
from kolectra.corpus.beam_logging import set_verbosity, verbosity  # noqa: F401  (this module's API)
from kolectra.corpus.sigint_relay import SigintRelay
from kolectra.corpus.worker_watch import WorkerDied, WorkerWatch  # noqa: F401  (WorkerDied: this module's API)

# After a job was stopped, how often its worker processes are looked for again (a /proc scan):
# the time a worker that Beam starts late may live before it is stopped.
STOP_SWEEP_S = 0.1


class Interruption:
    """Within ``with Interruption() as ctrl_c:``, Ctrl-C stops the local worker processes and raises
    KeyboardInterrupt, and sets ``ctrl_c.happened``: Beam and kiwipiepy may re-raise it wrapped
    (``RuntimeError: KeyboardInterrupt [while running ...]``), so the flag, not the exception's
    type, says the user stopped the job. :meth:`fail` ends the job the same way from another
    thread (a worker process died), raising that error instead. The main thread gets one exception,
    and one it slept through is sent to it again (:class:`~kolectra.corpus.sigint_relay.SigintRelay`).

    A Ctrl-C after that raises nothing (the job is already stopping: one raised inside Beam's
    teardown would cut short its joining of the workers' threads), but a stop can hang (a worker
    that does not end: Beam's teardown waits for it), so the relay's thread counts them
    (:meth:`_again`): the second Ctrl-C says that the workers are being stopped and that another
    quits at once; the third quits (:func:`quit_at_once`).

    ``owns`` names a folder that this process made for the job (the local run's progress and
    listing folder): its own ``finally`` removes it, and :func:`quit_at_once`, after which no
    ``finally`` runs, removes it too while the job is inside."""

    def __init__(self, owns: str | None = None):
        self.owns = owns
        self.happened = False
        self.failure: BaseException | None = None
        self._previous = None
        self._ended = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._sweeper_lock = threading.Lock()
        self._raised = False
        self._relay: SigintRelay | None = None
        self._own_relay = False  # else an enclosing Interruption's, shared: one count of Ctrl-Cs
        self._again_count = 0

    def _handler(self, signum, frame):
        if self._raised:  # the relay's repeat, or Ctrl-C again (counted by the relay: _again): unwinding already
            return
        self._raised = True
        if self._relay is not None:
            self._relay.acted(on_ctrl_c=self.failure is None)
        if self.failure is not None:  # sent by fail(): the workers are stopped already
            raise self.failure
        self.happened = True
        # Local workers ignore SIGINT (corpus/worker.py) and would finish their bundle (up to a
        # whole stage) before the runner could tear down: stop them now, quietly
        self._stop_workers()
        if callable(self._previous) and self._previous is not signal.default_int_handler:
            self._previous(signum, frame)  # an enclosing Interruption: its flag too
        raise KeyboardInterrupt

    def fail(self, error: BaseException) -> None:
        """Stop the job with ``error`` (from any thread): the other local workers are stopped and
        the main thread, wherever Beam has it wait, is woken by a SIGINT that this handler turns
        into ``error``. Ignored after Ctrl-C or a first failure."""
        if self.happened or self.failure is not None:
            return
        self.failure = error
        self._stop_workers()
        if self._relay is not None:  # installed: the main thread runs the job
            self._relay.wake()

    def _again(self) -> None:
        """A Ctrl-C after the stop began (in the relay's thread): the first says what is going on,
        the next quits. A nested Interruption (the local runner's, inside the corpus stage's) shares
        its enclosing one's relay, so the count goes on across both."""
        self._again_count += 1
        if self._again_count == 1:
            from kolectra.core import bars  # noqa: PLC0415 - above any progress bar, as progress lines are

            bars.write(f"[kolectra] {STOPPING_NOTICE}")
        else:
            quit_at_once()

    def __enter__(self) -> "Interruption":
        if self.owns:
            _OWNED.add(self.owns)
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
            outer = getattr(self._previous, "__self__", None)
            if isinstance(outer, Interruption) and outer._relay is not None:  # noqa: SLF001 - same class
                self._relay = outer._relay  # noqa: SLF001 - same class
            else:
                self._relay, self._own_relay = SigintRelay(STOP_SWEEP_S, again=self._again), True
        return self

    def _stop_workers(self) -> None:
        """Stop the local workers now, and every one started from now until the job has ended.
        Beam starts each worker from a thread of its own, so on a loaded machine one can start
        after this first sweep (even after the others died); its teardown then waits for that
        worker forever. So the workers are looked for again every :data:`STOP_SWEEP_S` until
        :meth:`__exit__`, which comes only after Beam's teardown."""
        quiet_beam_threads()
        stop_local_workers()
        with self._sweeper_lock:
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep, name="kolectra-stop-workers", daemon=True)
                self._sweeper.start()

    def _sweep(self) -> None:
        while not self._ended.wait(STOP_SWEEP_S):
            stop_local_workers()

    def __exit__(self, *exc) -> None:
        _OWNED.discard(self.owns)
        self._ended.set()
        if self._own_relay:
            self._relay.close()
        if self._sweeper is not None:
            self._sweeper.join()
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


@contextlib.contextmanager
def interruptible(what: str) -> Iterator[Interruption]:
    """Run a Beam job inside: Ctrl-C ends it as one ``KeyboardInterrupt(what)``, however Beam
    wrapped it (in-process bundles re-raise it as ``RuntimeError: KeyboardInterrupt [while
    running ...]``), with the local workers stopped and their threads' tracebacks silenced."""
    with Interruption() as ctrl_c:
        try:
            yield ctrl_c
        except BaseException:
            if not ctrl_c.happened:
                raise
            raise KeyboardInterrupt(what) from None


WORKER_MODULE = "kolectra.corpus.worker"
# Folders of the jobs now running (Interruption's ``owns``), which quit_at_once removes
_OWNED: set[str] = set()
# How long quit_at_once waits for its killed workers to be gone, and then for its folders' removal:
# never longer, whatever the disk does (a progress folder holds a few small files)
QUIT_WAIT_S = 0.5
STOPPING_NOTICE = "stopping the job's workers; press Ctrl-C again to quit at once"
QUIT_LINE = ("kolectra: quit at once (Ctrl-C while the job was stopping); its worker processes were killed "
             "and nothing was published (the next build sweeps what this one left)")


def quit_at_once() -> None:
    """End the process now, with the interrupt's status (130), after killing the local workers.

    Called from the relay's thread while the main thread is stuck stopping the job (in Beam's
    teardown, waiting for a worker): an exception cannot be raised into that thread from another,
    ``sys.exit`` would end only the calling thread, and the interpreter's own exit would wait for
    Beam's threads. ``os._exit`` ends the process whatever its threads do; no ``finally`` runs, so
    a build directory is left as a ``kill -9`` leaves it (the store sweeps it at its next build:
    pipeline/store/workspace.py). The workers are killed first (SIGKILL: a SIGTERM is what they did
    not answer), or they would outlive the launcher. The folders the running jobs own (their
    Interruption's ``owns``) are removed once the workers are gone (one killed while it rewrote its
    progress file would make the folder again), each wait bounded by :data:`QUIT_WAIT_S`."""
    killed = [pid for pid in _proc_children(os.getpid()) if _signalled(pid, signal.SIGKILL)]
    deadline = time.monotonic() + QUIT_WAIT_S
    while any(map(_running, killed)) and time.monotonic() < deadline:
        time.sleep(0.01)
    remover = threading.Thread(target=lambda: [shutil.rmtree(f, ignore_errors=True) for f in list(_OWNED)],
                               name="kolectra-quit-remove", daemon=True)
    remover.start()
    remover.join(QUIT_WAIT_S)
    with contextlib.suppress(Exception):
        print(QUIT_LINE, file=sys.stderr, flush=True)
    os._exit(128 + signal.SIGINT)  # the status of the clean path's KeyboardInterrupt (130)


def _signalled(pid: int, how: int) -> bool:
    try:
        os.kill(pid, how)
        return True
    except OSError:
        return False


def _running(pid: int) -> bool:
    """``pid`` has not ended yet (a zombie, not yet reaped, has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def stop_local_workers(how: int = signal.SIGTERM) -> int:
    """Terminate this process's worker processes (``python -m kolectra.corpus.worker``), found
    in /proc by parent pid: after Ctrl-C, FnApiRunner tears down by waiting for each worker to
    finish its bundle, which can be the rest of a stage. Returns how many were stopped;
    elsewhere than Linux, none (the workers then finish their bundles first)."""
    return sum(_signalled(pid, how) for pid in _proc_children(os.getpid()))


def _proc_children(parent: int) -> list[int]:
    pids = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return pids
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if WORKER_MODULE.encode() in f.read():
                    pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def quiet_beam_threads() -> None:
    """From now on, an exception ending one of Beam's or gRPC's threads prints nothing below
    VERBOSE (after Ctrl-C, as the runner is torn down, its control and worker threads each die
    with a traceback); other threads' exceptions print as before."""
    previous = threading.excepthook
    if getattr(previous, "kolectra_quiet", False):
        return

    def hook(args):
        frames = traceback.extract_tb(args.exc_traceback) if args.exc_traceback else []
        ours = any(f"{os.sep}apache_beam{os.sep}" in f.filename or f"{os.sep}grpc{os.sep}" in f.filename for f in frames)
        if not (ours and verbosity() < VERBOSE):
            previous(args)

    hook.kolectra_quiet = True
    threading.excepthook = hook



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
        if not any(a.startswith("--direct_num_workers") for a in beam_args):
            direct.direct_num_workers = local_workers(input_bytes)
        if direct.direct_num_workers == 0:  # Beam's "as many as CPUs"
            direct.direct_num_workers = os.cpu_count() or 1
        if direct.direct_num_workers > 1 and not explicit_mode:
            direct.direct_running_mode = "multi_processing"
    return opts


class BeamOptionError(UserInputError):
    """Beam refused the pipeline options before the job started (an unknown ``--runner``, options a
    runner requires); the message lists what Beam said, on one line."""


def new_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """``beam.Pipeline(options=options)``: Beam creates the runner and validates the options for it
    here, raising a ValueError whose lines name the options; that is the user's input, not a bug."""
    try:
        return beam.Pipeline(options=options)
    except ValueError as e:
        said = "; ".join(line.strip().rstrip(".:") for line in str(e).splitlines() if line.strip())
        raise BeamOptionError(f"Beam refused the pipeline options: {said}") from None


class RunnerSetupError(EnvironmentProblem):
    """The runner cannot start from this launcher: a library it needs is not installed, or its job
    server cannot be fetched. The message names what to install or pass (exit 2, never a bug)."""


def runner_setup_problem(e: BaseException, runner: str) -> str | None:
    """What the user must install or pass, if ``e`` is a runner that could not start (else None)."""
    text = str(e)
    if "apache_beam[gcp]" in text or "apache-beam[gcp]" in text:
        return (f"{runner} needs Google Cloud's libraries on this launcher: pip install 'kolectra[gcp]' "
                "(Beam's GCP extra and gcsfs), then run the same command again")
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
    except (ImportError, RuntimeError, ValueError, OSError) as e:
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
    worker would print to the terminal (see ``corpus/worker.py``). Otherwise FnApiRunner as is."""

    def run_pipeline(self, pipeline, options):
        direct = options.view_as(DirectOptions)
        if direct.direct_running_mode != "multi_processing":
            return super().run_pipeline(pipeline, options)
        self._default_environment = SubprocessSDKEnvironment.from_command_string(
            f"exec {sys.executable} -m {WORKER_MODULE}")  # exec: no shell that Ctrl-C would kill
        # FnApiRunner would replace that environment in multi_processing mode; the worker count
        # (direct_num_workers) is what makes it parallel, whatever the mode's name
        direct.direct_running_mode = "in_memory"
        try:
            # Ctrl-C: stop the workers now, for any job run here (examples too); a worker that
            # dies fails the job at once instead of leaving the runner waiting for it
            with Interruption() as stop, WorkerWatch(stop.fail, verbosity() >= VERBOSE) as watch:
                try:
                    return super().run_pipeline(pipeline, options)
                except BaseException:
                    if stop.happened:
                        raise
                    # the runner may see the closed channel before the worker's thread reports
                    if watch.reported.wait(DEATH_REPORT_WAIT) or stop.failure is not None:
                        raise (stop.failure or watch.error) from None
                    raise
        finally:
            direct.direct_running_mode = "multi_processing"
