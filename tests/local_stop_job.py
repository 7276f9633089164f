"""A job for ``tests/test_local_worker_channel.py``, run as ``python -m tests.local_stop_job OUT``
(a process of its own): one worker process gets a bundle of ``GROUPS`` groups of ``GROUP_BYTES``,
many times what the runner's data channel holds unread (made small here), and reads a group every
``READ_S``, so the runner's send of that input waits on a full channel for the rest of the job.
``OUT.started`` appears once the worker reads its first group: the test then kills the worker or
sends Ctrl-C to this process, and the job must end (it waited for ever in Beam's teardown)."""

import sys
import time
from pathlib import Path

import apache_beam as beam
from apache_beam.runners.worker import data_plane

from kolectra.corpus import beam_local
from kolectra.corpus.runners import new_pipeline, pipeline_options

GROUPS = 64
GROUP_BYTES = 1 << 20
READ_S = 0.5


def main(out: str) -> None:
    data_plane._DEFAULT_SEND_QUEUE_MAX_BYTES = 1 << 20  # each of the runner's two send queues to a worker
    beam_local.PARTITION_STREAM_BYTES = 1  # a stream a group
    beam_local.SEND_MESSAGE_BYTES = GROUP_BYTES // 4
    started = Path(out + ".started")

    def slow_size(key: int, values) -> str:
        started.touch()
        time.sleep(READ_S)
        return f"{key} {sum(map(len, values))}"

    opts = pipeline_options(["--direct_num_workers=1", "--direct_running_mode=multi_processing"])
    with new_pipeline(opts) as p:
        _ = (p | beam.Create(range(GROUPS))
             | beam.Map(lambda k: (k, bytes([k]) * GROUP_BYTES))
             | beam.GroupByKey()
             | beam.MapTuple(slow_size)
             | beam.io.WriteToText(out, shard_name_template=""))


if __name__ == "__main__":
    main(sys.argv[1])
