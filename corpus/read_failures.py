"""A listed store input whose read fails during the corpus job: retried where the failure may pass,
else named in one line (exit 2), never an internal error.

A server that fails a read after a good listing (an https signed URL expired since: 403; a 500/503; a
connection cut short, fewer bytes than its Content-Length) ended the job as ``internal error:
RuntimeError: aiohttp.client_exceptions.ClientResponseError: 403 ...`` (with worker processes: the first
line of Beam's wrapped traceback), as if kolectra were at fault. Now:

- an http(s) read (:mod:`kolectra.corpus.http_reads`) that fails in a way that may pass (5xx, 408, 429, a
  reset or cut connection, no answer in time: once only, :data:`TIMEOUT_RETRIES`) is tried again after
  :data:`RETRY_WAITS`, from the byte
  where it stopped (a server that ignores ``Range`` is read again from its start, the bytes already read
  skipped: the read stays byte-exact, its SHA-256 that of the file). fsspec's HTTP file system retries
  nothing, and its ``client_kwargs`` reach an ``aiohttp.ClientSession``, which has no retry option either;
  s3fs and gcsfs retry their own requests, so their reads are not retried again here.
- a read that still fails, or fails in a way that will not pass (401, 403, 404, 410; a store's access
  denied or object gone) raises :class:`ReadFailed`; the job's read step (``corpus/steps.py``) records
  its ``why`` in the file's row (``read_failed``), and the check after the job
  (:func:`kolectra.corpus.job_checks.check_stats`) names such files in one line (:func:`line`: the first
  :data:`NAMED`, the rest counted): data, so the same line with worker processes (whose exceptions reach
  the launcher only as Beam's wrapped text). A server that refuses the check after a read (its HEAD, a
  signed URL expired meanwhile: ``corpus/input_reads.py``'s ``NOT_CHECKED``) is named in that line too.
- on the local runner with worker processes the read step also notes it in the job's progress folder (:func:`note`; a folder
  of the job's own, so no other run's note is seen), and the launcher (:class:`Watch`) stops the job at
  once with the same line, naming the files failed by then: the job cannot succeed, and a long one (34 GB
  with a signed URL expired) went on for hours before the check after it named the file. A note the
  watch had no time to see (the job ended first) is the check after the job's, as on a remote runner. Not
  in process: there the reads run on the launcher's own thread, where the stop would land inside the next
  file's read (``corpus/build.py``'s ``_worker_processes``).
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import logging
import os
import random
import threading
import time
import uuid
from pathlib import Path

from kolectra.core import storage, url_secrets, verbosity
from kolectra.core.errors import UserInputError
from kolectra.core.shown import first_few
from kolectra.corpus.inputs import InputError, is_remote

# Seconds waited before each retry of a failing http(s) read: 5 retries over about 15 s, which outlasts
# a load balancer's restart or a brief overload, yet a server that stays down fails the job within the
# minute (a long job's other files are read on meanwhile). A read that makes progress starts again at
# the first wait: a server that cuts every connection after a few MB still gets the file read.
# KOLECTRA_READ_RETRY_WAITS (seconds separated by commas; "" for no retry) sets others: a server known to
# restart slowly, or tests, which cannot reach worker processes' constants.
RETRY_WAITS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)
WAITS_VARIABLE = "KOLECTRA_READ_RETRY_WAITS"
# a read that ran out of time is tried again this many times only: each try of a server that takes the
# connection and sends nothing waits out the request's bound (aiohttp's 300 s), 6 tries half an hour
TIMEOUT_RETRIES = 1
MOST_RETRY_AFTER = 30.0  # a 429/503's Retry-After is honoured up to this many seconds
# the statuses that may pass: a timeout, too many requests, a server's error, its gateway's
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})

log = logging.getLogger(__name__)


class ReadFailed(InputError):
    """A listed input that could not be read to its end; ``why`` says what the server or store answered
    and what to do, without the URL (the check names the file by its recorded path)."""

    def __init__(self, path: str, why: str):
        self.path, self.why = url_secrets.recorded(path), why
        super().__init__(f"{self.path}: {why}")

    def __reduce__(self):  # picklable, as Beam may carry it
        return type(self), (self.path, self.why)


def retry_waits() -> tuple[float, ...]:
    """The waits before each retry: :data:`RETRY_WAITS`, or what :data:`WAITS_VARIABLE` says; within
    :func:`before_the_job`, the first of them only."""
    given = os.environ.get(WAITS_VARIABLE)
    if given is None:
        return RETRY_WAITS[:1] if _checking else RETRY_WAITS
    try:
        waits = tuple(float(w) for w in given.split(",") if w.strip())
    except ValueError:
        waits = (-1.0,)
    if not all(0 <= w <= 3600 for w in waits):
        raise UserInputError(f"{WAITS_VARIABLE}={given!r}: give the seconds to wait before each retry of a failed "
                             "read, separated by commas (0 to 3600 each; empty: no retry), or leave it unset")
    return waits[:1] if _checking else waits


# The checks before the job (the text field, the JSONL text's share, the records' count) read a few inputs and
# pass over one that fails (the job's read names it, after its own retries): each of their reads tried 5 times
# over 15 s held the job 16 s a check and a file before its first line, where the server answered HEAD and failed
# every GET (one file: 50 s to the failure's line, the job's read 16 of them; 4 files sampled: 80 s more). One
# retry, after the first wait, still outlasts a blip.
_checking = 0
_checking_lock = threading.Lock()


@contextlib.contextmanager
def before_the_job():
    """Within it (a decorator of a check before the job too), every thread's http(s) reads are tried again
    once only (:func:`retry_waits`): the launcher's, and its check's threads (the records' count reads 8
    files at a time); the job's reads come after it."""
    global _checking
    with _checking_lock:
        _checking += 1
    try:
        yield
    finally:
        with _checking_lock:
            _checking -= 1


def _chain(e: BaseException | None):
    """``e`` and what caused it (fsspec raises FileNotFoundError from aiohttp's error of a failed HEAD)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def http_status(e: BaseException) -> tuple[int, str] | None:
    """The HTTP status (and its reason) a server failed ``e``'s request with, or None."""
    import aiohttp  # noqa: PLC0415 - fsspec's HTTP client; only once a read failed

    for cause in _chain(e):
        if isinstance(cause, aiohttp.ClientResponseError):
            return cause.status, str(cause.message or "")
    return None


def _network(e: BaseException) -> bool:
    """``e`` is the connection failing (reset, cut short, refused, no answer in time), not the server's answer."""
    import aiohttp  # noqa: PLC0415 - fsspec's HTTP client; only once an http(s) read failed

    kinds = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, ConnectionError, TimeoutError)
    return any(isinstance(cause, kinds) for cause in _chain(e))


def transient(e: BaseException) -> bool:
    """Whether a failed http(s) read may succeed when tried again."""
    status = http_status(e)
    return status[0] in TRANSIENT_STATUS if status is not None else _network(e)


def from_server(e: BaseException) -> bool:
    """Whether ``e`` is the server's failure (any HTTP status, 404's FileNotFoundError, the connection):
    kolectra's own errors and bugs are not."""
    return http_status(e) is not None or isinstance(e, FileNotFoundError) or _network(e)


def wait_before(e: BaseException, attempt: int, waits: tuple[float, ...]) -> float | None:
    """Seconds to wait before retry ``attempt`` (0-based) of a read that failed with ``e``, or None:
    not to be retried (a failure that will not pass, or ``waits`` spent)."""
    if attempt >= len(waits) or not transient(e):
        return None
    if attempt >= TIMEOUT_RETRIES and any(isinstance(c, TimeoutError) for c in _chain(e)):
        return None  # each try of a server that went mute waited out its bound (aiohttp's 300 s) already
    wait = waits[attempt] * random.uniform(0.8, 1.2)  # jitter: many workers do not all come back at once
    headers = next((c.headers for c in _chain(e) if getattr(c, "headers", None) is not None), None)
    asked = retry_after(headers.get("Retry-After") if hasattr(headers, "get") else None)
    return max(wait, min(asked, MOST_RETRY_AFTER)) if asked is not None else wait


def retry_after(said: str | None) -> float | None:
    """The seconds a ``Retry-After`` header asks for: its delay in seconds, or the time from now to its
    HTTP-date (``Wed, 02 Dec 2026 03:30:00 GMT``: the form a CDN or a server's maintenance page sends,
    which was taken for no header, the back-off's 0.5 s against a 503 that asked for 20); None where there
    is none, or none that can be read."""
    if not said or not said.strip():
        return None
    try:
        return float(said)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(said.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110's dates are GMT
        when = when.replace(tzinfo=datetime.timezone.utc)
    return (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds()


def pause(path: str, e: BaseException, attempt: int, wait: float, tries: int) -> None:
    """Say (from ``-v``: a retry that heals is no news) and wait before retrying a read."""
    log.log(logging.WARNING if verbosity.level() >= verbosity.VERBOSE else logging.DEBUG, "reading %s failed (%s); trying again in %.1f s (%d of %d)", url_secrets.recorded(path),
             _said(e), wait, attempt + 1, tries)
    time.sleep(wait)


def _said(e: BaseException) -> str:
    """What failed, in a few words: the status and its reason, or the connection's error, never a URL's
    credentials (a 404 that fsspec raised as FileNotFoundError: 404)."""
    status = http_status(e)
    if status is not None:
        return f"{status[0]} {status[1]}".strip()
    import aiohttp  # noqa: PLC0415

    cause = next((c for c in _chain(e) if isinstance(c, (aiohttp.ClientError, ConnectionError, TimeoutError))), e)
    if cause is e and isinstance(e, FileNotFoundError):
        return "404 Not Found"
    text = url_secrets.redacted(" ".join(str(cause).split()))
    return f"{type(cause).__name__}: {text}"[:300] if text else type(cause).__name__


def http_failure(path: str, e: BaseException, attempts: int) -> ReadFailed:
    """The :class:`ReadFailed` of an http(s) read of ``path`` that failed with ``e`` after ``attempts`` tries."""
    status = http_status(e)
    code = status[0] if status else (404 if isinstance(e, FileNotFoundError) else None)
    if code in (401, 403):
        why = (f"the server refused to serve it ({_said(e)}): a signed URL may have expired, or access "
               "been withdrawn, since the listing; sign it again (or restore access) and run the same command again")
    elif code in (404, 410):
        why = (f"the server no longer has it ({_said(e)}): removed or moved since the listing; name the files "
               "there now and run the same command again")
    elif attempts > 1:
        why = (f"the server failed its read {attempts} times in a row, the last: {_said(e)}; run the same command "
               "again once it answers")
    else:
        why = f"the server failed its read ({_said(e)}); run the same command again once it answers"
    return ReadFailed(path, why)


def _code(e: BaseException) -> str | None:
    """A botocore error's code (``NoSuchKey``, ``PreconditionFailed``), else None."""
    response = getattr(e, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def store_failure(path: str, e: BaseException) -> ReadFailed | None:
    """The :class:`ReadFailed` of a store read (s3://, gs://, ...) that failed with ``e`` after the store's
    client had retried what it retries, or None where ``e`` is no store's failure (a bug is raised as it is)."""
    if any(_code(c) == "PreconditionFailed" for c in _chain(e)):  # s3fs's reads pinned to the listed ETag (If-Match)
        why = ("it changed during the read (the store no longer serves the version the read began on: a precondition "
               "failed); run the same command again once it is complete")
    elif isinstance(e, FileNotFoundError):
        why = "gone from the store since the listing (deleted or moved); name the files there now and run the same command again"
    elif isinstance(e, PermissionError):
        why = ("the store refused its read (access denied) after listing it: credentials or permissions changed "
               "since the listing; restore access and run the same command again")
    elif isinstance(e, storage.StoreError):  # the store's client's failure in one line (core/storage.py)
        said = url_secrets.redacted(str(e).removeprefix(f"{path}: "))
        then = ("restore access and run the same command again" if "permission" in said else
                "run the same command again once it answers")
        why = f"the store refused or failed it after the listing ({said}); {then}"
    elif isinstance(e, (OSError, TimeoutError)) or type(e).__module__.split(".")[0] in ("botocore", "aiobotocore",
                                                                                          "gcsfs", "google", "aiohttp"):
        why = f"the store failed its read ({_said(e)}); run the same command again once it answers"
    else:
        return None
    return ReadFailed(path, why)


def of(path: str, e: BaseException) -> ReadFailed | None:
    """The :class:`ReadFailed` of a read of ``path`` (a URL) that failed with ``e``, once tried again where
    that may help; None for a local path, or where ``e`` is no server's or store's failure."""
    if not is_remote(path):
        return None
    if path[:8].lower().startswith(("http://", "https://")):
        return http_failure(path, e, 1) if from_server(e) else None
    return store_failure(path, e)


_NOTE = ".read-failed"  # a note's suffix in the progress folder (not a worker's counts, which end .json)


def note(directory: str | None, path: str, why: str) -> None:
    """Tell the launcher (through the local runner's progress folder ``directory``) that ``path``'s read
    failed: :class:`Watch` stops the job. Nothing where there is no such folder (remote workers)."""
    if not directory:
        return
    target = Path(directory) / f"{uuid.uuid4().hex}{_NOTE}"
    try:  # written whole, then renamed: the launcher never reads half a note
        target.with_suffix(".part").write_text(f"{url_secrets.recorded(path)}\n{why}", encoding="utf-8")
        os.replace(target.with_suffix(".part"), target)
    except OSError:
        pass  # the check after the job names the file all the same


def noted(directory: str) -> dict[str, str]:
    """The failed reads :func:`note` left in ``directory``: recorded path -> why."""
    found = {}
    for p in Path(directory).glob(f"*{_NOTE}"):
        try:
            path, why = p.read_text(encoding="utf-8").split("\n", 1)
        except (OSError, ValueError):
            continue
        found[path] = why
    return found


# files a failure line names: a signature that expired fails every file of a job alike, and a line naming
# all of 1,000 files (about 300 kB) buries the reason it gives for each
NAMED = 5


def line(failed: dict[str, str]) -> str:
    """The job's one line naming the inputs whose read failed (path -> why): the first :data:`NAMED` of them."""
    return (f"{len(failed)} input file(s) could not be read after the listing: "
            + first_few([f"{path}: {why}" for path, why in sorted(failed.items())], NAMED) + " (no corpus was kept)")


class Watch:
    """While the local job runs: looks for :func:`note`'s notes in ``directory`` every ``every`` s, and at the
    first calls ``stop`` with the :class:`~kolectra.corpus.outputs.CorpusError` of :func:`line`
    (``Interruption.fail``: the workers stopped, the launcher's main thread raises it)."""

    def __init__(self, directory: str | None, stop, error: type[Exception], every: float = 0.5):
        self.directory, self.stop, self.error, self.every = directory, stop, error, every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kolectra-read-failures", daemon=True)

    def __enter__(self) -> "Watch":
        if self.directory:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self.every):
            if failed := noted(self.directory):
                self.stop(self.error(line(failed)))
                return
