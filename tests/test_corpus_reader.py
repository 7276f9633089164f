"""The corpus stage's bounded reader (corpus/reader.py): every line becomes a record or a reject
with its 1-based line number; nothing crashes the job."""

import gzip
import hashlib
import io
import json

import pytest

from kolectra.corpus import reader


def _read(path, fmt="auto", max_line_bytes=1000):
    return list(reader.read_file(str(path), path.name, fmt, "text", "id", max_line_bytes))


def test_iter_lines_bounds_long_lines_across_chunks():
    data = b"short\n" + b"x" * 50 + b"\nafter\r\nlast-no-newline"
    got = list(reader.iter_lines(io.BytesIO(data), max_line_bytes=10, chunk_bytes=7))
    # line 4 has no final newline and is 15 bytes > 10
    assert got == [(1, b"short"), (2, None), (3, b"after"), (4, None)]
    got = list(reader.iter_lines(io.BytesIO(b"a\n\nb\n"), max_line_bytes=10))
    assert got == [(1, b"a"), (2, b""), (3, b"b")]
    # a long final line without newline is still one rejected line
    assert list(reader.iter_lines(io.BytesIO(b"ok\n" + b"y" * 40), 10, chunk_bytes=4)) == [(1, b"ok"), (2, None)]



def test_a_line_ending_in_several_carriage_returns_is_judged_the_same_wherever_the_chunks_fall():
    """10 bytes of content and ``\\r\\r\\n`` at a limit of 10: while reading, a line held past 11 bytes
    is over the limit, so a chunk ending between the two ``\\r`` rejected it and any other chunking
    kept it (a whole file and its pieces are read in chunks that fall in different places)."""
    data = b"ab\n" + b"x" * 10 + b"\r\r\n" + b"y" * 9 + b"\r\r\n" + b"z" * 10 + b"\r\r"
    seen = {tuple(reader.iter_lines(io.BytesIO(data), max_line_bytes=10, chunk_bytes=n)) for n in range(1, len(data) + 2)}
    assert seen == {((1, b"ab"), (2, None), (3, b"y" * 9), (4, None))}

def test_jsonl_rejects_carry_line_numbers(tmp_path):
    lines = [
        b'{"id": 7, "text": "\xec\xa2\x8b\xec\x9d\x80 \xec\x98\x81\xed\x99\x94"}',  # ok: 좋은 영화
        b'{"text": "bad \xff byte"}',
        b"[1, 2, 3]",
        b'{"id": "x", "body": "no text field"}',
        b'{"text": null}',
        b'{"text": 42}',
        b'{"text": "trunc',
        b'{"text": "' + b"a" * 2000 + b'"}',
        b'{"text": "no id here"}',
        b"",
    ]
    path = tmp_path / "mixed.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    got = _read(path)
    assert [(r["line"], r.get("reason")) for r in got] == [
        (1, None),
        (2, "invalid_utf8"),
        (3, "not_an_object"),
        (4, "missing_text"),
        (5, "missing_text"),
        (6, "text_not_string"),
        (7, "invalid_json"),
        (8, "line_too_long"),
        (9, None),
        (10, None),
    ]
    assert got[0]["text"] == "좋은 영화" and got[0]["id"] == "7"
    assert got[8]["id"] == "mixed.jsonl.gz:9"  # no id field -> source:line
    assert got[9]["text"] == ""  # blank line: a record, dropped later as empty
    assert all(r["source"] == "mixed.jsonl.gz" for r in got)


def test_text_format_reads_lines_verbatim(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_bytes('{"text": "json-looking"}\n한 줄\r\n'.encode("utf-8") + b"\xff\n")
    got = _read(path)
    assert got[0]["text"] == '{"text": "json-looking"}'  # text format never parses JSON
    assert got[1]["text"] == "한 줄"
    assert got[2]["reason"] == "invalid_utf8" and got[2]["line"] == 3


def test_format_detection_and_forcing(tmp_path):
    assert reader.resolve_format("a/b.jsonl.gz", "auto") == "jsonl"
    assert reader.resolve_format("a/b.NDJSON", "auto") == "jsonl"
    assert reader.resolve_format("a/b.txt.bz2", "auto") == "text"
    assert reader.resolve_format("a/b.jsonl", "text") == "text"
    path = tmp_path / "data.txt"
    path.write_text('{"text": "forced"}\n', encoding="utf-8")
    assert _read(path, fmt="jsonl")[0]["text"] == "forced"


def test_expand_inputs_and_source_names(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for p in ("a/x.txt", "b/x.txt", "b/y.txt"):
        (tmp_path / p).write_text("t\n", encoding="utf-8")
    files = reader.expand_inputs([str(tmp_path / "*" / "x.txt"), str(tmp_path / "b" / "*.txt")])
    assert files == sorted(str(tmp_path / p) for p in ("a/x.txt", "b/x.txt", "b/y.txt"))
    names = reader.source_names(files)
    assert sorted(names.values()) == ["a/x.txt", "b/x.txt", "b/y.txt"]  # unique, location-free
    with pytest.raises(reader.InputError, match="nothing.txt"):
        reader.expand_inputs([str(tmp_path / "nothing.txt")])


def _pack(codec: str, body: bytes) -> bytes:
    import bz2

    import zstandard

    return {"gz": lambda b: gzip.compress(b, mtime=0), "bz2": bz2.compress,
            "zst": lambda b: zstandard.ZstdCompressor().compress(b)}[codec](body)


@pytest.mark.parametrize("codec", ["gz", "bz2", "zst"])
def test_codecs_read_every_frame(tmp_path, codec):
    body = ("첫째 문장입니다\n" * 300).encode("utf-8")
    good = tmp_path / f"good.txt.{codec}"
    good.write_bytes(_pack(codec, body) * 2)  # two members / streams / frames, all read
    got = _read(good)
    assert len(got) == 600 and got[-1]["text"] == "첫째 문장입니다"



@pytest.mark.parametrize("codec", ["gz", "bz2", "zst"])
def test_a_line_that_compresses_to_nothing_is_read_in_bounded_memory(tmp_path, codec):
    """A file with a 48 MB run of NUL bytes (a crashed writer's zero-filled tail) compresses to a few
    kB. It is one ``line_too_long`` reject read in a few MB: the zstd and bzip2 readers held what a
    64 kB chunk of the file decompressed to whole (all of it), and copied what was left of it at every
    read (a 300 MB run took 682 s)."""
    import tracemalloc

    body = b"before\n" + bytes(48 << 20) + b"\nafter\n"
    path = tmp_path / f"zeros.txt.{codec}"
    path.write_bytes(_pack(codec, body))
    del body
    tracemalloc.start()
    try:
        got = [(r["line"], r.get("reason"), r.get("text")) for r in _read(path, max_line_bytes=1 << 20)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [(1, None, "before"), (2, "line_too_long", None), (3, None, "after")]
    assert peak < 16 << 20, peak

def _damage(packed: bytes, how: str) -> bytes:
    if how == "truncated":
        return packed[: len(packed) // 2]
    if how == "corrupted":  # bytes flipped in the middle of the compressed stream
        b = bytearray(packed)
        for i in range(len(b) // 2, len(b) // 2 + 8):
            b[i] ^= 0xA5
        return bytes(b)
    return b"plain text, not what the extension says\n" * 50  # "not_that_codec"


@pytest.mark.parametrize("how", ["truncated", "corrupted", "not_that_codec"])
@pytest.mark.parametrize("codec", ["gz", "bz2", "zst"])
def test_a_damaged_archive_is_one_dead_letter_naming_the_codec_and_line(tmp_path, codec, how):
    # hard-to-compress lines, so the codecs hand out blocks before the damaged one
    body = "".join(f"{i}번째 문장 {hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(6000)).encode("utf-8")
    path = tmp_path / f"broken.txt.{codec}"
    path.write_bytes(_damage(_pack(codec, body), how))
    digest: dict = {}
    got = list(reader.read_file(str(path), path.name, "auto", "text", "id", 1000, digest))
    *lines, last = got
    assert last["reason"] == "damaged_file" and last["source"] == "broken.txt." + codec
    assert last["line"] == len(lines) + 1 and f"after line {len(lines)}" in last["detail"]
    # what the codec handed out before the damage is kept (a garbled line is its own reject: bz2
    # checks a block's CRC only after handing out its bytes; zlib drops a failing chunk whole)
    assert all(r.get("reason") != "damaged_file" for r in lines)
    if how == "truncated" and codec != "bz2":  # bz2 hands out nothing of a block it has not finished
        assert len(lines) > 100
    # the whole file is hashed, damage or not: the recorded sha256 is the file's
    assert digest == {"bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def test_an_unopenable_file_is_a_dead_letter(tmp_path):
    got = list(reader.read_file(str(tmp_path / "gone.txt"), "gone.txt", "auto", "text", "id", 1000))
    assert [(r["line"], r["reason"]) for r in got] == [(1, "damaged_file")] and "cannot open" in got[0]["detail"]


def test_byte_order_mark_opens_a_file_without_rejecting_its_first_line(tmp_path):
    bom = b"\xef\xbb\xbf"
    (tmp_path / "a.jsonl").write_bytes(bom + '{"id": "1", "text": "첫 줄"}\n{"text": "둘째"}\n'.encode("utf-8"))
    (tmp_path / "b.txt").write_bytes(bom + "첫 줄\n".encode("utf-8"))
    (tmp_path / "c.txt").write_bytes(bom + "첫 블록\n\n둘째 블록\n".encode("utf-8"))
    assert [r.get("text") for r in _read(tmp_path / "a.jsonl")] == ["첫 줄", "둘째"]
    assert _read(tmp_path / "b.txt")[0]["text"] == "첫 줄"
    assert [r["text"] for r in _read(tmp_path / "c.txt", fmt="blocks")] == ["첫 블록", "둘째 블록"]


def test_lone_surrogates_are_repaired_and_said_so(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": "a\\udc80", "text": "좋은 \\ud800영화"}\n{"text": "짝 \\ud83d\\ude00 이모지"}\n', encoding="utf-8")
    first, second = _read(path)
    assert first["text"] == "좋은 영화" and first["id"] == "a\ufffd" and first["repaired"] == "lone_surrogate"
    assert second["text"] == "짝 \U0001F600 이모지" and "repaired" not in second  # a proper pair is a character
    for rec in (first, second):
        json.dumps(rec, ensure_ascii=False).encode("utf-8")  # encodable now


def test_blocks_format_reads_blank_line_separated_documents(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_bytes(
        "첫 문서 첫 줄\n첫 문서 둘째 줄\n\n\n둘째 문서\n\n".encode("utf-8")
        + b"bad \xff\nstill bad block\n\n"
        + (b"x" * 30 + b"\n") * 3
        + "\n마지막 문서".encode("utf-8")
    )
    got = _read(path, fmt="blocks", max_line_bytes=64)
    assert [(r["line"], r.get("reason"), r.get("text")) for r in got] == [
        (1, None, "첫 문서 첫 줄\n첫 문서 둘째 줄"),
        (5, None, "둘째 문서"),
        (7, "invalid_utf8", None),
        (10, "block_too_long", None),  # 3 x 31 bytes > 64
        (14, None, "마지막 문서"),
    ]
    assert got[0]["id"] == "docs.txt:1"


def test_a_damaged_blocks_file_names_the_last_line_read(tmp_path):
    """A truncated gzip of blocks: the ``damaged_file`` dead letter is at the line after the last
    one decompressed, as in a file of lines (it named the line after the first line of the last
    whole block, a line inside that block)."""
    import zlib

    body = "".join(f"{i}번째 {hashlib.sha256(str(i).encode()).hexdigest()}\n" + ("\n" if i % 50 == 49 else "")
                   for i in range(6000)).encode("utf-8")
    packed = gzip.compress(body, mtime=0)
    cut = packed[: len(packed) // 2]
    read = zlib.decompressobj(31).decompress(cut).count(b"\n")  # the whole lines before the cut
    path = tmp_path / "blocks.txt.gz"
    path.write_bytes(cut)
    *blocks, last = _read(path, "blocks")
    assert blocks[-1]["line"] + 49 < read < blocks[-1]["line"] + 101  # a block was being read
    assert last["reason"] == "damaged_file" and last["line"] == read + 1
    assert f"gzip error after line {read}:" in last["detail"]
