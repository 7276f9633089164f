"""A Ctrl-C that the launcher's main thread slept through is sent to it again, until it acts
(``corpus/interruption.py``'s ``Interruption``); one that comes after it acted is counted (``again``).

Python runs a signal's handler only in the main thread, and only once that thread runs Python
code again; the signal itself only sets a flag (the ``signal`` module's docs, "Signals and
threads"). The kernel hands a process a SIGINT through any one of its threads that does not block
it (signal(7)), and a main thread about to go to sleep in a wait when it comes goes to sleep all
the same. Beam's runner keeps its main thread in untimed waits for a bundle's results, so the
job's handler ran only once that bundle ended (a whole stage of a large job), or never when the
bundle waited for a worker that Beam had not started yet (docs/corpus.md, "Ctrl-C").

:class:`SigintRelay` has the interpreter's C handler write each signal's number to a socket
(``signal.set_wakeup_fd``), whichever thread it ran in; a thread of its own reads them and, after
a SIGINT, sends SIGINT to the main thread itself (:meth:`SigintRelay.wake`: ``signal.pthread_kill``,
which wakes it from its wait) every ``every`` seconds until :meth:`acted` says the handler ran.

After that, the main thread is stopping the job and may be stuck there (in Beam's teardown, which
waits for its workers), where no handler of its own would run: a further Ctrl-C is seen here, in
this thread, which calls ``again()``. The C handler writes one byte for every SIGINT, the user's
and the ones sent by :meth:`wake` alike; the latter are counted as they are sent, so that a byte
is the user's only when more came than were sent (a byte read before its own send is counted the
other way round: the count, not the order, is what matters). The user's first one is the Ctrl-C
the handler acted on, whether the handler ran before this thread read its byte or after; a stop
that was no Ctrl-C (``acted(on_ctrl_c=False)``) owes none. No SIGINT is sent while the last one
sent is still pending in the main thread (:func:`_pending_in`): the kernel keeps one pending signal
of a kind per thread, so merged sends would come back as one byte, and each one counted but never
read would take one of the user's later presses for it.

A SIGTERM (a scheduler's stop, a preempted machine's, ``kill``) is relayed the same way, through
the same SIGINT to the main thread, once :attr:`SigintRelay.terminated` is set: the handler that
runs then stops the job as for Ctrl-C and says it was terminated. It is never counted as a press.
A SIGHUP (the terminal's hangup) is relayed as a SIGTERM is (:mod:`kolectra.core.stops`).

Where the caller ignores Ctrl-C (SIG_IGN on entry: a script's ``kolectra corpus ... &``), the job still
needs a SIGINT handler for the wakes (a SIGTERM, a worker that died), but a SIGINT of the user's is
not relayed (``ctrl_c=False``): the job's handler then acts on the wakes alone.
"""

from __future__ import annotations

import signal
import socket
import threading
from typing import Callable

from kolectra.core import stops


class SigintRelay:
    """From construction (in the main thread) until :meth:`close`, a SIGINT reaches the main
    thread's handler within about ``every`` seconds, however the main thread waits, and each
    SIGINT after :meth:`acted` calls ``again`` (in this relay's thread). Another wakeup fd
    (asyncio's) is set aside meanwhile and put back by :meth:`close`."""

    def __init__(self, every: float, again: Callable[[], None] | None = None, ctrl_c: bool = True):
        self.every = every
        self.ctrl_c = ctrl_c  # the user's SIGINTs are relayed (else the caller ignores them: only wakes are)
        self._again = again
        self._main = threading.main_thread().ident
        self._main_tid = threading.main_thread().native_id
        self._acted = threading.Event()
        self.terminated = threading.Event()  # a SIGTERM came (set before the main thread is woken for it)
        self._closed = threading.Event()
        self._sent = 0  # SIGINTs sent by wake() whose byte has not been read yet
        self._sent_lock = threading.Lock()
        self._pressed = 0  # the user's SIGINTs read
        self._owed = 1  # of those, the ones the handler acted on (set by acted())
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)  # the C handler must never block on it
        self._previous = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._relay, name="kolectra-sigint-relay", daemon=True)
        self._thread.start()

    def acted(self, on_ctrl_c: bool = True) -> None:
        """The main thread's handler ran (for a Ctrl-C, or for :meth:`wake`): no more SIGINTs are
        sent to it, and every later Ctrl-C calls ``again``."""
        with self._sent_lock:
            if not self._acted.is_set():
                self._owed = 1 if on_ctrl_c else 0
                self._acted.set()

    def wake(self) -> None:
        """Send SIGINT to the main thread (from any thread): its handler runs, not counted as a Ctrl-C.
        Not while the last one sent is still pending there: the kernel keeps one pending signal of
        a kind per thread, so a second would write no byte of its own, and the count of sends it
        added would take the user's next Ctrl-C for it (as many as were merged)."""
        with self._sent_lock:  # fail()'s wake and the relay's: one check-and-send at a time
            if _pending_in(self._main_tid, signal.SIGINT):
                return
            self._sent += 1
            signal.pthread_kill(self._main, signal.SIGINT)

    def _users(self) -> bool:
        """Whether a SIGINT byte just read is the user's (else one of :meth:`wake`'s, counted off)."""
        with self._sent_lock:
            if self._sent:
                self._sent -= 1
                return False
            self._pressed += 1
            return True

    def _relay(self) -> None:
        while data := self._read.recv(64):  # b"" once close() closed the other end
            for byte in data:
                if byte != signal.SIGINT and byte not in stops.STOPS:
                    continue
                if self._closed.is_set():
                    return
                if byte in stops.STOPS:
                    stops.note(byte)
                    self.terminated.set()
                users = byte == signal.SIGINT and self._users()
                if users and not self.ctrl_c:  # the caller ignores Ctrl-C: not the job's to act on
                    continue
                while not (self._acted.is_set() or self._closed.is_set()):
                    self.wake()  # its byte comes back here: one of ours
                    self._acted.wait(self.every)
                if users and self._acted.is_set() and self._pressed > self._owed and self._again is not None:
                    self._again()  # Ctrl-C while the job is stopping

    def close(self) -> None:
        """Stop relaying, and put the previous wakeup fd back (from the main thread)."""
        self._closed.set()
        signal.set_wakeup_fd(self._previous)
        self._write.close()
        self._thread.join()
        self._read.close()


def _pending_in(tid: int, signum: int) -> bool:
    """Whether ``signum`` is pending in thread ``tid`` of this process (sent to that thread, as
    ``pthread_kill`` sends, and not yet taken): its ``SigPnd`` mask in /proc. Elsewhere than Linux,
    False."""
    return in_signal_mask(f"/proc/self/task/{tid}/status", b"SigPnd:", signum)


def in_signal_mask(status: str, field: bytes, signum: int) -> bool:
    """Whether ``signum``'s bit is set in the signal mask ``field`` (``SigPnd:``, ``SigIgn:``, ...) of
    the /proc ``status`` file named; False where it cannot be read (elsewhere than Linux)."""
    try:
        with open(status, "rb") as f:
            for line in f:
                if line.startswith(field):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False
