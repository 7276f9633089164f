"""What the corpus job shows: Beam's logging filtered by verbosity, workers' progress counts
summed by the launcher (corpus/progress.py, corpus/runners.py). The whole job's output is
checked in test_corpus_reliability.py (one line after Ctrl-C) and test_cli.py."""

import io
import logging

import pytest

from kolectra.corpus import beam_logging, progress


@pytest.fixture
def restore_verbosity():
    level = beam_logging.verbosity()
    yield
    beam_logging.set_verbosity(level)


def _shown(logger_name: str, level: int) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(beam_logging.FILTER)
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        logger.log(level, "message from %s", logger_name)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_beam_logging_follows_the_verbosity(restore_verbosity):
    beam_logging.set_verbosity(beam_logging.NORMAL)
    assert _shown("apache_beam.runners.worker.sdk_worker", logging.WARNING) == ""
    assert _shown("apache_beam.runners.worker.sdk_worker", logging.ERROR) == ""  # failures arrive as exceptions
    assert "kolectra.other" in _shown("kolectra.other", logging.WARNING)  # not Beam: untouched
    beam_logging.set_verbosity(beam_logging.VERBOSE)
    assert _shown("apache_beam.io", logging.WARNING) and not _shown("apache_beam.io", logging.INFO)
    beam_logging.set_verbosity(beam_logging.DEBUG)
    assert _shown("apache_beam.io", logging.INFO)
    beam_logging.set_verbosity(99)
    assert beam_logging.verbosity() == beam_logging.DEBUG


def test_worker_counts_are_summed_and_described(tmp_path):
    a, b = progress.WorkerCounts(str(tmp_path), every=0.0), progress.WorkerCounts(str(tmp_path), every=3600)
    a.add(bytes=1_000_000, read=10, kept=9)
    a.add(read=5, kept=5)
    b.add(analysed=7)  # not written yet: at most once an hour
    assert progress.read_counts(str(tmp_path)) == {"bytes": 1_000_000, "read": 15, "kept": 14}
    b.flush()
    counts = progress.read_counts(str(tmp_path))
    assert counts["analysed"] == 7
    assert progress.describe(counts, 4_000_000) == "read 1.0/4.0 MB (25%), 15 records, 14 kept, 7 analysed"
    assert progress.WorkerCounts(None).path is None  # no directory: counting is a no-op


def test_monitor_draws_bars_on_a_terminal(tmp_path):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    progress.WorkerCounts(str(tmp_path), every=0.0).add(bytes=500, read=3, kept=2, analysed=2)
    with progress.Monitor(str(tmp_path), 1000, stream=out) as monitor:
        pass
    assert monitor.counts["read"] == 3
    assert "corpus read" in out.getvalue() and "analysed" in out.getvalue()
