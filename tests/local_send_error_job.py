"""A job for ``tests/test_local_worker_channel.py``, run as ``python -m tests.local_send_error_job OUT``
(a process of its own): the runner's thread that sends a bundle's input to the worker process
fails after a few groups (a buffer that is not bytes stands for any error there, such as a
MemoryError), so the bundle's input stops short of its end. The job must fail with that error
(its worker waited for the rest of its input for ever, and the runner for the bundle)."""

import sys

from kolectra.corpus import beam_local
from tests.local_send_job import run_groups

GROUPS = 16
GROUP_BYTES = 64 << 10
SENT = 4  # groups sent before the error


def main(out: str) -> None:
    beam_local.PARTITION_STREAM_BYTES = 1  # a stream a group
    partition = beam_local._partition  # read by install() when the runner starts

    def breaks_after_a_few(buffer, n):
        parts = partition(buffer, n)
        if len(parts[0]) > SENT and parts[0][SENT] is not None:
            parts[0].insert(SENT, None)  # the send writes it: TypeError in the send's thread
        return parts

    beam_local._partition = breaks_after_a_few
    run_groups(out, GROUPS, GROUP_BYTES)


if __name__ == "__main__":
    main(sys.argv[1])
