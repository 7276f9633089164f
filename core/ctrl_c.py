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
  for a ``--resume`` to load), then the command ends with status 130, saying it was published.

The first press prints one line at once (rank 0 only); every later press raises ``KeyboardInterrupt`` at
once, which cuts a checkpoint's save short as a second SIGTERM does (its partial folder removed). Under
torchrun a press reaches each rank twice, from the terminal (the foreground process group) and from
torchrun, which sends every rank the signal it stopped on; a rank cannot tell the two apart (the
handler is told no sender), so there later presses are left to torchrun: a second Ctrl-C cuts its
shutdown short, after which it sends every rank SIGTERM (a second stop: at once), and it ends them with
SIGKILL once its ``--shutdown_timeout`` (30 s) runs out.

The handler is installed only where Python's own is found (a caller's handler, or a SIGINT the caller
ignores, is left alone) and only from the main thread. This module imports nothing of kolectra's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator

NOW, STEP, FINISH = "now", "step", "finish"
FINISHED = "kolectra_finished_first"  # set (True) on the KeyboardInterrupt raised once a pressed run was published


class Window:
    """An open :func:`window`; ``words``: the message the command ends with after a press in :data:`FINISH`."""

    def __init__(self) -> None:
        self.words = "interrupted (Ctrl-C) after the run's last step: its export was completed first"


_depth = 0  # nested windows (the store's build around the trainer's own)
_previous: object = None  # the handler the outermost window replaced (None: none installed)
_mode = NOW
_presses = 0  # presses since the mode left NOW
_request: Callable[[], bool] | None = None  # STEP: the loop's request (False: refused, stop at once)
_line: Callable[[], str | None] | str | None = None  # the first press's line (None: not this rank's to print)


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
        _say(_line() if callable(_line) else _line)
        return
    if _torchrun():  # torchrun's own copy of the press the terminal sent: its timeout ends the ranks
        return
    raise KeyboardInterrupt


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
    finally:
        _depth -= 1
        if outermost:
            if _previous is not None:
                signal.signal(signal.SIGINT, _previous)
                _previous = None
            at_once()
    if finished:
        stop = KeyboardInterrupt(opened.words)
        setattr(stop, FINISHED, True)  # (kolectra run counts the stage among those kept)
        raise stop


def active() -> bool:
    """A window's handler is in place (else a press is Python's own: at once)."""
    return _previous is not None and signal.getsignal(signal.SIGINT) is _handler


def at_step_end(request: Callable[[], bool], line: Callable[[], str | None]) -> None:
    """:data:`STEP`: the first press calls ``request()`` (its own stop flag) and prints ``line()``."""
    global _mode, _presses, _request, _line
    _mode, _presses, _request, _line = STEP, 0, request, line


def let_finish(line: str | None, pressed: bool = False) -> None:
    """:data:`FINISH`: the run's steps are done; ``pressed``: a press asked it to stop during the last step
    (its line printed then), which counts as this mode's first."""
    global _mode, _presses, _request, _line
    _mode, _presses, _request, _line = FINISH, int(pressed), None, line


def at_once() -> None:
    """:data:`NOW`: a press raises at once."""
    global _mode, _presses, _request, _line
    _mode, _presses, _request, _line = NOW, 0, None, None


def mode() -> str:
    return _mode

