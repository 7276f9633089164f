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
  of the file's text.
"""

from __future__ import annotations

import datetime
import decimal
import gzip
import json
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kolectra.core import storage, store_glob, verbosity
from kolectra.corpus import parquet, parquet_records, reader
from kolectra.pipeline.cli import main
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


@pytest.fixture(autouse=True)
def _verbosity(monkeypatch):
    monkeypatch.setenv(verbosity.ENV, str(verbosity.NORMAL))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOLECTRA_CACHE", str(tmp_path / "cache"))


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


def test_parquet_rows_are_read_a_row_group_at_a_time(tmp_path):
    """120 row groups of 500 rows of about 300 bytes (18 MB of text): Arrow's allocation while
    reading every record stays under a twentieth of it."""
    rows, groups = 500, 120
    table = pa.table({"text": [f"{i:08d} " + "가나다라마바사아자차" * 10 for i in range(rows * groups)]})
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=rows, compression="zstd")
    total = sum(len(t.encode("utf-8")) for t in table.column("text").to_pylist())
    del table
    peak, n = 0, 0
    for rec in reader.read_file(str(tmp_path / "big.parquet"), "big.parquet", "auto", "text", "id", 1 << 20):
        assert "reason" not in rec
        n += 1
        peak = max(peak, pa.total_allocated_bytes())
    assert n == rows * groups and peak < total / 20, (peak, total)


def test_a_row_group_of_large_rows_is_read_in_batches_of_bytes_not_whole(tmp_path, monkeypatch):
    """One row group of 240 rows of 24 kB (5.8 MB of text, pages of one row): the rows are decoded
    in batches of ``BATCH_BYTES`` (here 256 kB: 10 rows) and the pages read through ``READ_BUFFER``,
    so neither Arrow's memory nor Python's (the column chunk read at once) reaches a row group's
    worth; the records are the rows, in order. (Before: batches of 1,024 rows, the group decoded
    whole, and its column chunk read in one piece: both peaks over the group's bytes.)"""
    monkeypatch.setattr(parquet, "BATCH_BYTES", 256 << 10, raising=False)
    texts = [f"{i:04d} " + "가나다라마바사아자차카타파하" * 570 for i in range(240)]
    path = tmp_path / "large_rows.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(240)], "text": texts}), path, row_group_size=240,
                   write_batch_size=1, data_page_size=1 << 16, use_dictionary=False, compression="zstd")
    total = sum(len(t.encode("utf-8")) for t in texts)
    pf = pq.ParquetFile(path)
    assert pf.num_row_groups == 1 and parquet.batch_rows(pf, ["id", "text"], 0) == 10
    peak_arrow, out = 0, []
    tracemalloc.start()
    try:
        for rec in reader.read_file(str(path), "large_rows.parquet", "auto", "text", "id", 1 << 20):
            out.append(rec["id"] if rec.get("text") == texts[len(out)] else rec)  # not the text: it would count
            peak_arrow = max(peak_arrow, pa.total_allocated_bytes())
        peak_python = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == [f"d{i}" for i in range(240)]
    assert peak_arrow < total / 3 and peak_python < total / 3, (peak_arrow, peak_python, total)


def test_a_damaged_page_of_large_rows_loses_its_batch_and_the_rest_of_its_group(tmp_path, monkeypatch):
    """Two row groups of 120 rows of 24 kB, pages of a row, a page two thirds into the first garbled:
    the rows of the batches before it are read (70 at 10 rows a batch), then one ``damaged_file``
    at the first row not read, naming the rows not read (corpus 23: before, only where reading
    stopped), and the second group whole. (Before: batches of 1,024 rows, so the
    group's first rows went with the damage: 120 read, the dead letter at row 0.)"""
    monkeypatch.setattr(parquet, "BATCH_BYTES", 256 << 10, raising=False)
    path = tmp_path / "damaged.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(240)],
                             "text": [f"{i:04d} " + "가나다라마바사아자차카타파하" * 570 for i in range(240)]}),
                   path, row_group_size=120, write_batch_size=1, data_page_size=1 << 16, use_dictionary=False,
                   compression="zstd")
    data = bytearray(path.read_bytes())
    text = pq.ParquetFile(path).metadata.row_group(0).column(1)
    at = text.data_page_offset + text.total_compressed_size * 2 // 3
    data[at:at + 200] = bytes(b ^ 0x5A for b in data[at:at + 200])
    path.write_bytes(bytes(data))
    out = list(reader.read_file(str(path), "damaged.parquet", "auto", "text", "id", 1 << 20))
    damage = [(r["row"], r["reason"]) for r in out if "reason" in r]
    assert damage == [(70, "damaged_file")] and [r["id"] for r in out if "reason" not in r] == [
        f"d{i}" for i in (*range(70), *range(120, 240))]
    # the rows lost are counted (the footer knows the group's rows): read 190 + not read 50 = the file's 240
    (detail,) = [r["detail"] for r in out if "reason" in r]
    assert detail.startswith("parquet error after row 70 (50 row(s) of its row group not read: rows 70-119): "), detail


def test_a_parquet_string_that_is_not_utf8_is_its_rows_reject_not_its_row_groups_loss(tmp_path):
    """A writer that does not check its strings can store bytes that are not UTF-8 in a string column
    (here a binary array viewed as strings). Such a row is an ``invalid_utf8`` reject naming the
    column, as a JSONL line that is not UTF-8 is; the other rows of its batch and row group are read.
    (Arrow's ``to_pylist`` failed on the batch: each row group was one ``damaged_file`` reject, its
    other rows neither read nor counted.)"""
    values = [b"\xec\xa2\x8b\xec\x95\x84\xec\x9a\x94", b"bad \xff here", b"after"] * 300
    table = pa.table({"text": pa.array(values, pa.binary()).view(pa.string()),
                      "tags": pa.array([[b"a"], [b"b"], [b"\xfe"]] * 300, pa.list_(pa.binary())).view(pa.list_(pa.string()))})
    pq.write_table(table, tmp_path / "mixed.parquet", row_group_size=400)
    out = list(reader.read_file(str(tmp_path / "mixed.parquet"), "mixed.parquet", "auto", "text", "id", 1 << 20,
                                keep_fields=("tags",)))
    assert len(out) == 900
    assert out[0]["text"] == "좋아요" and out[0]["fields"] == (["a"],)
    assert out[1] == {"source": "mixed.parquet", "line": 2, "row": 1, "reason": "invalid_utf8",
                      "detail": "'text': byte 0xff at offset 4"}
    assert out[2]["reason"] == "invalid_utf8" and out[2]["detail"] == "'tags': byte 0xfe at offset 0"
    assert sum("reason" in r for r in out) == 600 and {r["reason"] for r in out if "reason" in r} == {"invalid_utf8"}


def _peaks(path: Path, texts: list) -> tuple[int, int]:
    """Arrow's and Python's peak allocations while reading every record of ``path`` (whose texts must
    be ``texts``, in order; neither kept)."""
    peak_arrow, n = 0, 0
    tracemalloc.start()
    try:
        for rec in reader.read_file(str(path), path.name, "auto", "text", "id", 1 << 20):
            assert rec.get("text") == texts[n] and rec["id"] == f"d{n}", n
            n += 1
            peak_arrow = max(peak_arrow, pa.total_allocated_bytes())
        peak_python = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == len(texts)
    return peak_arrow, peak_python


@pytest.mark.parametrize("kind", [pa.string(), pa.string_view()], ids=str)
def test_a_dictionary_column_of_one_repeated_text_is_not_decoded_once_a_row(tmp_path, kind):
    """300 rows of one 120 kB text, written with pyarrow's defaults (dictionary-encoded): the footer
    counts the text once (a 6 kB file of 120 kB), so its batch was the whole group, 300 copies
    decoded by Arrow (36 MB) and again as Python strings. The column is read as its dictionary and
    indices: the text is decoded once, one Python string for all its rows, and each peak stays
    under 1 MB beside the 1 MiB read buffer. (Before: Arrow's peak 36 MB, Python's 25 MB.) A
    ``string_view`` column (pyarrow keeps the type it wrote) is read so too: corpus 22 left the view
    types out and decoded it by the footer's share (Arrow's peak 36 MB)."""
    text = "가나다라마바사아자차" * 4000
    path = tmp_path / "repeated.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(300)], "text": pa.array([text] * 300, kind)}), path)
    assert pq.ParquetFile(path).schema_arrow.field("text").type == kind
    assert pq.ParquetFile(path).metadata.row_group(0).column(1).total_uncompressed_size < 2 * len(text.encode())
    peak_arrow, peak_python = _peaks(path, [text] * 300)
    bound = parquet.READ_BUFFER + (1 << 20)
    assert peak_arrow < bound and peak_python < bound, (peak_arrow, peak_python, bound)


def test_a_large_dictionary_column_is_decoded_in_batches_of_its_longest_value(tmp_path, monkeypatch):
    """A row group whose dictionary-encoded text column is over ``BATCH_BYTES`` (here 256 kB): 200
    copies of a 60 kB text, then 600 distinct texts of 1.5 kB, where the dictionary (100 kB, a
    writer's setting) falls back to plain pages. The footer's mean row size (1.2 kB) planned 214
    rows a batch, 13 MB of the copies; the dictionary page's longest value plans 4. Each peak stays
    under 1 MB beside the 1 MiB read buffer. (Before: Arrow's peak 12 MB, Python's 8 MB.)"""
    monkeypatch.setattr(parquet, "BATCH_BYTES", 256 << 10, raising=False)
    big = "하파타카차자아사바마" * 2000
    texts = [big] * 200 + [f"{i:04d} " + "가나다라마바사아자차" * 50 for i in range(600)]
    path = tmp_path / "copies.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(800)], "text": texts}), path,
                   dictionary_pagesize_limit=100_000, write_batch_size=10)
    column = pq.ParquetFile(path).metadata.row_group(0).column(1)
    assert column.has_dictionary_page and column.total_uncompressed_size > 256 << 10
    peak_arrow, peak_python = _peaks(path, texts)
    bound = parquet.READ_BUFFER + (1 << 20)
    assert peak_arrow < bound and peak_python < bound, (peak_arrow, peak_python, bound)


_PEAK = """
import sys, pyarrow as pa
from kolectra.corpus import parquet, reader
parquet.BATCH_BYTES = 256 << 10
texts = sys.stdin.read().split("\\n")
for n, rec in enumerate(reader.read_file(sys.argv[1], "x", "auto", "text", "id", 1 << 20)):
    assert rec.get("text") == texts[n] and rec["id"] == f"d{n}", n
assert n + 1 == len(texts)
print(pa.default_memory_pool().max_memory())
"""


def _arrow_peak(path: Path, texts: list[str]) -> int:
    """Arrow's peak allocation, passing ones included, while a fresh process reads every record of
    ``path`` (its texts ``texts``, in order) with ``BATCH_BYTES`` 256 kB."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    done = subprocess.run([sys.executable, "-c", _PEAK, str(path)], input="\n".join(texts), capture_output=True,
                          text=True, check=True)
    return int(done.stdout)


_TEXTS = [f"{i:04d} " + "가나다라마바사아자차카타파하"[i % 14:] * 80 for i in range(3000)]


def test_a_category_column_is_read_as_its_values_not_hashed_into_a_dictionary(tmp_path):
    """A column whose Arrow type is a dictionary (pandas' category; pyarrow stores the type in the
    footer and reads it back so) of 3,000 distinct texts of 1.8 kB: pyarrow writes a dictionary
    array's values as one dictionary page, whatever ``dictionary_pagesize_limit`` says, so that page
    holds the whole group's text. Read as a dictionary, Arrow hashed the page into a table and copied
    it into each batch: 5.4 times the text (29 MB) at its peak, however small the batches. Read as
    its values (over the footer without the stored Arrow schema), in batches of ``BATCH_BYTES``
    (here 256 kB) over its footer bytes, and its page not probed as a dictionary first: 2.1 times
    (the page, and its values decoded once); the records are the same."""
    path = tmp_path / "category.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(3000)], "text": pa.array(_TEXTS).dictionary_encode()}),
                   path)
    assert pa.types.is_dictionary(pq.ParquetFile(path).schema_arrow.field("text").type)
    total = sum(len(t.encode("utf-8")) for t in _TEXTS)
    assert _arrow_peak(path, _TEXTS) < 3 * total, total


def test_a_string_column_of_one_large_dictionary_page_is_not_probed_as_a_dictionary(tmp_path):
    """The same texts as a ``string`` column whose dictionary page holds them all (a dictionary array
    written without its Arrow schema: other writers too need not close a page near 1 MB), stored
    uncompressed (5.4 MB, over ``PROBE_BUFFER``). The probe for its longest value read that page as
    a dictionary: Arrow's peak 3.7 times the text (20 MB). Its longest value is bounded by its footer
    bytes instead: 2.2 times."""
    path = tmp_path / "one_page.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(3000)], "text": pa.array(_TEXTS).dictionary_encode()}),
                   path, store_schema=False, compression="none")
    column = pq.ParquetFile(path).metadata.row_group(0).column(1)
    assert pq.ParquetFile(path).schema_arrow.field("text").type == pa.string()
    assert column.data_page_offset - column.dictionary_page_offset > parquet.PROBE_BUFFER
    total = sum(len(t.encode("utf-8")) for t in _TEXTS)
    assert _arrow_peak(path, _TEXTS) < 3 * total, total


def test_a_category_column_gives_the_values_a_string_column_gives(tmp_path):
    """Categories of each index width, with nulls, bytes that are not UTF-8, a kept category of
    labels and a kept timestamp beside them (read by the other reader, its zone kept): the records
    and rejects of the string columns they encode. (Before: a category of 8-, 16- or 64-bit indices
    holding a value that is not UTF-8 lost each row group, 'ArrowInvalid: Invalid UTF8 payload',
    where the string column gave that row's ``invalid_utf8`` reject.)"""
    n = 40
    texts = [None if i % 9 == 4 else f"리뷰 {i % 7}" for i in range(n)]
    raw = [None if t is None else t.encode() + (b"\xff" if i % 13 == 0 else b"") for i, t in enumerate(texts)]
    labels = [None if i % 5 == 0 else ("pos", "neg")[i % 2] for i in range(n)]
    when = pa.array([1_600_000_000_000_000 + i for i in range(n)], pa.timestamp("us", tz="Asia/Seoul"))
    plain = pa.table({"id": list(range(n)), "text": pa.array(raw, pa.binary()).view(pa.string()),
                      "label": labels, "when": when})
    pq.write_table(plain, tmp_path / "plain.parquet", row_group_size=15)
    out = {}
    for width in (pa.int8(), pa.int16(), pa.int32(), pa.int64()):
        table = plain.set_column(1, "text", plain.column("text").dictionary_encode().cast(pa.dictionary(width, pa.string())))
        table = table.set_column(2, "label", table.column("label").dictionary_encode().cast(pa.dictionary(width, pa.string())))
        pq.write_table(table, tmp_path / "category.parquet", row_group_size=15)
        assert pq.ParquetFile(tmp_path / "category.parquet").schema_arrow.field("text").type.index_type == width
        for name in ("plain.parquet", "category.parquet"):
            out[name] = list(reader.read_file(str(tmp_path / name), "x", "auto", "text", "id", 1 << 20,
                                              keep_fields=("label", "when")))
        assert out["category.parquet"] == out["plain.parquet"], width
    reasons = [r.get("reason") for r in out["plain.parquet"]]
    assert reasons.count("missing_text") == 4 and reasons.count("invalid_utf8") == 3
    assert out["plain.parquet"][1]["fields"] == ("neg", "2020-09-13T21:26:40.000001+09:00")


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
