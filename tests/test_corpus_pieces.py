"""Large input files read in pieces by several workers (corpus/pieces.py): the cuts fall on line
(or, in blocks, blank-line) starts with the right line numbers whatever the reads' sizes; the
pieces' records are the whole file's, line for line, in every line format; and the corpus is the
same bytes, on a disk and in a bucket, for Parquet files too, whatever ``split_bytes`` is. A file
changed between the plan and a piece's read fails the job; one the plan cannot read is read whole,
as before; a large compressed file is decompressed once into copies of its pieces, removed after
the job, and a damaged one is read whole, dead-lettered at the damage as before."""

import dataclasses
import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kolectra.core import storage
from kolectra.corpus import build, inputs, parquet_records, piece_reader, pieces, progress, reader
from kolectra.corpus.config import default_config
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

WORDS = ["영화", "정말", "재미있다", "배우", "연기", "최고", "지루한", "스토리", "감동", "결말"]
MAX_LINE = 4000


def _messy(n: int, fmt: str, seed: int = 1) -> bytes:
    """``n`` lines of ``fmt`` with what a real file holds: a byte-order mark, blank and
    whitespace-only lines, CRLF endings, over-long lines, bad UTF-8, broken JSON, numeric ids,
    copies of one text, and no newline at the end."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        r = rng.random()
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 30)))
        if r < 0.05:
            lines.append(b"")
        elif r < 0.07:
            lines.append(b" \t\r")
        elif r < 0.08:
            lines.append(b"x" * (MAX_LINE + rng.randint(1, 3000)))
        elif r < 0.09:
            lines.append(b"\xff\xfe " + text.encode())
        elif r < 0.10:
            lines.append(b"\xec\x98\x81\xed\x99\x94 copy")  # one text, many times
        elif fmt == "jsonl" and r < 0.13:
            lines.append(b'{"text": "unterminated')
        elif fmt == "jsonl":
            doc = {"id": i if r < 0.5 else f"d{i}", "text": text} if r < 0.9 else {"text": text}
            lines.append(json.dumps(doc, ensure_ascii=False).encode())
        else:
            lines.append(text.encode())
        if r > 0.95:
            lines[-1] += b"\r"
    return reader.BOM + b"\n".join(lines)


def _lines_with_starts(data: bytes):
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A and i + 1 < len(data)]
    return starts


@pytest.mark.parametrize("blocks", [False, True])
def test_cuts_fall_on_line_starts_with_their_numbers_whatever_the_reads(blocks):
    data = _messy(600, "text", seed=3)
    starts = _lines_with_starts(data)
    line_at = {s: n for n, s in enumerate(starts, 1)}
    ends = {s: data.find(b"\n", s) for s in starts}

    def blank(s):
        end = ends[s]
        return end >= 0 and not data[s:end].strip() and end - s <= pieces.BLANK_MAX

    for every in (1 << 10, 3000, 7919):
        expected, target = [], every
        for s in starts:  # brute force: the first (blank) line start at or after each target
            if s >= target and s > 0 and (not blocks or blank(s)):
                expected.append((s, line_at[s]))
                target = s // every * every + every
        assert len(expected) >= len(data) // every // (4 if blocks else 2)
        rng = random.Random(every)
        for size in (1, 7, 4096, 1 << 20, None):  # the reads' sizes never move a cut
            if size is None:
                sizes = [rng.randint(1, 5000) for _ in range(len(data))]
            else:
                sizes = [size] * len(data)
            chunks, at = [], 0
            for k in sizes:
                if at >= len(data):
                    break
                chunks.append(data[at:at + k])
                at += k
            assert list(pieces.cuts(chunks, every, blocks)) == expected, (every, size)


def _write(tmp_path: Path, name: str, data: bytes) -> inputs.InputFile:
    path = tmp_path / name
    path.write_bytes(data)
    return inputs.identify(str(path))


@pytest.mark.parametrize("fmt", ["text", "jsonl", "blocks"])
@pytest.mark.parametrize("end", [b"", b"\n", b"\n\n"])
def test_the_pieces_records_are_the_whole_files_line_for_line(tmp_path, fmt, end):
    listed = _write(tmp_path, "big.jsonl" if fmt == "jsonl" else "big.txt", _messy(2000, fmt, seed=5) + end)
    args = (fmt, "text", "id", MAX_LINE)
    whole_digest = {}
    whole = list(reader.read_file(listed.path, "big", *args, whole_digest, ("id",) if fmt != "text" else ()))
    for every in (1 << 10, 10_000):
        digest, planned = pieces.plan(listed, every, fmt, MAX_LINE)
        assert digest == {"bytes": listed.bytes, "sha256": whole_digest["sha256"]}
        assert len(planned) > listed.bytes // every // (4 if fmt == "blocks" else 2)
        assert planned[0].start == 0 and planned[-1].end == listed.bytes
        assert all(p.start < p.end for p in planned)
        assert all(a.end == b.start for a, b in zip(planned, planned[1:]))
        read = []
        for piece in planned:
            got = {}
            read += piece_reader.read_piece(listed.path, "big", *args, piece, got, ("id",) if fmt != "text" else ())
            assert got == {"bytes": piece.end - piece.start}
        assert read == whole
    reasons = {r.get("reason") for r in whole}
    assert {"line_too_long" if fmt != "blocks" else "block_too_long", "invalid_utf8"} <= reasons


def _tree(out: Path) -> dict:
    return {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _corpus(inp: str, out: Path, **sets) -> dict:
    cfg = dataclasses.replace(default_config(), max_line_bytes=MAX_LINE, max_reject_ratio=0.5, **sets)
    build.build(cfg, [inp], out, [])
    return _tree(out)


def test_the_corpus_is_the_same_bytes_in_pieces_or_whole_when_the_plan_fails(tmp_path, monkeypatch):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "big.jsonl").write_bytes(_messy(1500, "jsonl", seed=7))
    (inp / "big.txt").write_bytes(_messy(800, "text", seed=8))
    (inp / "small.txt").write_bytes(b"\n".join(_messy(8, "text", seed=9).split(b"\n")[1:]) + b"\n")
    (inp / "zipped.jsonl.gz").write_bytes(gzip.compress(_messy(60, "jsonl", seed=10)))  # under 8 KiB decompressed
    real, planned = pieces.plan, []

    def counted(listed, *args, **kw):  # the in-process worker calls this module's plan
        planned.append(Path(listed.path).name)
        return real(listed, *args, **kw)

    monkeypatch.setattr(pieces, "plan", counted)
    whole = _corpus(str(inp / "*"), tmp_path / "whole")
    assert planned == []
    split = _corpus(str(inp / "*"), tmp_path / "split", split_bytes=1 << 10)
    assert sorted(planned) == ["big.jsonl", "big.txt"]  # the small and the compressed one stay whole
    assert split == whole

    def refusing(listed, *args, **kw):  # a file the plan cannot read (gone, not allowed) is read whole
        planned.append(Path(listed.path).name)
        raise PermissionError("not allowed")

    monkeypatch.setattr(pieces, "plan", refusing)
    assert _corpus(str(inp / "*"), tmp_path / "refused", split_bytes=1 << 10) == whole
    assert sorted(planned[2:]) == ["big.jsonl", "big.txt"]
    rows = [json.loads(line) for line in whole[Path("stats/files.jsonl")].splitlines()]
    assert [r["source"] for r in rows] == ["big.jsonl", "big.txt", "small.txt", "zipped.jsonl.gz"]
    assert rows[0]["records_in"] == 1500 and rows[0]["rejected"] > 50


def test_a_file_changed_after_its_plan_fails_the_job_naming_it(tmp_path, monkeypatch):
    inp = tmp_path / "in"
    inp.mkdir()
    big = inp / "big.txt"
    big.write_bytes(_messy(800, "text", seed=12))
    real, reads = piece_reader.read_piece, []

    def rewritten_first(path, source, fmt, text_field, id_field, max_line_bytes, piece, *args):
        if not reads:  # after the plan's own check: only the pieces' reads can see it
            data = big.read_bytes()
            big.write_bytes(data[:100] + b"\n" + data[101:])  # the same size, one line more: a new time stamp
        reads.append(piece.index)
        yield from real(path, source, fmt, text_field, id_field, max_line_bytes, piece, *args)

    monkeypatch.setattr(piece_reader, "read_piece", rewritten_first)
    with pytest.raises(build.CorpusError, match=r"1 input file\(s\) changed while the job read them.*big\.txt"):
        _corpus(str(inp / "*"), tmp_path / "out", split_bytes=1 << 10)
    assert len(reads) > 10


def test_a_large_file_in_a_bucket_is_read_in_pieces_to_the_same_corpus(tmp_path, bucket):  # noqa: F811
    data = _messy(1500, "jsonl", seed=13)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "big.jsonl").write_bytes(data)
    storage.write_bytes(f"{bucket}/raw/big.jsonl", data)
    local = _corpus(str(tmp_path / "in" / "big.jsonl"), tmp_path / "local", split_bytes=8 << 10)
    remote = _corpus(f"{bucket}/raw/big.jsonl", tmp_path / "remote", split_bytes=8 << 10)
    assert remote == local


def test_which_files_are_read_in_pieces():
    big = 200 << 20
    assert pieces.splittable(inputs.InputFile("a.jsonl", big, "x"), "auto", 128 << 20)
    assert pieces.splittable(inputs.InputFile("a.txt", big, "x"), "blocks", 128 << 20)
    assert not pieces.splittable(inputs.InputFile("a.txt", 100 << 20, "x"), "auto", 128 << 20)
    # a compressed file is copied in pieces once over COPY_OVER x split_bytes decompressed (1 GiB)
    assert pieces.splittable(inputs.InputFile("a.jsonl.gz", 400 << 20, "x"), "auto", 128 << 20)
    assert not pieces.splittable(inputs.InputFile("a.jsonl.gz", 300 << 20, "x"), "auto", 128 << 20)
    assert not pieces.splittable(inputs.InputFile("a.parquet.gz", 400 << 20, "x"), "parquet", 128 << 20)
    assert pieces.splittable(inputs.InputFile("a.parquet", big, "x"), "auto", 128 << 20)  # between row groups
    assert not pieces.splittable(inputs.InputFile("a.parquet", 100 << 20, "x"), "auto", 128 << 20)


def test_the_progress_line_shows_the_large_files_first_pass():
    assert progress.describe({"bytes": 0, "indexed": 52_000_000}, 100_000_000).endswith(
        ", large files indexed 52.0 MB")
    assert "indexed" not in progress.describe({"bytes": 1}, 10)


def test_row_groups_make_pieces_of_about_split_bytes_never_cut():
    groups = [(10, 400), (5, 700), (7, 100), (3, 2000), (4, 50)]
    assert pieces.row_group_pieces(groups, 1000) == [
        pieces.Piece(0, 0, 2, 1, True), pieces.Piece(1, 2, 4, 16, True), pieces.Piece(2, 4, 5, 26, True)]
    assert pieces.row_group_pieces(groups, 1 << 30) == [pieces.Piece(0, 0, 5, 1, True)]
    assert pieces.row_group_pieces([], 1000) == []


def test_a_parquet_file_is_read_in_pieces_of_row_groups_to_the_same_corpus(tmp_path, monkeypatch):
    rng = random.Random(14)
    texts = [None if rng.random() < 0.05 else " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 25)))
             for _ in range(900)]
    inp = tmp_path / "in"
    inp.mkdir()
    table = pa.table({"text": texts, "id": pa.array([None if i % 7 == 0 else 5000 + i for i in range(900)], pa.int64()),
                      "rating": [i % 10 for i in range(900)]})
    pq.write_table(table, inp / "reviews.parquet", row_group_size=40)  # 23 row groups
    real, planned = pieces.plan, []

    def counted(listed, *args, **kw):
        out = real(listed, *args, **kw)
        planned.append(len(out[1]))
        return out

    monkeypatch.setattr(pieces, "plan", counted)
    sets = {"keep_fields": ("rating",)}
    whole = _corpus(str(inp / "*"), tmp_path / "whole", **sets)
    split = _corpus(str(inp / "*"), tmp_path / "split", split_bytes=1 << 10, **sets)
    assert planned and planned[0] > 5
    assert split == whole
    row = json.loads(whole[Path("stats/files.jsonl")])
    assert row["records_in"] == 900 and row["rejected"] == texts.count(None)


def _damaged_parquet(path: Path, groups: tuple[int, ...]) -> int:
    """900 rows in row groups of 40 (zstd), the text column's dictionary page garbled in ``groups``
    (zstd then fails on it: that group's rows cannot be decoded); the rows in the other groups."""
    rng = random.Random(15)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 25))) for _ in range(900)]
    pq.write_table(pa.table({"text": texts, "id": [f"r{i}" for i in range(900)]}), path, row_group_size=40,
                   compression="zstd")
    data = bytearray(path.read_bytes())
    meta = pq.ParquetFile(path).metadata
    for g in groups:
        at = meta.row_group(g).column(0).dictionary_page_offset + 30
        data[at:at + 60] = bytes(b ^ 0x5A for b in data[at:at + 60])
    path.write_bytes(bytes(data))
    return 900 - 40 * len(groups)


def test_a_damaged_parquet_page_loses_its_row_group_read_whole_or_in_pieces(tmp_path):
    path = tmp_path / "damaged.parquet"
    kept = _damaged_parquet(path, (3, 9))
    read = lambda groups=None, done=0: list(parquet_records.parquet_rows(  # noqa: E731
        str(path), "damaged.parquet", "text", "id", MAX_LINE, (), groups, done))
    whole = read()
    damage = [r for r in whole if r.get("reason") == "damaged_file"]
    assert [r["row"] for r in damage] == [120, 360]  # each damaged group once, at its first row
    assert sum("reason" not in r for r in whole) == kept  # the groups after a damaged one are read
    for size in (1, 2, 5, 23):  # pieces of `size` groups, each starting at its first row's number
        pieces_read = [r for start in range(0, 23, size) for r in read(range(start, min(start + size, 23)), start * 40)]
        assert pieces_read == whole


def test_a_damaged_parquet_file_gives_the_same_corpus_whatever_split_bytes(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    kept = _damaged_parquet(inp / "damaged.parquet", (3, 9))
    whole = _corpus(str(inp / "*"), tmp_path / "whole", max_damaged_files=1)
    split = _corpus(str(inp / "*"), tmp_path / "split", max_damaged_files=1, split_bytes=1 << 10)
    assert split == whole
    row = json.loads(whole[Path("stats/files.jsonl")])
    assert row["records_in"] - row["rejected"] == kept and "after row 120" in row["damaged"]  # the first damage


def _zst(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("codec", ["gz", "bz2", "zst"])
def test_a_large_compressed_file_is_copied_in_pieces_to_the_same_corpus(tmp_path, monkeypatch, codec):
    pack = {"gz": gzip.compress, "bz2": __import__("bz2").compress, "zst": _zst}[codec]
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / f"big.jsonl.{codec}").write_bytes(pack(_messy(1200, "jsonl", seed=15)))
    (inp / f"more.txt.{codec}").write_bytes(pack(_messy(900, "text", seed=16)))
    real, copies = pieces.plan, []

    def counted(listed, *args, **kw):
        out = real(listed, *args, **kw)
        copies.extend(p.copy for p in out[1])
        return out

    monkeypatch.setattr(pieces, "plan", counted)
    whole = _corpus(str(inp / "*"), tmp_path / "whole")
    split = _corpus(str(inp / "*"), tmp_path / "split", split_bytes=1 << 10)
    assert len(copies) > 20 and all(c.endswith(".zst") for c in copies)
    assert split == whole
    assert not any(Path(c).exists() for c in copies)  # removed with the job's scratch


def test_a_damaged_compressed_file_is_read_whole_as_before(tmp_path, monkeypatch):
    inp = tmp_path / "in"
    inp.mkdir()
    data = gzip.compress(_messy(1500, "text", seed=17))
    (inp / "cut.txt.gz").write_bytes(data[: len(data) * 2 // 3])  # truncated: a damaged_file at the cut
    real, tried = pieces.plan, []

    def counted(listed, *args, **kw):
        tried.append(listed.path)
        return real(listed, *args, **kw)

    monkeypatch.setattr(pieces, "plan", counted)
    whole = _corpus(str(inp / "*"), tmp_path / "whole", max_damaged_files=1)
    split = _corpus(str(inp / "*"), tmp_path / "split", max_damaged_files=1, split_bytes=1 << 10)
    assert tried == [str(inp / "cut.txt.gz")] and split == whole
    assert b'"reason": "damaged_file"' in whole[Path("rejects/rejects.jsonl")]
    assert not list((tmp_path / "split").rglob("*.zst"))


@pytest.mark.parametrize("blocks", [False, True])
def test_the_copies_hold_the_files_lines_cut_where_the_plan_cuts_whatever_the_reads(tmp_path, monkeypatch, blocks):
    import zstandard

    from kolectra.corpus import piece_copies

    rng = random.Random(18)  # blocks of lines between blank lines of up to 60 spaces and tabs: cuts near reads' ends
    data = b"".join(rng.choice(WORDS).encode() * rng.randint(1, 9) + b"\n"
                    + (b"".join(rng.choice([b" ", b"\t"]) for _ in range(rng.randint(0, 60))) + b"\n"
                       if rng.random() < 0.5 else b"") for _ in range(3000))
    listed = _write(tmp_path, "big.txt.gz", gzip.compress(data))
    expected = list(pieces.cuts([data], 1 << 12, blocks))
    for read in (97, 5000, 1 << 20):  # reads smaller and larger than what is held back (KEEP)
        monkeypatch.setattr(piece_copies, "READ", read)
        digest, planned = pieces.plan(listed, 1 << 12, "blocks" if blocks else "text", MAX_LINE, None,
                                      str(tmp_path / f"copies-{read}"), "f")
        assert [(p.start, p.first_line) for p in planned[1:]] == expected
        texts = [zstandard.ZstdDecompressor().decompressobj().decompress(Path(p.copy).read_bytes()) for p in planned]
        assert b"".join(texts) == data and [len(t) for t in texts] == [p.end - p.start for p in planned]
        assert digest["bytes"] == listed.bytes
