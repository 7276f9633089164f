"""kolectra's scratch space in a temporary folder, named for the process that owns it, and the sweep
that removes what killed processes left there.

Every temporary file or folder kolectra makes goes through :func:`mkdtemp`, :func:`mkstemp` or
:func:`temporary_directory`: the corpus launcher's progress and listing folder, a store request's
records file, the Beam workers' spill folders, the vocabulary's counts, a fine-tuning split. Its
name is ``kolectra-<kind>-<pid>-<start>-<host>-<random>[suffix]``: ``pid`` the process that made
it, ``start`` that process's start time (clock ticks since boot, ``/proc/<pid>/stat``; 0 where
there is no ``/proc``), so that a pid the system gave to a later process is not taken for the
owner, ``host`` 8 hex digits of the machine's boot id and the process's pid namespace, so that a
temporary folder several machines or containers share (``TMPDIR`` on NFS, a mounted ``/tmp``)
is swept by each of its own entries only, and ``random`` the ``tempfile`` module's.

``TemporaryDirectory`` and finalizers remove scratch on a normal exit or an exception; after
``kill -9``, an OOM kill or the third Ctrl-C (``os._exit``) nothing runs, and a spill folder of
hundreds of MB stays. :func:`sweep` removes the entries of a folder whose owner is no longer
running on this host (its pid gone, a zombie, or alive with another start time), and nothing
else: not a live process's, not another user's, not another host's, not a name it cannot read
(unstamped ``kolectra-progress-abc123`` folders from before these names, whose owner nothing can
tell: docs/corpus.md). It never follows a symbolic link (one with such a name is unlinked) and
never raises: an entry gone mid-sweep (another process sweeping) is skipped, a failure is one
debug line. :func:`sweep_once` sweeps a folder once a process: the CLI calls it before a command
runs (``pipeline/cli/commands.py``), and the makers above before their first entry in a folder;
``KOLECTRA_SWEEP_SCRATCH=0`` turns it off (the test suite does: a line about another run's leftovers
would be one more line in the output its tests read; tests/test_scratch.py turns it back on).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
from typing import NamedTuple

from kolectra.core.stage import progress, size_text

_log = logging.getLogger(__name__)
SWITCH = "KOLECTRA_SWEEP_SCRATCH"  # "0": no sweep_once

KIND = re.compile(r"[a-z]+")  # no hyphen: the name's fields are split on them
NAME = re.compile(r"kolectra-(?P<kind>[a-z]+)-(?P<pid>[1-9][0-9]{0,9})-(?P<start>[0-9]{1,20})-"
                  r"(?P<host>[0-9a-f]{8})-[a-z0-9_]{1,64}(?:\.[A-Za-z0-9_.]{1,32})?")


class Owner(NamedTuple):
    """Who made a scratch entry, read from its name."""
    kind: str
    pid: int
    start: int
    host: str


class Swept(NamedTuple):
    """What one sweep removed (``count`` entries, ``bytes`` in their files) and failed to remove."""
    count: int = 0
    bytes: int = 0
    failed: int = 0


def owner(name: str) -> Owner | None:
    """The owner a scratch entry's name carries; None for any other name (an unstamped one too)."""
    m = NAME.fullmatch(name)
    return Owner(m["kind"], int(m["pid"]), int(m["start"]), m["host"]) if m else None


def _stat_fields(pid: int) -> tuple[str, int] | None:
    """``pid``'s state letter and start time from /proc, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rindex(b")") + 2:].split()  # the command name may hold spaces and parentheses
    return fields[0].decode(), int(fields[19])  # fields 3 (state) and 22 (starttime) of proc(5)


_HAS_PROC = os.path.exists("/proc/self/stat")
_own: tuple[int, int] | None = None  # (pid, start): recomputed in a forked child


def _own_start() -> int:
    global _own
    pid = os.getpid()
    if _own is None or _own[0] != pid:
        fields = _stat_fields(pid) if _HAS_PROC else None
        _own = (pid, fields[1] if fields else 0)
    return _own[1]


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def _host_tag() -> str:
    boot = _read("/proc/sys/kernel/random/boot_id") or (os.uname().nodename if hasattr(os, "uname") else "")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return hashlib.blake2b(f"{boot}\x00{namespace}".encode(), digest_size=4).hexdigest()


HOST = _host_tag()


def alive(who: Owner) -> bool:
    """Whether the process that made an entry of this host still runs (a zombie does not)."""
    if who.pid == os.getpid():
        return who.start in (0, _own_start())
    if _HAS_PROC:
        try:
            fields = _stat_fields(who.pid)
        except (OSError, ValueError, IndexError):  # unreadable, or a format not known: kept, as a live one's
            return True
        if fields is None:  # gone, or another user's that /proc hides (hidepid=2): kill(pid, 0) tells them apart
            return _exists(who.pid)
        if fields[0] in "ZXx":
            return False
        return who.start in (0, fields[1])
    return _exists(who.pid)


def _exists(pid: int) -> bool:
    """Whether a process ``pid`` exists, by ``kill(pid, 0)``: EPERM is another user's (its start unknown)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM): it exists
        return True
    return True


def me(kind: str) -> Owner:
    """This process as the owner of something of ``kind`` (a store lease records it: pipeline/store/lease.py)."""
    return Owner(kind, os.getpid(), _own_start(), HOST)


def prefix(kind: str) -> str:
    """The name's start for scratch of ``kind`` made by this process (``tempfile`` adds the rest)."""
    if not KIND.fullmatch(kind):
        raise ValueError(f"a scratch kind is lowercase letters, not {kind!r}")
    return f"kolectra-{kind}-{os.getpid()}-{_own_start()}-{HOST}-"


def mkdtemp(kind: str, dir: str | os.PathLike | None = None) -> str:
    """``tempfile.mkdtemp`` with an owner's name (the folder swept first, once a process)."""
    sweep_once(dir)
    return tempfile.mkdtemp(prefix=prefix(kind), dir=dir)


def mkstemp(kind: str, suffix: str = "", dir: str | os.PathLike | None = None) -> tuple[int, str]:
    """``tempfile.mkstemp`` with an owner's name (the folder swept first, once a process)."""
    sweep_once(dir)
    return tempfile.mkstemp(suffix=suffix, prefix=prefix(kind), dir=dir)


def temporary_directory(kind: str, dir: str | os.PathLike | None = None) -> tempfile.TemporaryDirectory:
    """``tempfile.TemporaryDirectory`` with an owner's name (the folder swept first, once a process)."""
    sweep_once(dir)
    return tempfile.TemporaryDirectory(prefix=prefix(kind), dir=dir)


def _bytes_under(path: str) -> int:
    """The bytes of the files under a folder, no link followed; what vanishes meanwhile counts 0."""
    total, stack = 0, [path]
    while stack:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for e in entries:
                with contextlib.suppress(OSError):
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    else:
                        total += e.stat(follow_symlinks=False).st_size
    return total


def _remove(path: str, mode: int) -> None:
    """Remove one entry, never through a link: rmtree refuses a folder swapped for a link since
    the lstat; what another sweep removed first is no failure."""
    failures: list[BaseException] = []

    def failed(function, name, error):
        error = error if isinstance(error, BaseException) else error[1]  # onexc (3.12) or onerror's exc_info
        if not isinstance(error, FileNotFoundError):
            failures.append(error)

    if stat.S_ISDIR(mode):
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=failed)
        else:
            shutil.rmtree(path, onerror=failed)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    if failures:
        raise failures[0]


def sweep(folder: str | os.PathLike | None = None) -> Swept:
    """Remove the scratch entries in ``folder`` (default the temporary folder) whose owner on this
    host is no longer running, this user's only. Never raises (but for an interrupt)."""
    count = size = failed = 0
    first = ""  # the first failure: one debug line says it, and how many
    try:
        where = os.fspath(folder) if folder is not None else tempfile.gettempdir()
        uid = os.geteuid() if hasattr(os, "geteuid") else None
        with os.scandir(where) as entries:
            names = [e.name for e in entries if e.name.startswith("kolectra-")]
        for name in names:
            who = owner(name)
            if who is None or who.host != HOST or alive(who):
                continue
            path = os.path.join(where, name)
            try:
                st = os.lstat(path)
                if uid is not None and st.st_uid != uid:
                    continue
                n = _bytes_under(path) if stat.S_ISDIR(st.st_mode) else st.st_size if stat.S_ISREG(st.st_mode) else 0
                _remove(path, st.st_mode)
            except FileNotFoundError:  # another sweep's, or its owner's last clean-up
                continue
            except OSError as e:
                failed, first = failed + 1, first or f"{path}: {e}"
                continue
            count, size = count + 1, size + n
    except FileNotFoundError:  # no such folder: nothing to sweep
        pass
    except Exception as e:  # noqa: BLE001 - a sweep is housekeeping: it never fails the command
        failed, first = failed + 1, first or f"{type(e).__name__}: {e}"
    if failed:
        _log.debug("scratch sweep of %s: %d failure(s), the first %s", folder or "the temporary folder", failed, first)
    return Swept(count, size, failed)


_swept: set[str] = set()
_lock = threading.Lock()


def _new_lock() -> None:
    global _lock
    _lock = threading.Lock()  # a fork while another thread held it would leave the child's held for ever


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock)


def sweep_once(folder: str | os.PathLike | None = None, label: str | None = None) -> Swept:
    """:func:`sweep` ``folder`` unless this process did already; a progress line says what it removed
    (``label``, e.g. the command, leads it). Nothing where ``KOLECTRA_SWEEP_SCRATCH=0``."""
    if os.environ.get(SWITCH, "").strip() == "0":
        return Swept()
    try:
        key = os.path.realpath(os.fspath(folder) if folder is not None else tempfile.gettempdir())
    except Exception:  # noqa: BLE001 - never fails the caller
        return Swept()
    with _lock:
        if key in _swept:
            return Swept()
        _swept.add(key)
    done = sweep(key)
    if done.count:
        with contextlib.suppress(Exception):
            progress(f"{label + ': ' if label else ''}removed {done.count} scratch "
                     f"{'entry' if done.count == 1 else 'entries'} ({size_text(done.bytes)}) that killed kolectra "
                     f"processes left in {key}")
    return done
