"""The corpus stage's bounded reader (corpus/reader.py): every line becomes a record or a reject
with its 1-based line number; nothing crashes the job."""

import gzip
import io

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


def test_truncated_gzip_names_the_file(tmp_path):
    path = tmp_path / "broken.txt.gz"
    packed = gzip.compress(("문장\n" * 1000).encode("utf-8"))
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(reader.InputError, match="broken.txt.gz"):
        _read(path)


@pytest.mark.parametrize("suffix", [".txt.bz2", ".txt.zst"])
def test_other_codecs_read_and_fail_loudly_when_cut(tmp_path, suffix):
    import bz2

    import zstandard

    body = ("첫째 문장입니다\n" * 300).encode("utf-8")
    packed = bz2.compress(body) if suffix.endswith("bz2") else zstandard.ZstdCompressor().compress(body)
    good = tmp_path / ("good" + suffix)
    good.write_bytes(packed + (packed if suffix.endswith("zst") else b""))  # two zstd frames
    got = _read(good)
    assert len(got) == (600 if suffix.endswith("zst") else 300)
    assert got[-1]["text"] == "첫째 문장입니다"
    cut = tmp_path / ("cut" + suffix)
    cut.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(reader.InputError, match="cut" + suffix.replace(".", r"\.")):
        _read(cut)


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
