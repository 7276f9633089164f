"""A job for ``tests/test_local_worker_channel.py``, run as ``python -m tests.local_flush_job OUT``
(a process of its own): one worker process gets a bundle of ``GROUPS`` small groups, many times
what the runner's data channel holds unread (made small here), and reads it slower than the
runner sends, so the channel stays full. The runner's stream to a worker also flushes on a timer
(Beam's ``DATA_BUFFER_TIME_LIMIT_MS``, 1 s; here 1 ms, and threads switch often) from a thread of
its own, which takes what was written, waits for room in the full channel, then clears the stream:
whatever ``corpus/beam_local.py``'s send thread wrote meanwhile was lost. Each group's key and
size go to OUT, one line each."""

import sys
import time

import apache_beam as beam
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker import data_plane

from kolectra.corpus import beam_local
from kolectra.corpus.runners import new_pipeline, pipeline_options

GROUPS = 1024
GROUP_BYTES = 16 << 10


def slow_size(key: int, values) -> str:
    time.sleep(0.001)  # the worker reads slower than the runner sends: the channel stays full
    return f"{key} {sum(map(len, values))}"


def main(out: str) -> None:
    worker_handlers.DATA_BUFFER_TIME_LIMIT_MS = 1  # read when the runner makes its data server
    data_plane._DEFAULT_SEND_QUEUE_MAX_BYTES = 1 << 20  # each of the runner's two send queues to a worker
    beam_local.PARTITION_STREAM_BYTES = 1  # a stream a group
    beam_local.SEND_MESSAGE_BYTES = 128 * GROUP_BYTES  # many writes between two of the sender's flushes
    sys.setswitchinterval(1e-5)  # the flusher's turn comes within those writes, as under a loaded launcher
    opts = pipeline_options(["--direct_num_workers=1", "--direct_running_mode=multi_processing"])
    with new_pipeline(opts) as p:
        _ = (p | beam.Create(range(GROUPS))
             | beam.Map(lambda k: (k, bytes([k % 251]) * GROUP_BYTES))
             | beam.GroupByKey()
             | beam.MapTuple(slow_size)
             | beam.io.WriteToText(out, shard_name_template=""))


if __name__ == "__main__":
    main(sys.argv[1])
