"""Ctrl-C during pretraining: the first press loses no trained step, a second stops at once.

Python's own Ctrl-C (``KeyboardInterrupt`` raised at once) lost every step since the last
``--save-every`` checkpoint, and a press after the run's last step, while its weights were exported,
hashed and renamed into place, lost the whole finished run. While a :func:`window` is open (``kolectra
pretrain``: the store's build; the trainer opens one of its own when called alone) the SIGINT handler
here acts by what the run is doing:

- :data:`NOW` (loading, compiling, the first step, the store's preparation): ``KeyboardInterrupt`` at
  once, as Python's handler raises it; nothing newer than the last checkpoint exists to save.
- :data:`STEP` (once a step of this process is done: :class:`kolectra.model.preempt.StopAtStepEnd`): the
  first press asks the loop to stop at a step's end, as a SIGTERM does; the loop saves a checkpoint of
  that step and ends with status 130 (``interrupted (Ctrl-C) after step N of M, saved as ...``).
- :data:`FINISH` (the last step is done: the weights are final): the first press lets the run's export,
  hashes and publish finish (seconds on a local root: a third of a checkpoint's bytes, and nothing left
  for a ``--resume`` to load), then the command ends with status 130, saying it was published. A stop
  signal (SIGTERM, SIGHUP: :mod:`kolectra.core.stops`) in this mode is taken the same way, and the
  command then ends as that signal's stop (143, 129: :class:`~kolectra.core.errors.Terminated`): in a
  preemption's grace period the export fits where a checkpoint (what a SIGTERM saves before the last
  step) would, and it leaves the finished run, not a checkpoint to ``--resume`` only to export it.

The first press prints one line at once (rank 0 only); every later press raises ``KeyboardInterrupt`` at
once, which cuts a checkpoint's save short as a second SIGTERM does (its partial folder removed). Under
torchrun a press reaches each rank twice, from the terminal (the foreground process group) and from
torchrun, which sends every rank the signal it stopped on; a rank cannot tell the two apart (the
handler is told no sender), so there later presses are left to torchrun: a second Ctrl-C cuts its
shutdown short, after which it sends every rank SIGTERM (a second stop: at once), and it ends them with
SIGKILL once its ``--shutdown_timeout`` (30 s) runs out.

The handler is installed only where Python's own is found (a caller's handler, or a SIGINT the caller
ignores, is left alone) and only from the main thread; FINISH's stop-signal handler wherever the caller
does not ignore that signal (:func:`kolectra.core.stops.catch`), so a job whose SIGINT is ignored (a
script's ``&``) still finishes its publish on a SIGTERM. A second stop signal (or a stop signal after a
press) stops at once, as it does mid-run. This module imports only ``core/stops.py`` and
``core/errors.py``, which import nothing of kolectra's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator

from kolectra.core import stops
from kolectra.core.errors import Terminated

NOW, STEP, FINISH = "now", "step", "finish"
FINISHED = "kolectra_finished_first"  # set (True) on the KeyboardInterrupt raised once a pressed run was published


class Window:
    """An open :func:`window`; ``words``: what the message the command ends with after a press (or a stop
    signal) in :data:`FINISH` says after ``interrupted (Ctrl-C)`` or ``terminated (SIGTERM)``."""

    def __init__(self) -> None:
        self.words = "after the run's last step: its export was completed first"


_depth = 0  # nested windows (the store's build around the trainer's own)
_previous: object = None  # the handler the outermost window replaced (None: none installed)
_mode = NOW
_presses = 0  # presses since the mode left NOW
_request: Callable[[], bool] | None = None  # STEP: the loop's request (False: refused, stop at once)
_line: Callable[[], str | None] | str | None = None  # the first press's line (None: not this rank's to print)
_signal: int | None = None  # FINISH: the stop signal that asked first (None: a Ctrl-C, or nothing yet)
_stop_previous: dict[int, object] = {}  # FINISH: the stop signals' handlers it replaced (at_once puts them back)


def _torchrun() -> bool:
    return bool(os.environ.get("TORCHELASTIC_RUN_ID"))


def _handler(signum, frame) -> None:
    global _presses
    if _mode == NOW:
        raise KeyboardInterrupt
    _presses += 1
    if _presses == 1:
        if _mode == STEP and _request is not None and not _request():
            raise KeyboardInterrupt  # (a SIGTERM asked first: this is a second stop)
        _say(_line() if callable(_line) else _finish_line(None))
        return
    if _torchrun():  # torchrun's own copy of the press the terminal sent: its timeout ends the ranks
        return
    raise KeyboardInterrupt


def _stop(signum, frame) -> None:
    """FINISH's handler of SIGTERM and SIGHUP: the first stop (signal or press) lets the publish finish."""
    global _presses, _signal
    stops.note(signum)
    _presses += 1
    if _presses > 1:
        raise Terminated()  # a second stop: at once, as the command's own handler does (pipeline/cli/errors.py)
    _signal = signum
    _say(_finish_line(signum))


def _finish_line(signum: int | None) -> str | None:
    """FINISH's line (its ``{0}``: the stop's name) for the stop ``signum`` (None: Ctrl-C)."""
    if not isinstance(_line, str):
        return None
    return _line.format(signal.Signals(signum).name if signum else "Ctrl-C")


def _say(line: str | None) -> None:
    """The line, at once, in one write to the file descriptor: a handler that printed through ``sys.stderr``
    could land inside the main thread's own write to it (a reentrant call the buffer refuses)."""
    if not line:
        return
    lead = "\n" if _tty() else ""  # below the terminal's ^C and any progress bar, not glued to them
    with contextlib.suppress(OSError):
        os.write(2, f"{lead}[kolectra] {line}\n".encode("utf-8", "replace"))


def _tty() -> bool:
    with contextlib.suppress(OSError, ValueError):
        return os.isatty(2)
    return False


@contextlib.contextmanager
def window() -> Iterator[Window]:
    """The span where this module answers Ctrl-C; the outermost one puts the previous handler back and,
    once its body ends without an error after a press in :data:`FINISH`, raises ``KeyboardInterrupt(words)``."""
    global _depth, _previous
    opened = Window()
    outermost = _depth == 0
    if outermost and threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        _previous = signal.signal(signal.SIGINT, _handler)
    _depth += 1
    try:
        yield opened
        finished = outermost and _mode == FINISH and _presses > 0
        signum = _signal
    finally:
        _depth -= 1
        if outermost:
            if _previous is not None:
                signal.signal(signal.SIGINT, _previous)
                _previous = None
            at_once()
    if finished:
        stop = (Terminated(f"terminated ({signal.Signals(signum).name}) {opened.words}") if signum
                else KeyboardInterrupt(f"interrupted (Ctrl-C) {opened.words}"))
        setattr(stop, FINISHED, True)  # (kolectra run counts the stage among those kept)
        raise stop


def can_finish() -> bool:
    """A window is open in the main thread: :func:`let_finish` can hold back a Ctrl-C or a stop signal."""
    return _depth > 0 and threading.current_thread() is threading.main_thread()


def active() -> bool:
    """A window's handler is in place (else a press is Python's own: at once)."""
    return _previous is not None and signal.getsignal(signal.SIGINT) is _handler


def at_step_end(request: Callable[[], bool], line: Callable[[], str | None]) -> None:
    """:data:`STEP`: the first press calls ``request()`` (its own stop flag) and prints ``line()``."""
    global _mode, _presses, _request, _line
    _mode, _presses, _request, _line = STEP, 0, request, line


def let_finish(line: str | None, pressed: bool = False, signum: int | None = None) -> None:
    """:data:`FINISH`: the run's steps are done (call where :func:`can_finish`); ``line``: what a first stop
    prints, ``{0}`` for its name (None: not this rank's to print). ``pressed``: a stop asked during the last
    step, which counts as this mode's first: a press (its line printed then) or, ``signum``, a stop signal
    (its line printed now: the loop's handler prints nothing)."""
    global _mode, _presses, _request, _line, _signal, _stop_previous
    _mode, _presses, _request, _line, _signal = FINISH, int(pressed), None, line, signum if pressed else None
    if not _stop_previous and threading.current_thread() is threading.main_thread():
        _stop_previous = stops.catch(_stop)  # (the command's own handler, found again: the loop's put back)
    if _signal:
        _say(_finish_line(_signal))


def at_once() -> None:
    """:data:`NOW`: a press raises at once (and a stop signal, by the handler FINISH found)."""
    global _mode, _presses, _request, _line, _signal, _stop_previous
    _mode, _presses, _request, _line, _signal = NOW, 0, None, None, None
    if _stop_previous:
        stops.put_back(_stop_previous)
        _stop_previous = {}


def mode() -> str:
    return _mode

