"""Corpus inputs beyond the ones issue 17 listed, without running a Beam job: damaged archives of
every codec in more ways (empty, not that codec, garbage after the last member or frame, flipped
bytes mid-stream), inputs that cannot be recorded (a directory, a file name that is not UTF-8),
Beam options Beam refuses, and the reject-ratio message naming the file that matters."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import os

import pytest
import zstandard

from kolectra.corpus import build, inputs, reader, runners
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
    with pytest.raises(runners.BeamOptionError) as refused:
        runners.new_pipeline(runners.pipeline_options(args))
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_reject_ratio_names_the_file_with_most_rejected_lines():
    stats = build.make_stats({("source_in", "big.jsonl"): 100, ("source_rejected", "big.jsonl"): 60,
                              ("source_in", "tiny.txt.bz2"): 1, ("source_rejected", "tiny.txt.bz2"): 1,
                              ("rejected", "invalid_json"): 60, ("rejected", "damaged_file"): 1,
                              ("train", "documents"): 40}, default_config())
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
