"""How the ``kolectra`` command ends when something goes wrong: one line, never a traceback.

:func:`handled` wraps a command. A *known* failure — one of kolectra's errors, decided by class
(:class:`kolectra.core.errors.KolectraError`: a user input or the environment), the
operating system saying no (disk full, a file-size limit, a directory where a file should be,
permissions) or an interrupt (Ctrl-C, SIGTERM, SIGHUP) — prints ``kolectra CMD: error: ...`` naming the
input, plus what the store kept or removed (the notes it attaches), and exits non-zero. Anything
else is a bug: its traceback goes to ``ROOT/.logs/<time>-<command>.log`` and the one line says so.
A reader that closes stdout early (``kolectra artifacts show X | head``), or a terminal that hung up
there, is no failure: the command ends silently with status 0, as ``--print-config | head`` does.

After an interrupt, background threads (Beam's) and loggers are silenced: their tracebacks about
a pipeline being torn down say nothing the one line does not. Threads stay silenced for the rest
of the process, since they die while it shuts down, after the line; a Ctrl-C while the exit
waits for them ends the process at once, silently, with status 130.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import logging
import os
import pickle
import select
import signal
import stat
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Callable, Iterator

from kolectra.core import stops, streams, url_secrets
from kolectra.core.errors import BY_TORCHRUN, KolectraError, Terminated
from kolectra.core.shown import shown

EXIT_REFUSED, EXIT_BUG, EXIT_INTERRUPTED = 2, 1, 130
EXIT_GRACE = 10.0  # seconds the shutdown after an interrupt may wait for other threads
ENTERED = False  # a command's handled() has begun: a Ctrl-C from then on is its to report
# What a failed write to stdout says after its error, by what the command did (:func:`after_the_command`):
# a build's lines come once it is published; a listing's (artifacts list, show, verify, gc) once its work
# is done; --help, --version and --print-config only print, and what they print is all they do
AFTER_BUILDING = "writing stdout, after the command had finished (what it built stands)"
AFTER_WORKING = "writing stdout, after the command had finished"
PRINTING = "writing stdout"

_OS = {errno.ENOSPC: "no space left on the device", errno.EFBIG: "the file-size limit was reached",
       errno.EDQUOT: "the disk quota is exceeded", errno.EISDIR: "is a directory, not a file",
       errno.ENOTDIR: "is not a directory", errno.EACCES: "permission denied", errno.EROFS: "read-only file system"}


# How libraries that do not raise OSError (safetensors, torch's zip writer) word a full disk.
_FULL = {errno.ENOSPC: ("No space left on device", "os error 28", "code: 28"),
         errno.EFBIG: ("File too large", "os error 27", "code: 27"), errno.EDQUOT: ("Disk quota exceeded",)}


def _disk_full(e: BaseException) -> int | None:
    """ENOSPC, EFBIG or EDQUOT if ``e`` (or what caused it) is a full disk or a file-size limit."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _FULL:
            return e.errno
        for code, markers in _FULL.items():
            if any(m in str(e) for m in markers):
                return code
        e = e.__cause__ or e.__context__
    return None


def describe(e: BaseException) -> str | None:
    """The one line for a known failure, or None for a bug."""
    full = _disk_full(e)
    if isinstance(e, OSError):
        what = _OS.get(e.errno or -1, e.strerror or str(e))
        text = f"{e.filename}: {what}" if e.filename else what
    elif full is not None:
        text = f"{_OS[full]} (while writing: {type(e).__name__}: {str(e).splitlines()[0][:200]})"
    elif isinstance(e, KolectraError):  # raised on purpose: a user input or the environment (core/errors.py)
        text = str(e)
    elif isinstance(e, pickle.UnpicklingError):  # torch's weights_only loader refused an input's pickle
        text = ("refused to load a pickle holding objects torch's weights_only loader does not allow (loading it "
                "could run code): use safetensors weights from a source you trust")
    else:
        return None
    return "; ".join(line.strip() for line in [text, *getattr(e, "__notes__", [])] if line.strip())


def write_trace(root: Path, command: str, e: BaseException) -> Path:
    """The full traceback in ``root/.logs`` (or the system's temporary folder if that fails)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    # an --input URL's signature or password, in argv or a download library's error text: not in a file users paste
    text = url_secrets.redacted("".join(traceback.format_exception(e)))
    local = [root / ".logs"] if isinstance(root, Path) else []  # a store root: the temporary folder
    for folder in (*local, Path(tempfile.gettempdir()) / "kolectra-logs"):
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{stamp}-{command.replace(' ', '-')}-{os.getpid()}.log"
            path.write_text(f"{url_secrets.redacted(' '.join(['kolectra', *sys.argv[1:]]))}\n\n{text}", encoding="utf-8")
            return path
    return Path("(could not be written)")


@contextlib.contextmanager
def _interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` (but where the caller ignores them:
    :mod:`kolectra.core.stops`); after an interrupt, other threads' tracebacks are dropped."""
    def terminate(signum, frame):
        stops.note(signum)
        raise Terminated()

    old, hook, interrupted = {}, threading.excepthook, False
    if threading.current_thread() is threading.main_thread():
        old = stops.catch(terminate)
    try:
        yield
    except KeyboardInterrupt:
        interrupted = True
        threading.excepthook = lambda args: None
        logging.disable(logging.CRITICAL)
        raise
    finally:
        stops.put_back(old)
        if not interrupted:  # else the process is ending: Beam's threads die as it shuts down, after the line
            threading.excepthook = hook
        logging.disable(logging.NOTSET)


def handled(command: str, root: Callable[[], Path], run: Callable[[], int], after: str = AFTER_BUILDING) -> int:
    """``run()``'s exit code, or a one-line report and a non-zero code for any failure; a Ctrl-C
    while the process then exits is one line too (:func:`_ctrl_c_while_exiting`). ``after``: what a failed
    write of what it printed last says (:data:`AFTER_BUILDING`, :data:`AFTER_WORKING`, :data:`PRINTING`)."""
    if threading.current_thread() is threading.main_thread() and _ours(signal.getsignal(signal.SIGINT)):
        signal.signal(signal.SIGINT, signal.default_int_handler)  # an earlier command's, in this process
    code = _handled(command, root, run, after)
    _ctrl_c_while_exiting(command, said=code == EXIT_INTERRUPTED or code == stops.status())
    return code


def _handled(command: str, root: Callable[[], Path], run: Callable[[], int], after: str) -> int:
    global ENTERED
    ENTERED = True
    code = None
    try:
        with _interrupts():
            code = run()
            _flush_stdout(after)  # here, so that a reader gone (`| head`) is seen below, not at exit
            return code
    except KeyboardInterrupt as e:  # a stage may say how far it got (the message) and the store what it kept (notes)
        e = _first_interrupt(e)
        why = str(e) or ("terminated" + stops.why() + (BY_TORCHRUN if os.environ.get("TORCHELASTIC_RUN_ID") else "")
                         if isinstance(e, Terminated) else "interrupted")
        notes = getattr(e, "__notes__", []) or ([] if str(e) else ["nothing was published"])
        _say(command, "; ".join([why, *notes]))
        code = stops.status() if isinstance(e, Terminated) else EXIT_INTERRUPTED
        _end_despite_threads(code)
        return code
    except Exception as e:  # noqa: BLE001 - the command's last handler: every failure becomes one line
        if reader_gone(e):  # at the flush, the command's own status stands: a failed verify is no 0 for `| head -1`
            return _quiet_end(code or 0)
        line = describe(e)
        _settle_stdout()
        if line is not None:
            torchrun_told(_say(command, f"error: {line}"))
            return EXIT_REFUSED
        path = write_trace(root(), command, e)
        first = (str(e).strip().splitlines() or [""])[0][:300]
        torchrun_told(_say(command, f"internal error: {type(e).__name__}: {first} (full traceback in {path})"))
        return EXIT_BUG


def _settle_stdout() -> None:
    """What a failed command had printed, written out now; a stdout that cannot take it goes to the null
    device: ``--print-config > f`` on a full disk said its one line, then the exit's flush failed again
    ('Exception ignored in: <_io.TextIOWrapper name='<stdout>'...', status 120 for the 2 said)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        streams.lost(sys.stdout)


def _flush_stdout(after: str) -> None:
    """What the command printed last, written out (:func:`after_the_command`)."""
    with after_the_command(after):
        sys.stdout.flush()


@contextlib.contextmanager
def after_the_command(after: str = AFTER_BUILDING) -> Iterator[None]:
    """Writing what a command prints once its work is done (its artifact's path; the stdout buffer after
    it): a failure says it came after the command was done. ``kolectra vocab ... > paths.txt`` on a full
    disk said 'error: no space left on the device' with its vocab published (its directory, the one line,
    was what did not fit), and the interpreter's flush at exit then failed again ('Exception ignored in:
    <_io.TextIOWrapper name='<stdout>'...', status 120): what did not fit now goes to the null device.
    Under PYTHONUNBUFFERED the line fails as it is printed, not at the flush: the same words. A reader
    gone (``| head``, a terminal that hung up) is left to :func:`_handled`, which ends quietly: pointed
    at the null device here, the hung-up terminal was no longer seen as one ('error: Input/output error').
    ``after``: the note, as fits the command (:data:`AFTER_BUILDING` unless told): before 2026-12-01
    ``artifacts list``, ``--help`` and ``--version``, which build nothing, said '(what it built stands)' too."""
    try:
        yield
    except OSError as e:
        if not reader_gone(e):
            e.add_note(after)
            streams.lost(sys.stdout)
        raise


def reader_gone(e: BaseException) -> bool:
    """``e`` is a write to a stdout nobody reads any more: a pipe whose reader closed it, or a terminal
    that hung up (EIO only where stdout is a character device that polls hung up: a disk's EIO stays an error)."""
    return (isinstance(e, BrokenPipeError) or streams.gone(e) and _a_device(sys.stdout)) and _stdout_gone()


def _first_interrupt(e: KeyboardInterrupt) -> KeyboardInterrupt:
    """The interrupt that stopped the command, when a second one (Ctrl-C or SIGTERM again) came while the
    store was cleaning up after it: raised there, the second carried neither how far the stage got nor
    what the store kept (pretrain said 'terminated; nothing was published' with its checkpoint kept for
    --resume). The second only cut that clean-up short, which the next build's sweep finishes. Only a
    bare interrupt (a handler's: no message, no notes) gives way, never to a context it suppressed
    (``raise ... from None``: a job's one interrupt made of Beam's wrapped ones)."""
    first, seen = e, {id(e)}
    while (not str(first) and not getattr(first, "__notes__", None) and not first.__suppress_context__
           and isinstance(first.__context__, KeyboardInterrupt) and id(first.__context__) not in seen):
        first = first.__context__
        seen.add(id(first))
    return first


def _a_device(stream) -> bool:
    """``stream`` is a character device (a terminal: one that hung up is no tty for ``isatty`` any more)."""
    try:
        return stat.S_ISCHR(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test's capture)
        return False


def _stdout_gone() -> bool:
    """stdout is a pipe whose reader has closed it (``kolectra artifacts show X | head``), or a terminal
    that hung up (an SSH session that dropped, the command run on with ``setsid`` or ``disown``: its last
    line's write failed with EIO, which ended it with status 2 after its artifact was published)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test's capture)
        return False


def _quiet_end(code: int = 0) -> int:
    """End as ``head``'s writer should, silently, with ``code``: the reader has what it wanted. What is
    still buffered goes to /dev/null, so Python's flush at exit has no second error to print."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return code


def _end_despite_threads(code: int) -> None:
    """After an interrupt's line, make sure the process ends: a job torn down by Ctrl-C can leave a
    thread (Beam's in-process harness) waiting forever, and the interpreter's shutdown waits for it.
    If a thread that was running when the interrupt came is still alive :data:`EXIT_GRACE` seconds
    after the main thread has finished, a watchdog ends the process with ``code``; a Ctrl-C meanwhile
    ends it at once (:func:`_ctrl_c_while_exiting`, which :func:`handled` sets next). While the main
    thread runs (kolectra called as a library) it does nothing; threads started later are not its business."""
    me = threading.current_thread()
    running = [t for t in threading.enumerate() if t is not me and not t.daemon]
    if not running:
        return

    def watch() -> None:
        while threading.main_thread().is_alive():
            time.sleep(0.2)
        deadline = time.monotonic() + EXIT_GRACE
        for t in running:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in running):
            os._exit(code)

    threading.Thread(target=watch, name="kolectra-exit-watchdog", daemon=True).start()


def _shutting_down() -> bool:
    """The interpreter is ending: it runs threading's exit hooks (which join executors' threads),
    then waits for the other threads; the main thread has no code of its own left to run."""
    return getattr(threading, "_SHUTTING_DOWN", False) or not threading.main_thread().is_alive()


def _ctrl_c_while_exiting(command: str, said: bool) -> None:
    """A Ctrl-C after the command is done, while the interpreter exits (it joins threads, runs atexit
    hooks, then frees every module: about 0.4 s after ``kolectra examples`` had printed its artifact),
    printed nothing and ended the process *by* SIGINT (status -2 to its parent: Python puts SIGINT's
    disposition back to the default before freeing the modules), or raised a KeyboardInterrupt traceback
    from the exit's own code. Now, once the interpreter is shutting down, a Ctrl-C says so in one line
    (which keeps what the command printed: it was done) and ends with 130, or ends quietly with 130
    when the command's line is out already (``said``). In the exit's last part (its modules freed, no
    Python code runs any more) a Ctrl-C still ends the process by SIGINT, as a shell expects of a
    program it stopped (130 to it; ``a && b`` stops): ignored, it would end 0. Until the interpreter
    ends (kolectra called as a library) a Ctrl-C raises KeyboardInterrupt, as Python's handler does; a
    caller's own handler, or an ignored SIGINT, is left alone."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def at_exit(signum, frame):
        if not _shutting_down():
            raise KeyboardInterrupt
        if not said:
            _say(command, "interrupted while exiting, after the command had finished (what it printed above stands)")
        os._exit(EXIT_INTERRUPTED)

    at_exit.kolectra_exit = True
    signal.signal(signal.SIGINT, at_exit)


def _ours(handler: object) -> bool:
    """``handler`` is one of this module's for a Ctrl-C at exit (not a caller's)."""
    return getattr(handler, "kolectra_exit", False)


def _say(command: str, text: str) -> str:
    # a message may quote a manifest or a name from a root from elsewhere: its control characters escaped;
    # a download library's error (aiohttp's "403, ..., url='https://...?X-Amz-Signature=...'") names the URL
    # read, credentials and all: they go (core/url_secrets.py), as from everything else the corpus records
    line = f"kolectra {command}: {shown(url_secrets.redacted(text), lines=True)}"
    try:
        # one write, newline included: print() writes the line and its newline apart where stderr is unbuffered
        # (PYTHONUNBUFFERED), and the ranks of a torchrun job, sharing one stderr, ran their lines together
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError as e:  # stderr's reader is gone (`2>&1 | tee`, tee stopped with it; a terminal hung up)
        if not streams.gone(e):
            raise
        streams.lost(sys.stderr)
    return line


def torchrun_told(line: str) -> None:
    """Hand the line this process ends with to torchrun, in the error file it names each rank
    (``TORCHELASTIC_ERROR_FILE``, torch's ``@record`` format): its summary of the failed ranks, printed
    after them, showed 'traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html'
    for the rank that refused; it now shows the line (on each machine, for its first failed rank). An
    interrupt's line is not handed over: torchrun takes the failure of the earliest second for the root
    cause, and a rank it stopped in that second would stand for the one that failed. Nothing without
    torchrun."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    with contextlib.suppress(OSError):
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"message": {"message": line, "extraInfo": {"py_callstack": line,
                                                                  "timestamp": str(int(time.time()))}}}, f)
