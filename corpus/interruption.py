"""Ctrl-C during a corpus or examples job on the local runner, and a job stopped from another thread
(a worker process died): part of the corpus stage's runner (``corpus/runners.py`` runs every local
job inside :class:`Interruption`; ``corpus/build.py``, ``corpus/examples.py`` and ``vocab/count.py``
use :func:`interruptible`).

Beam's local runner waits for its worker processes to finish their bundles before it tears down,
and in-process bundles re-raise a KeyboardInterrupt wrapped in other errors. Here the first Ctrl-C
stops the local workers (found in /proc by parent pid and module: :func:`stop_local_workers`) and
ends the job as one ``KeyboardInterrupt``; the second says the workers are being stopped; the third
kills them and quits at once (:func:`quit_at_once`), for a stop that hangs. Beam's and gRPC's
threads then die quietly (:func:`quiet_beam_threads`). A SIGTERM (a scheduler's stop, a preempted
machine's, ``kill``) stops the job the same way and ends it as one
:class:`~kolectra.core.errors.Terminated` (exit status 143), also when it reached the workers too
(a process group's, Slurm's, a shutting-down machine's) and one of them died of it first. A SIGHUP
(the terminal's hangup) is one too (status 129). A signal the caller ignores on entry (``nohup``,
``trap '' TERM``, a script's ``&`` for SIGINT) stays ignored (:mod:`kolectra.core.stops`); the workers,
which inherit an ignored SIGTERM, are then stopped with SIGKILL (:func:`stop_local_workers`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from typing import Iterator

from kolectra.core import stops
from kolectra.core.errors import Terminated
from kolectra.core.verbosity import VERBOSE
from kolectra.corpus.beam_logging import verbosity
from kolectra.corpus.sigint_relay import SigintRelay, in_signal_mask

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
    ``finally`` runs, removes it too while a Ctrl-C can still quit: until the relay that counts
    them is closed (its thread joined), which for a nested Interruption is its enclosing one's."""

    def __init__(self, owns: str | None = None, on_stop=None):
        self.owns = owns
        self.on_stop = on_stop  # called once the job is stopped, and again at each sweep until it ends
        self.happened = False
        self.failure: BaseException | None = None
        self._previous = None
        self._previous_stops: dict = {}  # the SIGTERM and SIGHUP handlers put back on leaving (the command's)
        self._ctrl_c = True  # a Ctrl-C stops the job (else the caller ignores SIGINT: only the relay's wakes do)
        self._terminated = False
        self._ended = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._sweeper_lock = threading.Lock()
        self._raised = False
        self._relay: SigintRelay | None = None
        self._own_relay = False  # else an enclosing Interruption's, shared: one count of Ctrl-Cs
        self._again_count = 0
        self._released: list[str] = []  # folders let go when the relay closes (nested ones' owns)
        self._leaving = False  # __exit__ under way: a Ctrl-C now waits for its clean-up (_held_back)
        self._entering = False  # __enter__ under way: a signal waits until the handlers and relay are all set
        self._held_back: tuple | None = None

    @property
    def terminated(self) -> bool:
        """A SIGTERM came during the job (seen by its handler, or by the relay's thread, which
        sees it at once whichever thread the kernel gave it to)."""
        return self._terminated or (self._relay is not None and self._relay.terminated.is_set())

    def stopped(self, what: str) -> KeyboardInterrupt:
        """The exception that ends a job stopped from outside: :class:`Terminated` after a SIGTERM
        (``what`` then says "terminated"), else KeyboardInterrupt."""
        return (Terminated(what.replace("interrupted", "terminated" + stops.why(), 1)) if self.terminated
                else KeyboardInterrupt(what))

    def terminated_soon(self, timeout: float) -> bool:
        """Whether a SIGTERM came, waiting up to ``timeout`` for one: a worker killed by SIGTERM was
        most likely stopped with the launcher (a process group's signal), whose own may be read a
        moment after the worker's death was."""
        return self.terminated or (self._relay is not None and self._relay.terminated.wait(timeout))

    def _handler(self, signum, frame):
        if signum in stops.STOPS:
            stops.note(signum)
            self._terminated = True
        elif not self._ctrl_c and not self.terminated and self.failure is None:
            return  # the caller ignores Ctrl-C: a SIGINT is the job's only as a wake (a stop signal, fail())
        if self._raised:  # the relay's repeat, or Ctrl-C again (counted by the relay: _again): unwinding already
            return
        if self._entering or self._leaving:  # raised here it would leave the handlers and the relay in place
            if self.failure is None:  # the user's (else fail()'s wake: the job has ended already)
                # a SIGTERM wins: the relay wakes this thread for one with a SIGINT, whose handler runs first
                self._held_back = (stops.received(), frame) if self.terminated else self._held_back or (signum, frame)
                self.happened = True
            return
        self._raised = True
        term = self.terminated
        if self._relay is not None:
            self._relay.acted(on_ctrl_c=self.failure is None and not term)
        if self.failure is not None and not term:  # sent by fail(): the workers are stopped already
            raise self.failure
        self.happened = True
        # Local workers ignore SIGINT (corpus/worker.py) and would finish their bundle (up to a
        # whole stage) before the runner could tear down: stop them now, quietly
        self._stop_workers()
        previous = self._previous_stops.get(signum) if signum in stops.STOPS else self._previous
        if isinstance(getattr(previous, "__self__", None), Interruption) or (
                signum == signal.SIGINT and callable(previous) and previous is not signal.default_int_handler):
            previous(signum, frame)  # an enclosing Interruption: its flag too
        raise Terminated() if term else KeyboardInterrupt

    def fail(self, error: BaseException) -> None:
        """Stop the job with ``error`` (from any thread): the other local workers are stopped and
        the main thread, wherever Beam has it wait, is woken by a SIGINT that this handler turns
        into ``error``. Ignored after Ctrl-C, SIGTERM or a first failure."""
        if self.happened or self.terminated or self.failure is not None:
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
            # A signal now is held back until all is set, then raised as one on leaving is: raised in the
            # middle, the handlers stayed installed and the relay ran on (no __exit__), and a SIGTERM whose
            # relayed SIGINT came before the relay was ours was taken for a Ctrl-C (exit 130, "interrupted")
            self._entering = True
            self._ctrl_c = not stops.ignored(signal.SIGINT)  # SIGINT's handler is set all the same: the wakes need it
            self._previous = signal.signal(signal.SIGINT, self._handler)
            self._previous_stops = stops.catch(self._handler)
            outer = getattr(self._previous, "__self__", None)
            if isinstance(outer, Interruption) and outer._relay is not None:  # noqa: SLF001 - same class
                self._relay = outer._relay  # noqa: SLF001 - same class
                self._released = outer._released  # noqa: SLF001 - its relay closes: then ours go too
                self._ctrl_c = outer._ctrl_c  # noqa: SLF001 - what the caller's SIGINT was
            else:
                self._relay = SigintRelay(STOP_SWEEP_S, again=self._again, ctrl_c=self._ctrl_c)
                self._own_relay = True
            self._entering = False
            if self._held_back is not None:  # stopped before the job began: all undone, then raised as on leaving
                term = self.terminated  # (the relay's flag: its SIGINT may have come before the SIGTERM's handler)
                self._held_back = (stops.received() if term else signal.SIGINT, self._held_back[1])
                self.__exit__(None, None, None)  # the handler put back raises it (the command's, an enclosing one's)
                raise Terminated() if term else KeyboardInterrupt  # one that raises nothing (SIG_DFL, SIG_IGN)
        return self

    def _stop_workers(self) -> None:
        """Stop the local workers now, and every one started from now until the job has ended.
        Beam starts each worker from a thread of its own, so on a loaded machine one can start
        after this first sweep (even after the others died); its teardown then waits for that
        worker forever. So the workers are looked for again every :data:`STOP_SWEEP_S` until
        :meth:`__exit__`, which comes only after Beam's teardown."""
        quiet_beam_threads()
        stop_local_workers()
        if self.on_stop is not None:
            self.on_stop()
        with self._sweeper_lock:
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep, name="kolectra-stop-workers", daemon=True)
                self._sweeper.start()

    def _sweep(self) -> None:
        while not self._ended.wait(STOP_SWEEP_S):
            stop_local_workers()
            if self.on_stop is not None:
                self.on_stop()

    def __exit__(self, *exc) -> None:
        self._leaving = True
        self._ended.set()
        if self.owns:
            self._released.append(self.owns)
        if self._own_relay:
            # A Ctrl-C that quits runs in the relay's thread, possibly while this thread leaves the
            # job after all (the stop ended): the owned folders stay quit_at_once's to remove until
            # that thread is joined, and are the owners' `finally`'s after
            self._relay.close()
            _OWNED.difference_update(self._released)
        elif self._relay is None:  # not the main thread: no relay, no quit
            _OWNED.difference_update(self._released)
        if self._sweeper is not None:
            self._sweeper.join()
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        stops.put_back(self._previous_stops)
        held = self._held_back and (self._previous_stops.get(self._held_back[0]) if self._held_back[0] in stops.STOPS
                                    else self._previous)
        if held and callable(held):  # a Ctrl-C (SIGTERM) while the job was left: the handler put back
            held(*self._held_back)  # gets it, as a moment later (no byte for a shared relay)


@contextlib.contextmanager
def interruptible(what: str) -> Iterator[Interruption]:
    """Run a Beam job inside: Ctrl-C ends it as one ``KeyboardInterrupt(what)``, however Beam
    wrapped it (in-process bundles re-raise it as ``RuntimeError: KeyboardInterrupt [while
    running ...]``), with the local workers stopped and their threads' tracebacks silenced."""
    with Interruption() as ctrl_c:
        try:
            yield ctrl_c
        except BaseException:
            if not (ctrl_c.happened or ctrl_c.terminated):
                raise
            raise ctrl_c.stopped(what) from None


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
    elsewhere than Linux, none (the workers then finish their bundles first). A worker that
    ignores ``how`` (it inherits a SIGTERM the caller ignored: ``trap '' TERM``) gets SIGKILL."""
    return sum(_signalled(pid, signal.SIGKILL if _ignores(pid, how) else how) for pid in _proc_children(os.getpid()))


def _ignores(pid: int, signum: int) -> bool:
    """Whether ``pid`` ignores ``signum``: its ``SigIgn`` mask in /proc."""
    return in_signal_mask(f"/proc/{pid}/status", b"SigIgn:", signum)


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
