"""``kolectra corpus``'s Parquet reader on large files, moved as they were from tests/test_corpus_parquet.py:
rows are read in bounded batches, one row group at a time (Arrow's and Python's memory stay a small share
of the file's text, dictionary and category columns included); a damaged page loses its batch and the rest
of its group, counted; a string that is not UTF-8 is its row's reject.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kolectra.corpus import parquet, reader
from tests.corpus_parquet_support import _own_cache, _verbosity  # noqa: F401  (autouse fixtures)


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
