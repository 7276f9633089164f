"""The store's request locks, ``ROOT/.locks/<kind>-<id>.lock`` (what they are: :mod:`.workspace`), and the
``flock`` helpers the store's other locks use."""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import Callable, Iterator

from kolectra.core import url_secrets
from kolectra.core.stage import progress

LOCKS = ".locks"


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ---- locks --------------------------------------------------------------------------------------
def try_flock(path: Path, wait: bool, on_wait: Callable[[dict], None] | None = None) -> int | None:
    """An fd holding an exclusive flock on ``path``, or None (held elsewhere and not ``wait``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                os.close(fd)
                return None
            if on_wait is not None:
                on_wait(holder(path))
                on_wait = None
            fcntl.flock(fd, fcntl.LOCK_EX)  # an interrupt lands here as KeyboardInterrupt: fd is closed below
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder deleted the file while we waited on it: lock the new one


def release_flock(path: Path, fd: int) -> None:
    """Let go the flock :func:`try_flock` took, deleting its file first."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # while still held: a waiter on this inode sees it gone and retries
    os.close(fd)


def holder(path: Path) -> dict:
    """A small JSON object kolectra wrote (a lock's holder, a run's ``request.json``); {} for anything
    else: missing, cut short by a kill, or not an object."""
    try:
        found = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError, RecursionError):  # ValueError: bad JSON, bad UTF-8, a 4,300-digit integer
        return {}
    return found if isinstance(found, dict) else {}


@contextlib.contextmanager
def request_lock(root: Path, kind: str, aid: str) -> Iterator[None]:
    """Hold the lock of request ``kind``/``aid``; wait (saying for whom) while another process has it."""
    path = root / LOCKS / f"{kind}-{aid}.lock"

    def waiting(h: dict) -> None:
        who = f"pid {h.get('pid', '?')} on {h.get('host', '?')} since {h.get('since', '?')}"
        progress(f"{kind}: another run ({who}) is building the same request {aid}; waiting for it to finish "
                 "(Ctrl-C stops waiting)")

    fd = try_flock(path, wait=True, on_wait=waiting)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": now(),
                                 "argv": url_secrets.redacted(" ".join(["kolectra", *sys.argv[1:]]))}).encode())
        yield
    finally:
        release_flock(path, fd)


@contextlib.contextmanager
def try_lock(root: Path, kind: str, aid: str) -> Iterator[bool]:
    """Hold the lock of ``kind``/``aid`` if nobody does; yields whether it was taken."""
    path = root / LOCKS / f"{kind}-{aid}.lock"
    fd = try_flock(path, wait=False)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            release_flock(path, fd)
