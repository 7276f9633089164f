"""A local Beam worker that will not stop, for the tests of a second and third Ctrl-C
(``tests/test_faults_rough_edges.py``): ``python -m tests.stubborn_worker``, started by the
launcher in place of ``kolectra.corpus.worker`` (the test sets ``interruption.WORKER_MODULE``).

It is the real worker (``kolectra.corpus.worker``: SIGINT ignored, Beam's SDK harness), except
that the SIGTERM the launcher stops it with suspends it instead (SIGSTOP, as a worker stuck in the
kernel on a hung mount would sit): Beam's teardown then waits for it for ever, a stop that hangs.
Once its handler is in place it creates the file named by ``KOLECTRA_TEST_WORKER_READY``.
"""

import os
import signal
import sys
from pathlib import Path

signal.signal(signal.SIGTERM, lambda signum, frame: os.kill(os.getpid(), signal.SIGSTOP))
if os.environ.get("KOLECTRA_TEST_WORKER_READY"):
    Path(os.environ["KOLECTRA_TEST_WORKER_READY"]).touch()

from kolectra.corpus import worker  # noqa: E402  (the real worker's set-up: SIGINT ignored, logging)

if __name__ == "__main__":
    worker.sdk_worker_main.main(sys.argv)
