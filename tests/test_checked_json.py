"""The inputs' text as the local memory check counts it (corpus/checked_json.py). A Parquet input by the text
its rows hold, not as the JSONL it was taken to hold (2.4 times its stored bytes, 8.4 bytes of JSON a stored
byte whatever its columns): the job reads only the text, id and kept columns, and what grows follows the
text (docs/scale.md, "Parquet by its text"). A JSONL file's share of text from places spread over it, not
its start alone. Files of the measured shapes; the refusal at 0.1 GB comes before any Beam work."""

from __future__ import annotations

import gzip
import json
import random
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kolectra.corpus import build, checked_json, inputs
from kolectra.corpus.config import default_config
from kolectra.corpus.local_memory import LocalMemoryError
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)

REVIEW = "연기가 정말 좋았고 마지막 장면이 오래 기억에 남는 영화였다 굿"  # 87 bytes: a review's on average
WORDS = ("영화", "배우", "연기", "정말", "최고", "재미", "없다", "감동", "스토리", "마지막", "장면", "음악", "다시",
         "보고", "싶다", "지루", "했다", "좋았", "별로", "추천", "ㅋㅋ", "ㅠㅠ", "연출", "감독", "결말")


def _refused(tmp_path, pattern: str, keep: tuple[str, ...] = ()) -> tuple[float, float, str]:
    """(the MB of expected shard JSON the corpus job's refusal counts, the MB the run is taken to need, the refusal)."""
    cfg = default_config()
    if keep:
        import dataclasses

        cfg = dataclasses.replace(cfg, keep_fields=keep)
    with pytest.raises(LocalMemoryError) as e:
        build.build(cfg, [pattern], tmp_path / "out", ["--local_memory_gb", "0.1", "--direct_num_workers", "1"])
    said = str(e.value)
    json_mb = float(re.search(r"its ([\d,]+) MB of expected shard JSON", said).group(1).replace(",", ""))
    return json_mb, build.LOCAL_MEMORY.peak_bytes(json_mb * 1e6) / 1e6, said


def _reviews_with_embedding(path, rows: int) -> float:
    """The reviews' shape with a 256-float32 column beside (1 kB a row): a file of ``rows`` rows; its text's MB."""
    table = pa.table({"id": [str(i) for i in range(rows)], "text": [REVIEW] * rows,
                      "embedding": pa.FixedSizeListArray.from_arrays(pa.array([0.0] * (rows * 256), pa.float32()), 256)})
    pq.write_table(table, path, compression={"id": "snappy", "text": "snappy", "embedding": "none"},
                   use_dictionary=["id", "text"])
    return rows * len(REVIEW.encode()) / 1e6


def test_a_parquet_file_of_other_columns_is_counted_by_its_text_not_refused(tmp_path):
    """The first review file with a 256-float embedding column beside its own (91.6 MB stored, 7.18 MB of
    text) peaked at 872 MB in one process (``benchmarks/local_peak.py``, 2026-12-01), where the check
    counted 8.4 bytes of JSON a stored byte (770 MB: 1.96 GB); at 4 files 5.4 GB against a peak of
    1,031 MB, so ``--local_memory_gb 2`` refused a run that takes half of it. A file of that shape (82,801
    rows, 85 MB of embedding) is now counted at 7 bytes a byte of its text: over the measured peak, within
    10 % of it (the text-heavy file's, 851 MB, within 3 %)."""
    text_mb = _reviews_with_embedding(tmp_path / "reviews-0.parquet", 82_801)
    json_mb, need_mb, said = _refused(tmp_path, str(tmp_path / "reviews-0.parquet"))
    assert json_mb == pytest.approx(text_mb * checked_json.TEXT_JSON_PER_INPUT_BYTE, rel=0.02)
    assert 872 < need_mb < 872 * 1.1
    assert "(a Parquet file's stored byte as 0.58" in said and "bytes of text a stored byte))" in said


def test_a_parquet_file_of_text_that_compresses_well_is_counted_by_its_text(tmp_path):
    """The first 4 review files' id and text in zstd (4.25 MB a file: 1.69 bytes of text a stored byte)
    were counted at 4.97 bytes of JSON a byte of text where the fits count 7: under the job's peaks at 2
    and 4 files (907 MB against 912, 1,015 against 1,034; docs/scale.md), and this text, 4.8 bytes a
    stored byte, at 1.8. Now the rows' text times 7, whatever the compression; a text file beside it is
    counted as before."""
    rng = random.Random(0)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))) for _ in range(60_000)]
    pq.write_table(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), tmp_path / "a.parquet",
                   compression="zstd", compression_level=9)
    text_mb = sum(len(t.encode()) for t in texts) / 1e6
    stored_mb = (tmp_path / "a.parquet").stat().st_size / 1e6
    assert text_mb / stored_mb > 4  # the plan's 2.4 an input byte: under the text it holds
    json_mb, _, said = _refused(tmp_path, str(tmp_path / "a.parquet"))
    assert json_mb == pytest.approx(text_mb * checked_json.TEXT_JSON_PER_INPUT_BYTE, rel=0.05)
    (tmp_path / "b.txt").write_bytes(b"x\n" * 700_000)
    mixed_mb, _, said = _refused(tmp_path, str(tmp_path / "*"))
    assert mixed_mb == pytest.approx(json_mb + 1.4 * checked_json.TEXT_JSON_PER_INPUT_BYTE, abs=1)
    assert "a text file's byte counted as 7 bytes of it, a Parquet file's stored byte as" in said


def test_a_kept_column_is_counted_with_the_text(tmp_path):
    """``keep_fields`` carries a column into every document beside its text: a kept column of 1 kB a row is
    counted (as its JSON), where it would otherwise pass for a column the job does not read."""
    rows = 20_000
    pq.write_table(pa.table({"id": [str(i) for i in range(rows)], "text": [REVIEW] * rows,
                             "html": [f"<p>{i}</p>" + "가" * 340 for i in range(rows)]}), tmp_path / "a.parquet")
    alone, _, _ = _refused(tmp_path, str(tmp_path / "a.parquet"))
    kept, _, _ = _refused(tmp_path, str(tmp_path / "a.parquet"), keep=("html",))
    assert alone == pytest.approx(rows * len(REVIEW.encode()) * 7 / 1e6, rel=0.05)
    assert kept > alone + rows * 1020 * 7 / 1e6 * 0.95


def test_a_parquet_file_that_cannot_be_read_is_passed_over(tmp_path):
    """A damaged file among those sampled is the job's to dead-letter: the others give the figure, and with
    none read the plan's figure stands (no traceback before the job)."""
    _reviews_with_embedding(tmp_path / "a.parquet", 2_000)
    (tmp_path / "b.parquet").write_bytes(b"PAR1" + b"\0" * 5000)
    good = checked_json.parquet_text_per_byte(inputs.list_inputs([str(tmp_path / "a.parquet")]), "auto", "text")
    both = inputs.list_inputs([str(tmp_path / "*.parquet")])
    assert good and checked_json.parquet_text_per_byte(both, "auto", "text") == good
    assert checked_json.parquet_text_per_byte(inputs.list_inputs([str(tmp_path / "b.parquet")]), "auto", "text") is None
    assert checked_json.parquet_text_per_byte(inputs.list_inputs([str(tmp_path / "*.parquet")]), "jsonl", "text") is None


def test_the_parquet_sample_on_a_bucket_reads_the_text_not_the_object(bucket, s3_endpoint, tmp_path):
    """On a store the sample reads the footer and the text column's first pages (ranged GETs), not the
    object's other columns."""
    from kolectra.core import storage

    _reviews_with_embedding(tmp_path / "a.parquet", 20_000)
    data = (tmp_path / "a.parquet").read_bytes()
    storage.write_bytes(f"{bucket}/in/a.parquet", data)
    listed = inputs.list_inputs([f"{bucket}/in/*"])
    with answered(s3_endpoint) as seen:
        held = checked_json.parquet_text_per_byte(listed, "auto", "text")
    assert held == pytest.approx(checked_json.parquet_text_per_byte(inputs.list_inputs([str(tmp_path / "a.parquet")]),
                                                                    "auto", "text"))
    spans = [tuple(map(int, r.range.removeprefix("bytes=").split("-"))) for r in seen if r.operation == "GetObject"]
    assert spans and all(r.range for r in seen if r.operation == "GetObject"), seen
    assert sum(end + 1 - start for start, end in spans) < len(data) / 4, (spans, len(data))


def test_a_text_heavy_parquet_sample_on_a_bucket_reads_a_megabyte_at_a_time(bucket, s3_endpoint, tmp_path):
    """The sample of a text-heavy object (39 MB, one row group) read its text pages through the reader's 8 MiB
    buffer for a store's object: 10.5 MB in 3 GETs for 64 kB of text, 42 MB for 4 such files before the
    job. Now through 1 MiB (the probe of its first pages aside): the same figure, under 4 MB."""
    from kolectra.core import storage

    rng = random.Random(0)
    words = [chr(0xAC00 + rng.randrange(11172)) * rng.randint(1, 3) for _ in range(5000)]
    texts = [" ".join(rng.choice(words) for _ in range(300)) for _ in range(40_000)]
    pq.write_table(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), tmp_path / "a.parquet",
                   compression="zstd")
    data = (tmp_path / "a.parquet").read_bytes()
    storage.write_bytes(f"{bucket}/in/a.parquet", data)
    local = checked_json.parquet_text_per_byte(inputs.list_inputs([str(tmp_path / "a.parquet")]), "auto", "text")
    with answered(s3_endpoint) as seen:
        held = checked_json.parquet_text_per_byte(inputs.list_inputs([f"{bucket}/in/*"]), "auto", "text")
    assert held == pytest.approx(local) and held > 2
    spans = [tuple(map(int, r.range.removeprefix("bytes=").split("-"))) for r in seen if r.operation == "GetObject"]
    assert sum(end + 1 - start for start, end in spans) < 4e6, (spans, len(data))


def _short_then_long(path, head_bytes: int, size: int) -> float:
    """A crawl's ``{"url", "text"}``: ``head_bytes`` of short texts (44 % of their lines), then long ones
    (97 %) to ``size`` bytes; the share of the file that is text."""
    short = json.dumps({"url": "https://news.example.com/articles/2026/12/01/" + "a" * 40, "text": REVIEW},
                       ensure_ascii=False).encode() + b"\n"
    long = json.dumps({"url": "https://news.example.com/a/1", "text": REVIEW * 30}, ensure_ascii=False).encode() + b"\n"
    heads, longs = head_bytes // len(short), (size - head_bytes) // len(long)
    path.write_bytes(short * heads + long * longs)
    text = len(REVIEW.encode()) * (heads + 30 * longs)
    return text / (heads * len(short) + longs * len(long))


def test_a_jsonl_file_whose_first_records_are_short_is_counted_by_all_of_it(tmp_path):
    """A JSONL file whose first 1 MB holds short texts beside long URLs (44 % text) and the 15 MB after
    long ones (97 %; 95 % over the file) was counted by its first 64 kB alone: at the plan's 3.5 bytes of
    JSON a byte, where the peak grows 6.6 MB per MB of text (the reviews' fit): at 34 GB of such a file
    179 GB where that fit says 213. Its lines are now read at 4 places spread over it: 6.0 a byte. A gzip
    file is read from its start (a place in it is reached only by decompressing what comes before)."""
    whole = _short_then_long(tmp_path / "a.jsonl", 1 << 20, 16 << 20)
    assert whole > 0.9
    listed = inputs.list_inputs([str(tmp_path / "a.jsonl")])
    share = checked_json.jsonl_text_share(listed, "auto", "text", 1 << 20)
    assert share is not None and share * checked_json.TEXT_JSON_PER_INPUT_BYTE > 6.0
    json_mb, _, said = _refused(tmp_path, str(tmp_path / "a.jsonl"))
    assert json_mb > 16.7 * 6.0 and "% of its bytes being text" in said
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress((tmp_path / "a.jsonl").read_bytes(), 1))
    head = checked_json.jsonl_text_share(inputs.list_inputs([str(tmp_path / "b.jsonl.gz")]), "auto", "text", 1 << 20)
    assert head is not None and head < 0.5


def test_a_jsonl_sample_on_a_bucket_is_a_ranged_get_a_place(bucket, s3_endpoint, tmp_path):
    """On a store each place is read with ranged GETs of the sample's bytes, not the object."""
    from kolectra.core import storage

    _short_then_long(tmp_path / "a.jsonl", 1 << 20, 8 << 20)
    storage.write_bytes(f"{bucket}/in/a.jsonl", (tmp_path / "a.jsonl").read_bytes())
    local = checked_json.jsonl_text_share(inputs.list_inputs([str(tmp_path / "a.jsonl")]), "auto", "text", 1 << 20)
    with answered(s3_endpoint) as seen:
        share = checked_json.jsonl_text_share(inputs.list_inputs([f"{bucket}/in/*"]), "auto", "text", 1 << 20)
    assert share == pytest.approx(local)
    spans = [tuple(map(int, r.range.removeprefix("bytes=").split("-"))) for r in seen if r.operation == "GetObject"]
    assert len(spans) >= 4 and all(r.range for r in seen if r.operation == "GetObject"), seen
    assert sum(end + 1 - start for start, end in spans) < 1 << 20, spans


@pytest.mark.parametrize("record_kb, records", [(200, 20), (900, 1)])
def test_a_jsonl_file_of_long_records_is_counted_by_their_text(tmp_path, record_kb, records):
    """A record longer than about 128 kB (a long document, well under max_line_bytes' 1 MiB) was cut by the
    sample's end at a place (64 kB a place, 256 kB read at most) and taken for a line of no text, its JSON
    unparsable: a file of 200 kB records counted as 52 % text, one of a single 900 kB record as none (both
    all text), so at the plan's 3.5 bytes of JSON a byte, half the 7.0 its text weighs. The line the sample
    ends in is now read to its end (up to max_line_bytes): 100 %."""
    sentence = "긴 문서의 한 문장이 이어지고 또 이어지는 한국어 글입니다. "
    doc = sentence * (record_kb * 1000 // len(sentence.encode()))
    with open(tmp_path / "long.jsonl", "w", encoding="utf-8") as f:
        for i in range(records):
            f.write(json.dumps({"id": i, "text": doc}, ensure_ascii=False) + "\n")
    share = checked_json.jsonl_text_share(inputs.list_inputs([str(tmp_path / "long.jsonl")]), "auto", "text", 1 << 20)
    assert share is not None and share > 0.99
    size_mb = (tmp_path / "long.jsonl").stat().st_size / 1e6
    json_mb, _, said = _refused(tmp_path, str(tmp_path / "long.jsonl"))
    assert json_mb >= int(size_mb * 6.9) and "100% of its bytes being text" in said  # said in whole MB
    # past max_line_bytes the record is one the job rejects (too_long): no text, and its read stops there
    assert checked_json.jsonl_text_share(inputs.list_inputs([str(tmp_path / "long.jsonl")]), "auto", "text",
                                         100_000) is None
