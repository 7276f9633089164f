"""benchmarks.shuffle_bytes' probes: every GroupByKey's input counted exactly in the coder the
runner uses for it (a typed coder where Beam inferred the type, not a pickled size), Beam's
windowed-value framing apart, and a lifted Combine's Precombine output from the runner's metrics."""

import apache_beam as beam
from apache_beam.coders.coders import StrUtf8Coder, TupleCoder, VarIntCoder

from benchmarks import shuffle_bytes
from kolectra.corpus.runners import pipeline_options

ELEMENTS = [(i % 5, "가나" * i) for i in range(300)]


def _run() -> dict:
    with shuffle_bytes.recording() as runs:
        with beam.Pipeline(options=pipeline_options(["--direct_num_workers=1"])) as p:
            pairs = p | "Pairs" >> beam.Create(ELEMENTS)
            _ = pairs | "Group" >> beam.GroupByKey()
            _ = pairs | "Longest" >> beam.CombinePerKey(max)
    assert len(runs) == 1
    return runs[0]


def test_each_shuffle_counts_its_elements_in_the_runners_coder():
    shuffles = _run()
    coder = TupleCoder([VarIntCoder(), StrUtf8Coder()]).get_impl()  # Create infers tuple[int, str]
    exact = sum(len(coder.encode_nested(e)) for e in ELEMENTS)
    group = shuffles["Group"]
    assert (group["elements"], group["bytes"], group["combine"]) == (300, exact, None)
    assert group["framing"] == 300 * shuffle_bytes.framing_bytes() and shuffle_bytes.framing_bytes() > 0
    assert group["runner_elements"] == 300  # the runner's own count of the same PCollection
    # Beam's own sampled estimate is reported beside: here its first 10 samples are the smallest
    # elements, so it may be far off (it is random); only its presence is checked
    assert group["sampled_estimate"] > 0

    combine = shuffles["Longest/GroupByKey"]
    assert (combine["elements"], combine["bytes"], combine["combine"]) == (300, exact, "Longest")
    assert 5 <= combine["lifted"]["elements"] < 300  # one accumulator per key and bundle after lifting
    assert 0 < combine["lifted"]["bytes_sampled"] < exact


def test_recording_ends_with_its_block():
    run = beam.Pipeline.run
    _run()
    assert beam.Pipeline.run is run
