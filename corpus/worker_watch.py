"""A local Beam job whose worker process dies fails at once, in one line (``corpus/runners.py``).

Beam's FnApiRunner starts each worker process from a thread of its own (``run_worker``) that
waits for the process and, when it exits non-zero, raises ``RuntimeError: Worker subprocess
exited with return code N`` in that thread, where nobody catches it: the traceback is printed and
the runner goes on waiting for the dead worker's answers. If the worker died before it connected
(killed while loading Kiwi, say), nothing else ever notices and the job hangs at 0 records.

:class:`WorkerWatch` catches that exception as it ends the thread (``threading.excepthook``) and
hands a :class:`WorkerDied` to a callback, which stops the other workers and interrupts the
launcher's main thread (``interruption.Interruption.fail``). The exception is an ``OSError``: a failure
of the machine the job runs on, reported like a full disk (one line, exit status 2).
"""

from __future__ import annotations

import re
import signal
import threading
from typing import Callable

from kolectra.corpus.beam_local import SEND_THREAD

_EXITED = re.compile(r"Worker subprocess exited with return code (-?\d+)")
_WHY = {signal.SIGKILL: "the kernel's out-of-memory killer, or kill -9",
        signal.SIGSEGV: "a crash in native code", signal.SIGABRT: "a crash in native code",
        signal.SIGTERM: "stopped from outside", signal.SIGHUP: "its terminal hung up"}


class WorkerDied(OSError):
    """A local Beam worker process exited while the job ran; the message says how."""


def exit_status(code: int) -> tuple[str, str]:
    """``was killed by SIGKILL`` or ``exited with status 3``, and the usual cause (or "")."""
    if code >= 0:
        return f"exited with status {code}", ""
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"was killed by signal {-code}", ""
    return f"was killed by {sig.name}", _WHY.get(sig, "")


def died(code: int) -> WorkerDied:
    how, why = exit_status(code)
    return WorkerDied(
        f"a Beam worker process {how} during the job{f' ({why})' if why else ''}, so the job was stopped; "
        "run the same command again (with fewer --direct_num_workers if memory was short)")


def worker_exit_code(exc: BaseException | None) -> int | None:
    """The exit code in Beam's report of a worker process that ended non-zero, else None."""
    if not isinstance(exc, RuntimeError):
        return None
    m = _EXITED.search(str(exc))
    return int(m.group(1)) if m else None


def _broken_channel(exc: BaseException | None) -> bool:
    """A gRPC stream to a worker broke: Beam's reading threads die of it when a worker does,
    often before the worker's own thread reports; the job's failure says the same in one line."""
    return type(exc).__module__.startswith("grpc") and type(exc).__name__ == "RpcError"


class WorkerWatch:
    """Within ``with WorkerWatch(on_death):``, the first worker process that ends non-zero calls
    ``on_death(WorkerDied)`` from its thread; Beam's traceback of it is not printed (the one line
    is the report), nor those of gRPC streams broken by it (``verbose`` prints them). A thread that
    sends a bundle's input to a worker (``corpus/beam_local.py``) and dies of an error calls
    ``on_death`` with that error, after its traceback. Outside, or once :meth:`__exit__` ran, the
    hook passes everything on."""

    def __init__(self, on_death: Callable[[BaseException], None], verbose: bool = False):
        self.on_death = on_death
        self.verbose = verbose
        self.error: WorkerDied | None = None
        self.reported = threading.Event()
        self._active = False
        self._previous = None

    def __enter__(self) -> "WorkerWatch":
        self._previous = threading.excepthook
        self._active = True
        threading.excepthook = self._hook
        return self

    def __exit__(self, *exc) -> None:
        self._active = False
        if threading.excepthook is self._hook:  # else a later hook wraps this one: it stays, inactive
            threading.excepthook = self._previous

    def _hook(self, args) -> None:
        if self._active and args.thread is not None and args.thread.name.startswith(SEND_THREAD):
            # a bundle's input stopped short of its end: its worker would wait for the rest for ever
            self._previous(args)  # not a worker's death: the traceback says what went wrong
            self.reported.set()
            self.on_death(args.exc_value)
            return
        code = worker_exit_code(args.exc_value)
        if not self._active or (code is None and not _broken_channel(args.exc_value)):
            self._previous(args)
            return
        if self.verbose:
            self._previous(args)
        # the first death is the news; the others were stopped because of it
        if code is not None and self.error is None:
            self.error = died(code)
            self.reported.set()
            self.on_death(self.error)
