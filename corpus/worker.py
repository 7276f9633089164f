"""Beam's SDK worker process for kolectra's local multi-process runs (``corpus/runners.py``
starts ``python -m kolectra.corpus.worker`` instead of Beam's own ``sdk_worker_main``).

Two differences. Ctrl-C: the terminal sends SIGINT to the whole process group, and each worker
would die with its own traceback; here workers ignore it, the launcher reports the interruption
in one line and the runner stops its workers. And logging. Beam's worker logs everything to the runner through the Fn API,
but importing ``apache_beam`` logs a warning on the root logger first, which installs a handler on
the worker's stderr, so every worker would also print its harness INFO lines to the terminal.
Here the root logger gets a handler that drops them before Beam is imported; the runner still
receives the logs and shows them at ``KOLECTRA_VERBOSITY=3``, where this worker also prints them.

And it ends with its launcher (Linux: ``PR_SET_PDEATHSIG``): a launcher killed outright (``kill -9``,
the out-of-memory killer, a scheduler's SIGKILL once a SIGTERM's grace ran out) left its workers
waiting for a runner that was gone, for good. The signal is tied to the launcher's thread that
started the worker, which Beam keeps waiting for the worker until it ends.

And its stderr names no ``--input`` URL's credentials (``core/url_secrets.py``): Beam's harness prints each failed
bundle's traceback there itself, and a download library's error names the URL it read (aiohttp's
``403, message='Forbidden', url='https://...?X-Amz-Signature=...'``), so a signed URL that expired during the
job printed its key and signature to the terminal, from each worker.
"""

import ctypes
import logging
import os
import signal
import sys

from kolectra.core import url_secrets

signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Redacting:
    """A stream writing what it is given less the credentials of the http(s) URLs in it."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(url_secrets.redacted(text))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


sys.stderr = _Redacting(sys.stderr)


def _end_with_the_launcher() -> None:
    # the launcher names itself (corpus/runners.py): one killed while this process started is no parent now
    parent = int(os.environ.get("KOLECTRA_LAUNCHER_PID") or os.getppid())
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG (prctl(2))
    except (OSError, AttributeError):  # not Linux: the worker outlives a killed launcher, as Beam's own
        return
    if os.getppid() != parent:  # the launcher ended before the line above
        os._exit(1)


_end_with_the_launcher()
if os.environ.get("KOLECTRA_VERBOSITY", "1").strip() != "3":  # 0-2, or a value the launcher refused
    logging.getLogger().addHandler(logging.NullHandler())

from apache_beam.runners.worker import sdk_worker_main  # noqa: E402  (after SIGINT is ignored, as a worker must)

if __name__ == "__main__":
    sdk_worker_main.main(sys.argv)
