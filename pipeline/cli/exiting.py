"""How the ``kolectra`` process ends once its command has returned (the installed script and ``python -m``:
:func:`kolectra.pipeline.cli.entry`; ``main()`` called as a library returns as before).

The interpreter's own exit does, in this order, what a program relies on: it waits for the threads that are
not daemons (threading's exit hooks first: an executor's workers), runs the ``atexit`` functions (logging's
handlers flushed, ``multiprocessing``'s children joined, ``weakref.finalize`` clean-ups such as a temporary
directory's), flushes ``sys.stdout`` and ``sys.stderr``, and then frees every module and collects what they
held. After torch and transformers are imported that last part alone took about 2 CPU s of every command
that trains, fine-tunes or exports (7.1 -> 4.9 CPU s for a process that imports the trainer and ends:
docs/benchmarks.md, "The CLI's start"), after its artifact was printed. :func:`exit_now` does the first
three, as the interpreter does them, then ends the process with the status.

Where this Python lacks the hooks it calls, or a standard stream cannot be flushed (its reader gone), the
interpreter's own exit runs instead, so its words and status (120 for an unflushable stream) stand.
A Ctrl-C during the wait for threads or the ``atexit`` functions is the interpreter's exit's too:
:func:`kolectra.pipeline.cli.errors` says it in one line (``threading``'s shutdown flag is set first).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` after the interpreter's exit steps that matter, without freeing modules."""
    # CPython's own steps (Py_FinalizeEx: wait_for_thread_shutdown, then atexit); private names, so looked up
    shutdown, run_exitfuncs = getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None:
        sys.exit(code)
    shutdown()  # sets threading's shutting-down flag, runs its exit hooks, joins the non-daemon threads
    run_exitfuncs()  # each once: the list is emptied, so a fall back to sys.exit below does not run them again
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a reader gone, a stream closed: the interpreter says it as it always did
            sys.exit(code)
    os._exit(code)
