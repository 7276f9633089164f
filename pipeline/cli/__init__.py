"""The ``kolectra`` command line: :mod:`.commands` holds the table of every command (:data:`COMMANDS`, the
whole surface) and its ``main``; :mod:`.options` the options they share, :mod:`.stages` (the building
commands), :mod:`.outputs` (``report``, ``export``), :mod:`.finetune`, :mod:`.study` and :mod:`.artifacts`
the commands, :mod:`.checks` what is refused before a command runs, and :mod:`.errors` how a command
ends when something goes wrong.

``kolectra`` (the installed script), ``python -m kolectra`` and ``python -m kolectra.pipeline.cli`` call
:func:`entry`: :func:`main`, then the process's end without the interpreter freeing every module
(:mod:`.exiting`: about 2 CPU s once torch is imported).
This module imports nothing of kolectra's until then (but :mod:`kolectra.core.errors`, which imports
nothing): the installed script imports it before it calls :func:`main`, and a Ctrl-C during
:mod:`.commands`' imports and its parser (about 0.5 s, before a command's own handler is in place)
printed a KeyboardInterrupt traceback from the import machinery.
A SIGTERM then (a scheduler's stop as the job starts) ended the process by the signal with nothing
written, so the job's log had no trace of it: :func:`main` turns it into :class:`Terminated` until
the command's handler takes over, and puts the disposition it found back when it returns.
A SIGHUP (the terminal's hangup) is one too, unless the caller ignores it (``nohup``): :mod:`kolectra.core.stops`.
A standard stream closed on entry (``>&-``) is the null device from the first line of :func:`main`
(:func:`kolectra.core.streams.closed_to_null`).
"""

from __future__ import annotations

import os
import sys
import threading

from kolectra.core import stops, streams  # (import nothing of kolectra's either)
from kolectra.core.errors import BY_TORCHRUN, Terminated  # no import of its own: the handler needs it at once

__all__ = ["COMMANDS", "build_parser", "entry", "main"]

STARTING_LINE = "kolectra: interrupted while starting; nothing was done"
TERMINATED_LINE = "kolectra: terminated while starting; nothing was done"


def main(argv: list[str] | None = None) -> int:
    """The command's exit status (:func:`kolectra.pipeline.cli.commands.main`); a Ctrl-C or a SIGTERM
    before the command's handler is in place (:func:`kolectra.pipeline.cli.errors.handled`) is one
    line, 130 or 143 (129: a SIGHUP)."""
    streams.closed_to_null()
    stops.forget()
    found = _terminated_while_starting()
    try:
        from kolectra.pipeline.cli import commands  # noqa: PLC0415 - here, so that a Ctrl-C in it is caught

        return commands.main(argv)
    except KeyboardInterrupt as e:  # Terminated too (a KeyboardInterrupt, so that clean-up runs)
        errors = sys.modules.get("kolectra.pipeline.cli.errors")  # imported by then, unless cut short itself
        if not getattr(errors, "ENTERED", False):  # else its line is out (Ctrl-C again as it was said)
            try:
                print(TERMINATED_LINE.replace("terminated", "terminated" + stops.why(), 1) + (BY_TORCHRUN if os.environ.get("TORCHELASTIC_RUN_ID") else "")
                      if isinstance(e, Terminated) else STARTING_LINE, file=sys.stderr, flush=True)
            except OSError as err:  # stderr's reader is gone (a terminal hung up): the status still says it
                if not streams.gone(err):
                    raise
                streams.lost(sys.stderr)
        return stops.status() if isinstance(e, Terminated) else 130  # errors.EXIT_INTERRUPTED
    finally:
        stops.put_back(found)


def entry() -> None:
    """The command as a process: :func:`main`'s status, the process ended by :func:`.exiting.exit_now`."""
    code = main()
    from kolectra.pipeline.cli.exiting import exit_now  # noqa: PLC0415 - standard library alone

    exit_now(code)


def _terminate(signum, frame):
    stops.note(signum)
    raise Terminated()


def _terminated_while_starting():
    """SIGTERM and SIGHUP raise :class:`Terminated` from now on (``handled`` puts this back when its
    command is done, and :func:`main` the dispositions found); the dispositions found, of those not left
    alone: a thread other than the main one cannot set handlers, and an ignored signal (or a handler of
    a caller's own, kolectra called as a library) is the caller's choice."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return stops.catch(_terminate, only_default=True)


def __getattr__(name: str):
    """``COMMANDS`` and ``build_parser``, from :mod:`.commands` when first asked for."""
    if name in ("COMMANDS", "build_parser"):
        from kolectra.pipeline.cli import commands  # noqa: PLC0415

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
