"""``kolectra corpus`` on Parquet input (``--format parquet``, or ``auto`` on ``*.parquet``), driven
through the CLI on the real corpus job (Beam in-process, real Kiwi) over files pyarrow writes:

- a row is a document: its text from ``--text-field``, its id from ``--id-field`` (a number
  column's ids spelled as JSONL's are), ``--keep-fields`` columns carried as JSON values (strings
  stay strings, dates ISO 8601, decimals their exact digits);
- a null text, a file without the text column, a text column that is not a string, and a file that
  is not Parquet are counted rejects naming the source, the row number and the 0-based row offset;
  the counts reconcile;
- the same files in a bucket (moto's S3 server) give the same documents;
- rows are read in bounded batches, one row group at a time: Arrow's memory stays a small share
  of the file's text (those tests: tests/test_corpus_parquet_batches.py).
"""

from __future__ import annotations

import datetime
import decimal
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kolectra.core import storage, store_glob
from kolectra.corpus import parquet, parquet_records, reader
from kolectra.pipeline.cli import main
from tests.corpus_parquet_support import _own_cache, _verbosity  # noqa: F401  (autouse fixtures)
from tests.s3_support import bucket, s3_endpoint  # noqa: F401  (fixtures)

WORDS = "영화 정말 재밌었어요 배우 연기 최고 지루했다 스토리 감동 음악 좋았고 별로 다시 보고 싶다".split()
N = 30
NULL_TEXT = (4, 17)  # rows whose text is null


def _text(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(6)) + f" {i}번"


def _write_inputs(root: Path) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    reviews = pa.table({
        "body": [None if i in NULL_TEXT else _text(i) for i in range(N)],
        "review_id": pa.array([1000 + i for i in range(N)], pa.int64()),
        "movie": [f"{i:05d}" for i in range(N)],  # "00007": a string that looks like a number
        "flag": ["true" if i % 2 else "false" for i in range(N)],
        "day": pa.array([datetime.date(2020, 1, 1 + i % 28) for i in range(N)], pa.date32()),
        "price": pa.array([decimal.Decimal(f"{i}.02") for i in range(N)], pa.decimal128(6, 2)),
        "rating": pa.array([None if i % 5 == 0 else i % 10 for i in range(N)], pa.int64()),
    })
    pq.write_table(reviews, root / "reviews.parquet", row_group_size=7)  # 5 row groups
    pq.write_table(pa.table({"body": pa.array([1, 2], pa.int64())}), root / "numbers.parquet")
    pq.write_table(pa.table({"title": ["제목만 있는 행입니다"]}), root / "no_text.parquet")
    (root / "broken.parquet").write_bytes(b"PAR1 this is not a parquet file at all")
    return sorted(root.glob("*.parquet"))


ARGS = ["--text-field", "body", "--id-field", "review_id", "--keep-fields", "movie,flag,day,price,rating",
        "--set", "num_shards=1", "--set", "valid_fraction=0", "--set", "max_reject_ratio=0.5",
        "--set", "max_damaged_files=1"]


def _corpus(capsys, inputs: list[str], out: str) -> Path | str:
    argv = ["corpus", *[a for i in inputs for a in ("--input", i)], *ARGS, "--out", out]
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out.strip().splitlines()[-1]


def _documents(art: str) -> list[dict]:
    return [json.loads(line) for f in sorted(store_glob.glob(f"{art}/data/*.jsonl.gz"))
            for line in gzip.decompress(storage.read_bytes(f)).decode("utf-8").splitlines()]


def test_parquet_rows_become_documents_and_bad_rows_counted_rejects(tmp_path, capsys):
    files = _write_inputs(tmp_path / "in")
    art = _corpus(capsys, [str(tmp_path / "in" / "*.parquet")], str(tmp_path / "store"))
    stats = json.loads(Path(art, "stats.json").read_text(encoding="utf-8"))
    docs = _documents(art)

    assert stats["records_in"] == N + 2 + 1 + 1  # every row of every file, and the broken file's one record
    assert stats["records_in"] == stats["records_out"] + stats["rejected"] + sum(stats["dropped"].values())
    reasons = {k: v for k, v in stats["rejected_reasons"].items() if v}
    assert reasons == {"missing_text": len(NULL_TEXT) + 1, "text_not_string": 2, "damaged_file": 1}
    assert stats["records_out"] == N - len(NULL_TEXT) == len(docs)

    rejects = [json.loads(line) for line in Path(art, "rejects", "rejects.jsonl").read_text().splitlines()]
    where = sorted((r["source"], r["line"], r["row"], r["reason"]) for r in rejects)
    assert where == [("broken.parquet", 1, 0, "damaged_file"), ("no_text.parquet", 1, 0, "missing_text"),
                     ("numbers.parquet", 1, 0, "text_not_string"), ("numbers.parquet", 2, 1, "text_not_string"),
                     ("reviews.parquet", 5, 4, "missing_text"), ("reviews.parquet", 18, 17, "missing_text")]
    detail = {r["reason"]: r["detail"] for r in rejects}
    assert "int64" in detail["text_not_string"] and "not a column" in [r for r in rejects
                                                                       if r["source"] == "no_text.parquet"][0]["detail"]

    by_id = {d["id"]: d for d in docs}
    doc = by_id["1007"]  # review_id 1007: an int64 id spelled as a JSONL number id is
    assert (doc["source"], doc["text"]) == ("reviews.parquet", _text(7))
    assert [doc[k] for k in ("movie", "flag", "day", "price", "rating")] == ["00007", "true", "2020-01-08", "7.02", 7]
    assert by_id["1010"]["rating"] is None and stats["missing_fields"]["rating"] == 6  # rows 0,5,..,25
    assert [f["path"] for f in json.loads(Path(art, "manifest.json").read_text())["inputs"]] == [str(f) for f in files]


def test_parquet_in_a_bucket_gives_the_same_documents_and_format_parquet_reads_any_name(bucket, tmp_path, capsys):
    _write_inputs(tmp_path / "in")
    local = _documents(_corpus(capsys, [str(tmp_path / "in" / "reviews.parquet")], str(tmp_path / "store")))
    storage.write_bytes(f"{bucket}/raw/reviews.parquet", (tmp_path / "in" / "reviews.parquet").read_bytes())
    remote = _documents(_corpus(capsys, [f"{bucket}/raw/reviews.parquet"], f"{bucket}/store"))
    assert remote == local and len(local) == N - len(NULL_TEXT)
    # no suffix: --format parquet says what auto cannot tell
    storage.write_bytes(f"{bucket}/raw/part-0000", (tmp_path / "in" / "reviews.parquet").read_bytes())
    argv = ["corpus", "--input", f"{bucket}/raw/part-0000", "--format", "parquet", *ARGS, "--out", f"{bucket}/s2"]
    assert main(argv) == 0
    named = _documents(capsys.readouterr().out.strip().splitlines()[-1])
    assert [d["text"] for d in named] == [d["text"] for d in local]


def test_a_parquet_file_in_a_bucket_is_fetched_once_though_its_columns_are_read_in_turn(bucket, tmp_path,
                                                                                         monkeypatch):
    """A row group of two columns of the same size (20,000 rows of 340 bytes each: 14 MB), read a
    batch at a time: each batch reads pages of one column, then of the other. fsspec's default cache
    of a store's file (read-ahead) keeps one region, so every switch refetched a block: s3fs's 50 MB
    block fetched a 102 MB file's bytes 36 times (here a 4 MiB block: 3.6 times). Read without that
    cache, through pyarrow's buffer, each byte is fetched once; the records are the rows, in order."""
    import s3fs  # noqa: PLC0415 - the test extra's

    rows = 20_000
    ids = [f"{i:05d} " + "가나다라마바사아자차카타파하" * 8 for i in range(rows)]
    texts = [f"{i:05d} " + "하파타카차자아사바마라다나가" * 8 for i in range(rows)]
    path = tmp_path / "two.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts}), path, row_group_size=rows, use_dictionary=False,
                   compression="none")
    data = path.read_bytes()
    url = f"{bucket}/raw/two.parquet"
    storage.write_bytes(url, data)
    fs, _ = storage.filesystem(url)
    monkeypatch.setattr(fs, "default_block_size", 4 << 20)  # a block smaller than the file, as 50 MB is for 100 MB
    fetched: list[int] = []
    fetch = s3fs.core.S3File._fetch_range

    def counted(self, start, end):
        out = fetch(self, start, end)
        fetched.append(len(out))
        return out

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", counted)
    out = list(parquet_records.parquet_rows(url, "two.parquet", "text", "id", 1 << 20, ()))
    assert [(r["id"], r["text"]) for r in out] == list(zip(ids, texts))
    assert sum(fetched) < len(data) * 1.1, (sum(fetched), len(data), len(fetched))


def test_a_damaged_parquet_files_dead_letter_is_one_printable_line(tmp_path, capsys):
    """Arrow's Thrift errors end in newlines and quote the byte they stopped at raw: a garbled page
    header's dead letter read 'OSError: Couldn't deserialize thrift: No more data to read.\\n
    Deserializing page header failed.\\n', a garbled footer's '... don't know what type: \\x0f\\n', and
    the run's error line, which names each damaged file's dead letter, broke over three lines. Each
    is now one line, the byte escaped."""
    path = tmp_path / "pages.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(50)], "text": [f"문장 {i} 입니다" for i in range(50)]}),
                   path, row_group_size=20)
    data = bytearray(path.read_bytes())
    at = pq.ParquetFile(path).metadata.row_group(1).column(1).data_page_offset + 5
    data[at:at + 30] = b"\x5a" * 30  # the second row group's page header
    path.write_bytes(bytes(data))
    footer = tmp_path / "footer.parquet"
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - size // 2
    data[start:start + 20] = b"\xff" * 20
    footer.write_bytes(bytes(data))
    details = [r["detail"] for name in (path, footer)
               for r in reader.read_file(str(name), name.name, "auto", "text", "id", 1 << 20) if "reason" in r]
    assert details == [
        "parquet error after row 20 (20 row(s) of its row group not read: rows 20-39): OSError: Couldn't deserialize "
        "thrift: No more data to read. Deserializing page header failed.",
        "parquet error after row 0: OSError: Couldn't deserialize thrift: don't know what type: \\x0f"], details
    argv = ["corpus", "--input", str(tmp_path / "*.parquet"), "--text-field", "text", "--id-field", "id",
            "--set", "num_shards=1", "--set", "valid_fraction=0", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("kolectra corpus: error: 2 damaged input file(s)") and all(d in line for d in details)


def test_two_columns_of_the_text_fields_name_are_one_dead_letter_saying_so(tmp_path):
    """pyarrow writes a table with two columns of one name; the file's dead letter said
    "KeyError: 'Column text does not exist in schema'" and counted none of its rows. It says what
    is wrong and counts the rows not read (the footer knows them)."""
    path = tmp_path / "twice.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["a", "b", "c"]), pa.array(["가", "나", "다"]),
                                         pa.array(["라", "마", "바"])], names=["id", "text", "text"]), path)
    out = list(reader.read_file(str(path), "twice.parquet", "auto", "text", "id", 1 << 20))
    assert out == [{"source": "twice.parquet", "line": 1, "row": 0, "reason": "damaged_file",
                    "detail": "parquet error after row 0 (3 row(s) of the file not read: rows 0-2): Unreadable: 2 "
                              "columns of the file are named 'text': which one to read is not known"}]


def test_a_uuid_column_is_an_id_and_a_kept_field_as_its_text(tmp_path, capsys):
    """pyarrow reads a column of the arrow.uuid type as ``uuid.UUID`` objects: kept with
    ``--keep-fields`` it ended the job in 'internal error: TypeError: Object of type UUID is not JSON
    serializable' (exit 1), and as ``--id-field`` every row was an ``invalid_id`` reject. Both are
    the UUID's text now, as a string column of them would be."""
    import uuid  # noqa: PLC0415

    ids = [uuid.UUID(int=i * 7919 + 1) for i in range(N)]
    path = tmp_path / "in" / "uuid.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table({"review_id": pa.array([u.bytes for u in ids], pa.uuid()),
                             "body": [_text(i) for i in range(N)], "movie": pa.array([u.bytes for u in ids], pa.uuid())}),
                   path)
    assert pq.ParquetFile(path).schema_arrow.field("movie").type == pa.uuid()
    argv = ["corpus", "--input", str(path), "--text-field", "body", "--id-field", "review_id", "--keep-fields", "movie",
            "--set", "num_shards=1", "--set", "valid_fraction=0", "--out", str(tmp_path / "store")]
    assert main(argv) == 0, capsys.readouterr().err
    docs = _documents(capsys.readouterr().out.strip().splitlines()[-1])
    assert sorted((d["id"], d["movie"]) for d in docs) == sorted((str(u), str(u)) for u in ids)


def test_a_parquet_file_compressed_whole_is_refused_by_name(tmp_path, capsys):
    """``reviews.parquet.gz`` was read as a gzipped text file (``auto`` takes the name under the
    compression for ``reviews.parquet``, not JSONL: text), its Parquet bytes as lines: the run
    failed saying the file was not UTF-8 and to convert it from cp949. It is refused while the
    inputs are listed, saying what it is and to decompress it."""
    path = tmp_path / "reviews.parquet"
    pq.write_table(pa.table({"text": [_text(i) for i in range(N)]}), path, compression="none")
    packed = tmp_path / "reviews.parquet.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    assert main(["corpus", "--input", str(packed), "--out", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"kolectra corpus: error: input {str(packed)!r} is a Parquet file compressed whole (gzip), which "
                       "the corpus stage cannot read: Parquet's footer is at the file's end, which a compressed stream "
                       "reaches only by decompressing all of it (read as text, its bytes were taken for lines); "
                       "decompress it, and name the Parquet file in --input (Parquet compresses inside the file)"), err


def test_a_parquet_file_not_named_so_is_refused_not_read_as_text(tmp_path, capsys):
    """A Hive table's Parquet files are named ``000000_0``: ``--format auto`` (the default) read such
    a file as text, each stretch of its pages between two newline bytes a document, the length
    bytes before each value cleaned away: here 32 of its 35 'lines' were documents, and the run
    failed only on the reject ratio (3 rejected, 8.6 %); 2,000 such rows gave 2,000 documents such as
    '다음 줄 9Z정말 재밌는 ...', exit 0, nothing said. The first input's bytes are checked before the
    job (as a JSONL file's lines are): the run is refused in one line, naming --format parquet."""
    path = tmp_path / "warehouse" / "000000_0"
    path.parent.mkdir()
    pq.write_table(pa.table({"body": [_text(i) + f"\n다음 줄 {i}" for i in range(N)]}), path, compression="none",
                   use_dictionary=False)
    assert main(["corpus", "--input", str(path), "--set", "num_shards=1", "--set", "valid_fraction=0",
                 "--out", str(tmp_path / "store")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"kolectra corpus: error: {path} is a Parquet file (it opens with PAR1), which --format auto reads as text by "
        "its name, a document a line of its raw pages: use --format parquet (with --text-field naming its text "
        "column), or name its files *.parquet")
    assert main(["corpus", "--input", str(path), "--format", "parquet", "--text-field", "body", "--set",
                 "num_shards=1", "--set", "valid_fraction=0", "--out", str(tmp_path / "store")]) == 0
    docs = _documents(capsys.readouterr().out.strip().splitlines()[-1])
    assert sorted(d["text"] for d in docs) == sorted(_text(i) + f"\n다음 줄 {i}" for i in range(N))


def test_a_parquet_file_not_named_so_is_said_in_one_sentence_before_the_job_in_its_dead_letter_and_its_plan(
        tmp_path, capsys):
    """One file, three wordings: before the job 'is a Parquet file (its bytes open with Parquet's magic PAR1), but
    --format auto reads a file named so as text' (compressed whole: 'is a Parquet file compressed whole (gzip),
    which --format auto would read as text'), its dead letter 'a Parquet file (it opens with PAR1), which --format
    auto reads as text by its name', the pieces' plan 'a Parquet file, which ...'. Now the three say it in one
    sentence (parquet.misnamed), each followed by its own remedy; compressed whole, the same remedy before the job
    as in the dead letter (parquet.compressed_whole)."""
    from kolectra.corpus import inputs, pieces

    said = "a Parquet file (it opens with PAR1), which --format auto reads as text by its name"
    assert parquet.misnamed("text") == said
    table = pa.table({"body": [_text(i) + f"\n다음 줄 {i}" for i in range(N)]})
    pq.write_table(table, tmp_path / "b.parquet", compression="none", use_dictionary=False)
    path = tmp_path / "000000_0.gz"
    path.write_bytes(gzip.compress((tmp_path / "b.parquet").read_bytes(), 1))
    assert main(["corpus", "--input", str(path), "--out", str(tmp_path / "store")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"kolectra corpus: error: {path} is {said}, a document a line of its raw pages: compressed whole (gzip), "
        "which no format reads: decompress it, and name it *.parquet (Parquet compresses inside the file)")
    (dead,) = reader.read_file(str(path), "000000_0.gz", "auto", "text", "id", 1 << 20)
    assert dead["detail"] == f"{said}: compressed whole (gzip), which no format reads: decompress it, and name it *.parquet"
    plain = tmp_path / "000000_0"
    plain.write_bytes((tmp_path / "b.parquet").read_bytes())
    with pytest.raises(ValueError) as e:
        pieces.plan(inputs.InputFile(str(plain), plain.stat().st_size, "x"), 1024, "auto", 1 << 20)
    assert str(e.value) == f"{plain}: {said}"


def test_a_later_parquet_file_not_named_so_is_a_damaged_file_not_lines(tmp_path, capsys):
    """The check before the job reads the first input only: a Parquet file named otherwise after a
    text file was still read as lines of its pages (here 32 of its 35 'lines' became documents such
    as '다음 줄 9Z영화 ...'). The reader sees its first bytes too: one ``damaged_file`` dead letter
    saying what it is, and the run stops naming it (``max_damaged_files`` 0); the text file's lines
    are read as before. Over ``split_bytes`` it is not cut into pieces of lines either (before: read
    so, piece by piece): read whole, it is that dead letter."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_reviews.txt").write_text("".join(_text(i) + "\n" for i in range(N)), encoding="utf-8")
    pq.write_table(pa.table({"body": [_text(i) + f"\n다음 줄 {i}" for i in range(N)]}), folder / "b_000000_0",
                   compression="none", use_dictionary=False)
    out = list(reader.read_file(str(folder / "b_000000_0"), "b_000000_0", "auto", "text", "id", 1 << 20))
    assert out == [{"source": "b_000000_0", "line": 1, "reason": "damaged_file",
                    "detail": "a Parquet file (it opens with PAR1), which --format auto reads as text by its name: "
                              "give --format parquet, or name it *.parquet"}]
    texts = [r["text"] for r in reader.read_file(str(folder / "a_reviews.txt"), "a", "auto", "text", "id", 1 << 20)]
    assert texts == [_text(i) for i in range(N)]
    assert (folder / "b_000000_0").stat().st_size > 1024
    for split in ([], ["--set", "split_bytes=1024"]):  # read whole; in pieces (planned as text, it is read whole)
        assert main(["corpus", "--input", str(folder / "*"), "--set", "num_shards=1", "--set", "valid_fraction=0",
                     *split, "--out", str(tmp_path / "store")]) == 2
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert line.startswith("kolectra corpus: error: 1 damaged input file(s) (over max_damaged_files=0): ") and \
            f"{folder / 'b_000000_0'}: a Parquet file (it opens with PAR1)" in line, (split, line)


def test_a_text_file_whose_first_word_is_par1_is_read_as_text(tmp_path, capsys):
    """A text file may open with the letters PAR1 (a part number, a code): taken for Parquet by those
    four bytes alone, as the first input it was refused before the job ('is a Parquet file ... use
    --format parquet'), and as a later one, read whole or in pieces, it was a damaged_file that
    stopped the run. A Parquet file's magic is followed by its first Thrift header (byte 0x15): this
    one is read as the text it is."""
    folder = tmp_path / "in"
    folder.mkdir()
    lines = [f"PAR1-{i:03d} 부품은 " + _text(i) for i in range(N)]
    (folder / "a_parts.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (folder / "b_reviews.txt").write_text("".join(_text(i) + "\n" for i in range(N)), encoding="utf-8")
    assert (folder / "a_parts.txt").stat().st_size > 1024
    texts = [r.get("text") for r in reader.read_file(str(folder / "a_parts.txt"), "a", "auto", "text", "id", 1 << 20)]
    assert texts == lines
    for inputs in ([str(folder / "a_parts.txt")], [str(folder / "b_reviews.txt"), "--input", str(folder / "a_parts.txt")]):
        for split in ([], ["--set", "split_bytes=1024"]):
            assert main(["corpus", "--input", *inputs, "--set", "num_shards=1", "--set", "valid_fraction=0",
                         *split, "--out", str(tmp_path / "store"), "--force"]) == 0, capsys.readouterr().err
            docs = _documents(capsys.readouterr().out.strip().splitlines()[-1])
            assert set(lines) <= {d["text"] for d in docs}, (inputs, split)


def test_a_later_parquet_file_not_named_so_and_compressed_whole_is_a_damaged_file_in_pieces_too(tmp_path, capsys):
    """Hive's ``000000_0.gz`` after a text file: over 8 times split_bytes decompressed, it was cut
    into copies of its lines without a look at its first bytes, and its pages became documents
    ('다음 줄 95H감동 ...', exit 0); read whole, its dead letter said to give --format parquet, which
    does not read a compressed file. Both ways it is now one damaged_file saying to decompress it."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a_reviews.txt").write_text("".join(_text(i) + "\n" for i in range(N)), encoding="utf-8")
    table = pa.table({"body": [_text(i) + f"\n다음 줄 {i}" for i in range(400)]})
    pq.write_table(table, tmp_path / "b.parquet", compression="none", use_dictionary=False)
    (folder / "b_000000_0.gz").write_bytes(gzip.compress((tmp_path / "b.parquet").read_bytes(), 1))
    assert (tmp_path / "b.parquet").stat().st_size > 8 * 1024
    for split in ([], ["--set", "split_bytes=1024"]):
        assert main(["corpus", "--input", str(folder / "*"), "--set", "num_shards=1", "--set", "valid_fraction=0",
                     *split, "--out", str(tmp_path / "store")]) == 2, split
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert (f"{folder / 'b_000000_0.gz'}: a Parquet file (it opens with PAR1), which --format auto reads as text "
                "by its name: compressed whole (gzip), which no format reads: decompress it, and name it *.parquet"
                ) in line, (split, line)


def test_two_columns_of_one_name_in_a_file_read_in_pieces_are_the_file_s_one_dead_letter(tmp_path, capsys):
    """Read as pieces of row groups (over split_bytes), such a file gave one dead letter a piece:
    400 rows in 8 pieces were 8 rejects, 'most common reason: damaged_file', and the run failed on
    max_reject_ratio (8 of 38, 21 %) where its whole read (one dead letter, 1 of 31) passed with
    max_damaged_files=1. The first piece's dead letter is now the file's, the whole read's."""
    folder = tmp_path / "in"
    folder.mkdir()
    table = pa.Table.from_arrays([pa.array([_text(i) for i in range(400)]), pa.array([_text(i + 1) for i in range(400)])],
                                 names=["text", "text"])
    pq.write_table(table, folder / "dup.parquet", row_group_size=50)
    (folder / "a.txt").write_text("".join(_text(i) + "\n" for i in range(N)), encoding="utf-8")
    whole = list(reader.read_file(str(folder / "dup.parquet"), "dup", "auto", "text", "id", 1 << 20))
    pieces = [r for start in range(0, 8, 3) for r in parquet_records.parquet_rows(
        str(folder / "dup.parquet"), "dup", "text", "id", 1 << 20, (), range(start, min(start + 3, 8)), start * 50)]
    assert pieces == whole and len(whole) == 1 and "(400 row(s) of the file not read: rows 0-399)" in whole[0]["detail"]
    for split in ([], ["--set", "split_bytes=1024"]):
        assert main(["corpus", "--input", str(folder / "*"), "--set", "num_shards=1", "--set", "valid_fraction=0",
                     "--set", "max_damaged_files=1", *split, "--out", str(tmp_path / "store")]) == 0, split
        capsys.readouterr()
