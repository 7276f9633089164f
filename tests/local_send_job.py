"""A job for ``tests/test_local_worker_channel.py``, run as ``python -m tests.local_send_job OUT``
(a process of its own, so that a hang can be stopped): one worker process gets a bundle of
``GROUPS`` groups of ``GROUP_BYTES`` each, many times what the runner's data channel holds
unread, which is made small here (``SEND_QUEUE_BYTES``, Beam's is 100 MB). Each group's key and
size go to OUT, one line each."""

import sys

import apache_beam as beam
from apache_beam.runners.worker import data_plane

from kolectra.corpus import beam_local
from kolectra.corpus.runners import new_pipeline, pipeline_options

GROUPS = 64
GROUP_BYTES = 1 << 20
SEND_QUEUE_BYTES = 1 << 20  # each of the runner's two send queues to a worker


def main(out: str) -> None:
    data_plane._DEFAULT_SEND_QUEUE_MAX_BYTES = SEND_QUEUE_BYTES  # read as the runner makes each channel
    beam_local.PARTITION_STREAM_BYTES = 1  # a stream a group
    beam_local.SEND_MESSAGE_BYTES = GROUP_BYTES // 4  # and a message a group
    run_groups(out, GROUPS, GROUP_BYTES)


def run_groups(out: str, groups: int, group_bytes: int) -> None:
    """``groups`` groups of ``group_bytes`` through one worker process; each key and size to ``out``."""
    opts = pipeline_options(["--direct_num_workers=1", "--direct_running_mode=multi_processing"])
    with new_pipeline(opts) as p:
        _ = (p | beam.Create(range(groups))
             | beam.Map(lambda k: (k, bytes([k]) * group_bytes))
             | beam.GroupByKey()
             | beam.MapTuple(lambda k, values: f"{k} {sum(map(len, values))}")
             | beam.io.WriteToText(out, shard_name_template=""))


if __name__ == "__main__":
    main(sys.argv[1])
