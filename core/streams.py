"""stderr whose reader is gone: the diagnostics are lost, never the command's work or its status.

``kolectra pretrain ... 2>&1 | tee log`` stopped by its process group's SIGTERM (systemd's stop, Slurm's,
a Ctrl-C at the terminal: tee ends with kolectra) writes its next progress line to a pipe nobody reads.
Python ignores SIGPIPE, so the write raised BrokenPipeError wherever the line was written: in the
training step's log line, before the step SIGTERM asked for was saved, ending the command with status 0
or 1 instead of 143. :func:`lost` points the stream's file descriptor at the null device, so that this
line, what is still buffered and every later one (other threads', the interpreter's flush at exit) go
nowhere, and the command goes on as it would with a reader. A terminal that hung up (an SSH session
that dropped: its SIGHUP stops the command as SIGTERM does, :mod:`kolectra.core.stops`) is one too: a
write to it fails with EIO, which ended ``kolectra pretrain`` with status 1 before its step was saved.

A stream closed before the command started (``>&-``, ``2>&-``, ``<&-``) is one from the start:
:func:`closed_to_null` gives its descriptor the null device before anything runs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys


def gone(e: BaseException) -> bool:
    """A write failed because nobody can read the stream: a pipe whose reader closed it, a terminal
    that hung up (EIO)."""
    return isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EIO)


def lost(stream) -> None:
    """``stream`` (sys.stderr) from now on writes to the null device: its reader has closed the pipe."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no descriptor (a test's capture): nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    with contextlib.suppress(OSError, ValueError):
        stream.flush()  # what the failed write left buffered goes to the null device


_STANDARD = (("stdin", 0, os.O_RDONLY, "r"), ("stdout", 1, os.O_WRONLY, "w"), ("stderr", 2, os.O_WRONLY, "w"))


def closed_to_null() -> None:
    """A standard stream closed when the process started (``>&-``, ``2>&-``, ``<&-``; Python leaves
    ``sys.stdout`` None then) reads or writes the null device, as a reader gone does: ``kolectra vocab
    ... >&-`` built its vocab and ended 'internal error: AttributeError' (the flush of a stdout that
    was None), and with ``2>&-`` every line written for stderr went to stdout (``print(file=None)``).
    The descriptor itself is filled too, before anything opens a file: else the first file opened
    takes its number, and a child (Beam's workers) inherits that file as its stdout. Call first."""
    for name, fd, flags, mode in _STANDARD:
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
            continue  # open again since the start (not by kolectra): left as it is
        except OSError:
            pass
        with contextlib.suppress(OSError):
            null = os.open(os.devnull, flags)  # the lowest free number: fd, the lower ones filled already
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False))  # noqa: SIM115


def say(line: str) -> None:
    """``line`` on stderr, or nowhere once its reader is gone (:func:`gone`): never the command's failure."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError as e:
        if not gone(e):
            raise
        lost(sys.stderr)
