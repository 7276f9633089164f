"""Corpus inputs beyond the ones issue 17 listed, without running a Beam job: damaged archives of
every codec in more ways (empty, not that codec, garbage after the last member or frame, flipped
bytes mid-stream), inputs that cannot be recorded (a directory, a file name that is not UTF-8),
an input replaced by a FIFO or a device after the listing (issue 43: the job hung on it), Beam
options Beam refuses, and the reject-ratio message naming the file that matters."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import os
import tempfile
import threading
from contextlib import contextmanager

import apache_beam as beam
import pytest
import zstandard

from kolectra.core import scratch
from kolectra.corpus import build, examples_beam, inputs, reader, runners
from kolectra.corpus.config import default_config

TEXT = "".join(f"{i}번째 줄 좋은 영화였어요 {i * i}\n" for i in range(3000)).encode()
PACK = {"gz": lambda b: gzip.compress(b, mtime=0), "bz2": bz2.compress, "zst": zstandard.ZstdCompressor().compress}


def _read(path) -> tuple[int, list[dict]]:
    """(records, damaged_file rejects) of one file, as the corpus job's reader yields them."""
    rows = list(reader.read_file(str(path), path.name, "auto", "text", "id", 1 << 20))
    return sum("text" in r for r in rows), [r for r in rows if r.get("reason") == "damaged_file"]


def _flipped(data: bytes) -> bytes:
    out = bytearray(data)
    for i in range(len(out) // 2, len(out) // 2 + 40):
        out[i] ^= 0x5A
    return bytes(out)


@pytest.mark.parametrize("codec", sorted(PACK))
@pytest.mark.parametrize("damage", ["empty", "not that codec", "flipped mid-stream", "garbage after the end"])
def test_every_damaged_archive_is_one_dead_letter_naming_the_codec(tmp_path, codec, damage):
    packed = PACK[codec](TEXT)
    data = {"empty": b"", "not that codec": TEXT[:500], "flipped mid-stream": _flipped(packed),
            "garbage after the end": PACK[codec](TEXT[:300]) + b"garbage here"}[damage]
    path = tmp_path / f"in.txt.{codec}"
    path.write_bytes(data)
    kept, damaged = _read(path)
    assert len(damaged) == 1 and damaged[0]["source"] == path.name, damaged
    assert damaged[0]["detail"].startswith({"gz": "gzip", "bz2": "bz2", "zst": "zstd"}[codec])
    if damage == "garbage after the end":  # the complete member or frame before the garbage is kept
        assert kept == TEXT[:300].count(b"\n")
    if damage == "empty":
        assert "empty" in damaged[0]["detail"]


def test_an_intact_archive_of_nothing_is_not_damaged(tmp_path):
    for codec, pack in PACK.items():
        path = tmp_path / f"nothing.txt.{codec}"
        path.write_bytes(pack(b""))
        assert _read(path) == (0, []), codec


def test_a_directory_or_a_name_that_is_not_utf8_is_refused_naming_it(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.txt").write_text("좋은 영화였어요\n", encoding="utf-8")
    for given in (str(tmp_path / "dir"), str(tmp_path / "dir") + "/"):
        with pytest.raises(inputs.InputError, match=r"is a directory.*dir/\*"):
            inputs.list_inputs([given])
    assert [f.path for f in inputs.list_inputs([str(tmp_path / "dir" / "*")])] == [str(tmp_path / "dir" / "a.txt")]
    bad = os.path.join(os.fsencode(tmp_path / "dir"), b"\xffname.txt")
    with open(bad, "wb") as f:
        f.write("이름이 이상한 파일\n".encode())
    with pytest.raises(inputs.InputError, match=r"not valid UTF-8"):
        inputs.list_inputs([str(tmp_path / "dir" / "*")])


@pytest.mark.parametrize("args, said", [
    (["--runner", "NoSuchRunner"], "Unexpected pipeline runner: NoSuchRunner"),
    (["--runner=DataflowRunner"], "Missing required option: project"),
])
def test_options_beam_refuses_are_one_line(args, said):
    with pytest.raises(runners.BeamOptionError) as refused, runners.new_pipeline(runners.pipeline_options(args)):
        pass
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_job_stopped_before_it_runs_leaves_no_beam_temp_folder(tmp_path, monkeypatch):
    # Beam makes a beam-pipeline-temp* folder in the system's temp directory for each pipeline and
    # removes it only when the pipeline runs: bad input found while the graph is built (or Ctrl-C
    # then) must not leave one behind per attempt.
    # It is a kolectra scratch folder (Beam's beam-pipeline-temp* was never swept after a kill -9:
    # tests/test_scratch.py), and Beam's own is gone as soon as the pipeline is made.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(inputs.InputError, match="found while"), \
            runners.new_pipeline(runners.pipeline_options([])) as p:
        assert os.path.dirname(p.local_tempdir) == str(tmp_path) and os.path.isdir(p.local_tempdir)
        assert scratch.owner(os.path.basename(p.local_tempdir)) == (
            "beam", os.getpid(), scratch._own_start(), scratch.HOST)
        assert os.listdir(tmp_path) == [os.path.basename(p.local_tempdir)]
        _ = p | beam.Create(["문장"])
        raise inputs.InputError("found while the graph is built")
    with runners.new_pipeline(runners.pipeline_options([])) as p:  # a job that runs, as before
        _ = p | beam.Create(["문장"]) | beam.Map(len)
    assert list(tmp_path.iterdir()) == []


def test_inputs_without_a_record_are_named_in_words_a_few_of_them():
    stats = build.make_stats({}, default_config(), {f"e{i}.jsonl": {"records_in": 0, "rejected": 0} for i in range(5)})
    stats["records_out"] = 0
    with pytest.raises(build.CorpusError) as empty:
        build.check_stats(stats, default_config(), {f"e{i}.jsonl": f"/in/e{i}.jsonl" for i in range(5)})
    assert str(empty.value) == ("the inputs hold no records: the 5 input file(s) are empty or hold only blank lines "
                                "(/in/e0.jsonl, /in/e1.jsonl, /in/e2.jsonl and 2 more)")


def test_the_reject_ratio_names_the_file_with_most_rejected_lines():
    stats = build.make_stats({("records_in",): 101, ("rejected", "invalid_json"): 60, ("rejected", "damaged_file"): 1,
                              ("train", "documents"): 40}, default_config(),
                             {"big.jsonl": {"records_in": 100, "rejected": 60},
                              "tiny.txt.bz2": {"records_in": 1, "rejected": 1}})
    stats["records_out"] = stats["records_in"] - stats["rejected"]
    with pytest.raises(build.CorpusError, match=r"worst file: /in/big.jsonl \(60 of 100"):
        build.check_stats(stats, dataclasses.replace(default_config(), max_damaged_files=1),
                          {"big.jsonl": "/in/big.jsonl", "tiny.txt.bz2": "/in/tiny.txt.bz2"})


def test_concatenated_streams_are_read_whole_and_a_damaged_later_one_is_named(tmp_path):
    """pbzip2 and pzstd write one stream per block: every one is read, and a later stream whose
    header was damaged is reported (Python's bz2 module alone would drop it and the rest)."""
    halves = TEXT[:len(TEXT) // 2], TEXT[len(TEXT) // 2:]
    for codec in ("bz2", "zst"):
        whole = tmp_path / f"whole.txt.{codec}"
        whole.write_bytes(b"".join(PACK[codec](h) for h in halves))
        assert _read(whole) == (TEXT.count(b"\n"), []), codec
        second = bytearray(PACK[codec](halves[1]))
        second[:4] = b"XXXX"  # the second stream's magic number
        cut = tmp_path / f"cut.txt.{codec}"
        cut.write_bytes(PACK[codec](halves[0]) + bytes(second))
        kept, damaged = _read(cut)
        assert kept == halves[0].count(b"\n") and len(damaged) == 1, (codec, kept, damaged)


@contextmanager
def _unblocked_after(fifo, seconds: float = 60.0):
    """Yields a list that is non-empty if ``fifo``'s reader had to be set free: after ``seconds``, a
    writer opens the pipe and closes it, so a read blocked on it ends (with nothing) and the test
    fails instead of hanging the suite."""
    done, fired = threading.Event(), []

    def unblock():
        if done.wait(seconds):
            return
        while not done.is_set():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # ENXIO until a reader waits
                fired.append(True)
            except OSError:
                pass
            done.wait(0.2)

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield fired
    finally:
        done.set()
        thread.join()


def _rotate_into_a_pipe(path) -> None:
    os.remove(path)
    os.mkfifo(path)


def test_an_input_replaced_by_a_fifo_after_listing_is_a_counted_damaged_file_not_a_hang(tmp_path):
    """A log rotated into a pipe between the listing and the read: the worker's open refuses it as
    the listing would, one ``damaged_file`` reject naming what it is; the job fails in one line
    unless ``max_damaged_files`` accepts it, and then the other files are read as before."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_bytes(TEXT)
    (tmp_path / "in" / "b.log.txt").write_bytes(TEXT[:2000])
    listed = inputs.list_inputs([str(tmp_path / "in" / "*.txt")])
    _rotate_into_a_pipe(tmp_path / "in" / "b.log.txt")
    with _unblocked_after(tmp_path / "in" / "b.log.txt") as fired:
        with pytest.raises(build.CorpusError) as failed:
            build.build(default_config(), [], tmp_path / "out", [], listed=listed)
    assert not fired, "the job waited on the pipe"
    message = str(failed.value)
    assert "1 damaged input file(s)" in message and "b.log.txt" in message and "named pipe (FIFO)" in message
    assert "\n" not in message
    with _unblocked_after(tmp_path / "in" / "b.log.txt") as fired:
        output = build.build(dataclasses.replace(default_config(), max_damaged_files=1), [], tmp_path / "out2", [],
                             listed=listed)
    assert not fired
    stats = output.stats
    assert stats["rejected_reasons"]["damaged_file"] == 1 and "named pipe" in stats["sources"]["b.log.txt"]["damaged"]
    assert stats["sources"]["a.txt"]["sha256"] and stats["records_in"] == TEXT.count(b"\n") + 1


@pytest.mark.parametrize("name", ["in.jsonl", "in.txt.gz", "in.parquet"])
def test_the_reader_refuses_a_pipe_or_device_in_place_of_a_listed_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"")
    [listed] = inputs.list_inputs([str(path)])
    _rotate_into_a_pipe(path)
    with _unblocked_after(path) as fired:
        rows = list(reader.read_file(listed.path, name, "auto", "text", "id", 1 << 20))
    assert not fired, "the reader waited on the pipe"
    [reject] = rows
    assert reject["reason"] == "damaged_file" and "named pipe (FIFO), not a regular file" in reject["detail"]
    os.remove(path)
    os.symlink("/dev/zero", path)  # read, it would never end
    [reject] = list(reader.read_file(listed.path, name, "auto", "text", "id", 1 << 20))
    assert reject["reason"] == "damaged_file" and "a character device" in reject["detail"]


def test_the_examples_job_refuses_a_pipe_in_place_of_a_corpus_shard_or_holdout_file(tmp_path):
    path = tmp_path / "train-00000-of-00001.jsonl.gz"
    os.mkfifo(path)
    with _unblocked_after(path) as fired:
        with pytest.raises(inputs.InputError, match="named pipe"):
            list(examples_beam.read_lines(str(path), 64))
        with pytest.raises(inputs.InputError, match="named pipe"):
            examples_beam.read_holdout(str(path))
    assert not fired
