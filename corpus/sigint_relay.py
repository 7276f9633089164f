"""A Ctrl-C that the launcher's main thread slept through is sent to it again, until it acts
(``corpus/runners.py``'s ``Interruption``).

Python runs a signal's handler only in the main thread, and only once that thread runs Python
code again; the signal itself only sets a flag (the ``signal`` module's docs, "Signals and
threads"). The kernel hands a process a SIGINT through any one of its threads that does not block
it (signal(7)), and a main thread about to go to sleep in a wait when it comes goes to sleep all
the same. Beam's runner keeps its main thread in untimed waits for a bundle's results, so the
job's handler ran only once that bundle ended (a whole stage of a large job), or never when the
bundle waited for a worker that Beam had not started yet (docs/corpus.md, "Ctrl-C").

:class:`SigintRelay` has the interpreter's C handler write each signal's number to a socket
(``signal.set_wakeup_fd``), whichever thread it ran in; a thread of its own reads them and, after
a SIGINT, sends SIGINT to the main thread itself (``signal.pthread_kill``, which wakes it from its
wait) every ``every`` seconds until :meth:`acted` says the handler ran.
"""

from __future__ import annotations

import signal
import socket
import threading


class SigintRelay:
    """From construction (in the main thread) until :meth:`close`, a SIGINT reaches the main
    thread's handler within about ``every`` seconds, however the main thread waits. Another
    wakeup fd (asyncio's) is set aside meanwhile and put back by :meth:`close`."""

    def __init__(self, every: float):
        self.every = every
        self._main = threading.main_thread().ident
        self._acted = threading.Event()
        self._closed = threading.Event()
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)  # the C handler must never block on it
        self._previous = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._relay, name="kolectra-sigint-relay", daemon=True)
        self._thread.start()

    def acted(self) -> None:
        """The main thread's handler ran: no more SIGINTs are sent to it."""
        self._acted.set()

    def _relay(self) -> None:
        while data := self._read.recv(64):  # b"" once close() closed the other end
            while int(signal.SIGINT) in data and not (self._acted.is_set() or self._closed.is_set()):
                signal.pthread_kill(self._main, signal.SIGINT)  # its byte comes back here: ignored once acted
                self._acted.wait(self.every)

    def close(self) -> None:
        """Stop relaying, and put the previous wakeup fd back (from the main thread)."""
        self._closed.set()
        signal.set_wakeup_fd(self._previous)
        self._write.close()
        self._thread.join()
        self._read.close()
