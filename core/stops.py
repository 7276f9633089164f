"""The signals that stop a kolectra command from outside as SIGTERM does, and whose they are to handle.

SIGTERM is a scheduler's, a preempted machine's or ``kill``'s stop; SIGHUP is the terminal's hangup (an
SSH session that dropped, a closed terminal window), which left to its default kills a command as
``kill -9`` does (no checkpoint of its step, no line). Both stop a command the same way (pretrain saves
its step); the status says which (143 = 128 + 15, 129 = 128 + 1).

A signal the caller ignores on entry (``nohup``: SIGHUP; ``trap '' TERM``; a shell's ``&`` in a script:
SIGINT) stays ignored for the whole command: POSIX's rule for a program that installs handlers, and
Python's own for SIGINT. :func:`catch` installs a handler only where the disposition found is not
SIG_IGN; nothing of kolectra's sets SIG_IGN in the launcher's process, so the one found is the caller's.
This module imports nothing of kolectra's (``pipeline/cli/__init__.py`` imports it before anything).
"""

from __future__ import annotations

import signal
from typing import Callable

STOPS = (signal.SIGTERM, signal.SIGHUP)
_HUNG_UP = " (SIGHUP: its terminal hung up)"

_first: int | None = None  # the stop signal this command got first (its exit status, its line's words)


def ignored(signum: int) -> bool:
    """The caller ignores ``signum`` (SIG_IGN): kolectra leaves it ignored."""
    return signal.getsignal(signum) is signal.SIG_IGN


def catch(handler: Callable, signals: tuple[int, ...] = STOPS, only_default: bool = False) -> dict[int, object]:
    """``handler`` for each of ``signals`` the caller does not ignore (only those at SIG_DFL with
    ``only_default``); the dispositions replaced, for :func:`put_back`. Call from the main thread."""
    found = {}
    for signum in signals:
        now = signal.getsignal(signum)
        if now is signal.SIG_IGN or (only_default and now is not signal.SIG_DFL):
            continue
        found[signum] = signal.signal(signum, handler)
    return found


def put_back(found: dict[int, object]) -> None:
    for signum, previous in found.items():
        signal.signal(signum, previous)


def note(signum: int) -> None:
    """A stop signal came (from a handler, or the relay's thread that sees it first)."""
    global _first
    if _first is None and signum in STOPS:
        _first = signum


def forget() -> None:
    """A command begins (kolectra called again in one process): no stop signal yet."""
    global _first
    _first = None


def received() -> int:
    """The stop signal that came (SIGTERM if none was noted)."""
    return _first or signal.SIGTERM


def status() -> int:
    """The exit status of a command a stop signal ended: 143 (SIGTERM), 129 (SIGHUP)."""
    return 128 + (_first or signal.SIGTERM)


def name() -> str:
    """``SIGTERM`` or ``SIGHUP``: the stop signal that came."""
    return signal.Signals(_first or signal.SIGTERM).name


def why() -> str:
    """What a line adds after "terminated" for a hangup (nothing for SIGTERM, whose word it is)."""
    return _HUNG_UP if _first == signal.SIGHUP else ""
