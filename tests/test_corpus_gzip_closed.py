"""A gzip input read before a corpus job (the text field's check, the text share the memory check counts) left
its file open once its stream was closed: ``GzipFile`` does not close a ``fileobj`` it was given, so
``kolectra corpus`` on the embedded sample under ``-W error::ResourceWarning`` printed 'Exception ignored ...
ResourceWarning: unclosed file' from corpus/field_check.py and corpus/build.py. bz2 and zstd closed theirs."""

from __future__ import annotations

import gc
import gzip
import json
import os
import warnings
from pathlib import Path

from kolectra.corpus import compress, field_check
from kolectra.corpus.checked_json import jsonl_text_share
from kolectra.corpus.inputs import list_inputs


def _open_here(path: Path) -> list[str]:
    """This process's descriptors open on ``path``."""
    fds = Path("/proc/self/fd")
    found = []
    for fd in os.listdir(fds):
        try:
            if os.readlink(fds / fd) == str(path):
                found.append(fd)
        except OSError:
            continue
    return found


def _gz(tmp_path: Path) -> Path:
    path = tmp_path / "reviews.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(300):
            f.write(json.dumps({"id": i, "text": f"리뷰 {i} 재미있다"}, ensure_ascii=False) + "\n")
    return path


def test_a_closed_gzip_stream_closes_its_file(tmp_path):
    path = _gz(tmp_path)
    stream = compress.open_decompressed(str(path))
    with stream:
        assert stream.read(5)
    assert _open_here(path) == []  # before: the raw file, until collected
    with compress.open_decompressed(str(path)) as stream:  # a with block, as the checks before a job read
        stream.read()
    assert _open_here(path) == []


def test_the_checks_before_a_corpus_job_leave_no_gzip_input_open(tmp_path):
    path = _gz(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert field_check.text_field_problem(str(path), "auto", "text", 1 << 20) is None
        assert field_check.text_field_problem(str(path), "auto", "body", 1 << 20) is not None
        assert jsonl_text_share(list_inputs([str(path)]), "auto", "text", 1 << 20) is not None
        gc.collect()  # a file left open is closed here, by its collector, with the warning
    assert _open_here(path) == []
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_corpus_shard_read_by_the_vocab_and_examples_jobs_is_closed_after(tmp_path):
    """vocab/count.py and corpus/examples_beam.py read each corpus shard (.jsonl.gz) by read_lines, which
    closed its gzip stream and left the file under it open: 'ResourceWarning: unclosed file' in both jobs."""
    from kolectra.corpus.examples_beam import read_lines

    path = _gz(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert sum(len(lines) for _, lines in read_lines(str(path), 64)) == 300
        gc.collect()
    assert _open_here(path) == []
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
