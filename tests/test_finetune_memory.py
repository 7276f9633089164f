"""What a file task holds in memory: its rows as columns read a record at a time, its tokenised rows in place.

docs/finetune.md, "Memory and large task files".  Bounds are generous multiples (tracemalloc, not
timings): the old reader held the file's lines, a dict per record and a dict per row (8 times the
file's bytes at the peak), and ``Features`` a padded int32 copy of every tokenised split.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kolectra.finetune.classify import Classify
from kolectra.finetune.config import ClassifyConfig
from kolectra.finetune.files import FinetuneError


def traced(fn):
    """(fn's result, peak bytes Python allocated while it ran)."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_text_file_is_read_into_columns_without_its_lines_or_a_dict_a_row(tmp_path):
    n = 20000
    path = tmp_path / "train.tsv"
    path.write_text(
        "id\ttext\tlabel\n" + "".join(f"{i}\t{'가나다라마바사' * 4} {i}\t{'가나'[i % 2]}\n" for i in range(n)),
        encoding="utf-8",
    )
    (rows, table), peak = traced(lambda: Classify().load(path, ClassifyConfig()))
    # the columns (a text, a label shared by its class, a line number) are about 2 times the file's bytes;
    # the lines, records and row dicts were 8 times
    assert peak < 4 * path.stat().st_size, (peak, path.stat().st_size)
    assert len(rows) == n and table.stats()["rows"] == n and rows["text"][7] == "가나다라마바사" * 4 + " 7"
    assert rows["line"][:3] == [2, 3, 4] and set(rows["label"]) == {"가", "나"}


def test_streamed_reading_counts_every_line_with_its_reason(tmp_path):
    """Read a record at a time, a file's lines still reconcile: header + used + bad (named) + blank."""
    body = ["id\ttext\tlabel"] + [f"{i}\t문장 {i}\t{'가나'[i % 2]}" for i in range(40)]
    body[5] = "깨진 줄"  # one field
    body[9] = "9\t문장\t"  # an empty label
    body[12] = ""
    body[20] = "20\t문장\t가\t넷째"  # four fields
    path = tmp_path / "train.tsv"
    path.write_text("\n".join(body) + "\n", encoding="utf-8")
    rows, table = Classify().load(path, ClassifyConfig(max_bad_fraction=0.2))
    assert table.bad == [
        (6, "expected 3 tab-separated columns, got 1"),
        (10, "empty label"),
        (21, "expected 3 tab-separated columns, got 4"),
    ]
    assert 1 + len(rows) + len(table.bad) + table.blank == len(body) and table.stats()["rows"] == len(rows) == 36
    with pytest.raises(FinetuneError, match=r"3 of 39 rows are malformed .*: line 6: expected 3 tab-separated"):
        Classify().load(path, ClassifyConfig())


def test_a_file_that_is_not_utf8_is_refused_as_such_before_its_header_is_read(tmp_path):
    """Streaming kept the order of the messages: a file not UTF-8 past its first MiB (the header
    bad too) is named not UTF-8, as when the reader decoded it whole first."""
    path = tmp_path / "train.tsv"
    path.write_bytes(b"\t\t\n" + "1\t문장\t가\n".encode() * 120000 + "잘못".encode("cp949") + b"\n")
    with pytest.raises(FinetuneError, match=r"train.tsv:120002: not UTF-8 \(invalid start byte: byte 0xc0"):
        Classify().load(path, ClassifyConfig())


def reference(lists: list[list[int]], idx: np.ndarray, width: int, fill: int) -> np.ndarray:
    out = np.full((len(idx), width), fill, dtype=np.int64)
    for j, i in enumerate(idx):
        row = lists[i][:width]
        out[j, : len(row)] = row
    return out


def test_features_read_a_batch_from_the_memory_mapped_rows_not_a_padded_copy(tmp_path):
    import datasets

    from kolectra.finetune.features import Features

    rng = np.random.default_rng(0)
    n = 20000
    ids = [rng.integers(5, 200, rng.integers(1, 61)).tolist() for _ in range(n)]
    labels = [[t if t % 3 == 0 else -100 for t in row] for row in ids]
    written = datasets.Dataset.from_dict(
        {"input_ids": ids, "token_type_ids": [[0] * len(r) for r in ids], "labels": labels}
    )
    ds = written.map(lambda b: b, batched=True, batch_size=999, cache_file_name=str(tmp_path / "enc.arrow"))
    assert ds.data.table.column("input_ids").num_chunks > 10  # memory-mapped record batches
    feats, peak = traced(lambda: Features.of(ds, 3, ("input_ids", "token_type_ids", "labels")))
    # per row: a chunk number, a start and a length a column (20 bytes); the padded int32 copy was 2 x 4 x 60
    # bytes a column, and the mask beside it 60 more
    assert peak < 3 * 24 * n, peak
    assert feats.lengths.tolist() == [len(r) for r in ids] and feats.tokens == sum(map(len, ids))
    for width in (1, 17, 60, 128):
        idx = rng.integers(0, n, 33)
        b = feats.batch(idx, width)
        assert (b["input_ids"] == reference(ids, idx, width, 3)).all()
        assert (b["labels"] == reference(labels, idx, width, -100)).all()
        assert (b["token_type_ids"] == reference([[0] * len(r) for r in ids], idx, width, 0)).all()
        assert (b["attention_mask"] == (reference(ids, idx, width, -1) >= 0)).all()
        assert all(v.dtype == np.int64 for v in b.values())
        assert set(feats.batch(idx, width, labels=False)) == {"input_ids", "token_type_ids", "attention_mask"}
    assert (feats.padded("input_ids") == reference(ids, np.arange(n), 60, 3)).all()


def test_a_token_column_of_sliced_chunks_reads_its_own_rows():
    from kolectra.finetune.features import TokenColumn

    rows = [[1, 2, 3], [], [4], [5, 6], [7, 8, 9, 10]]
    whole = pa.array(rows, pa.list_(pa.int64()))
    column = pa.chunked_array([whole.slice(1, 3), whole.slice(0, 0), whole.slice(4, 1)])  # [], [4], [5, 6] | [7..10]
    col = TokenColumn(column)
    assert col.lengths.tolist() == [0, 1, 2, 4]
    assert col.rows(np.array([3, 0, 2, 1]), 3, -1).tolist() == [[7, 8, 9], [-1, -1, -1], [5, 6, -1], [4, -1, -1]]
    assert TokenColumn(pa.chunked_array([], pa.list_(pa.int64()))).rows(np.zeros(0, np.int64), 4, 0).shape == (0, 4)


def test_the_reader_still_refuses_what_it_refused(tmp_path):
    """The column checks, also for a JSON Lines file (its columns are known once it is read)."""
    j = tmp_path / "t.jsonl"
    j.write_text("".join(f'{{"text": "문장 {i}", "lab": "{"가나"[i % 2]}"}}\n' for i in range(6)), encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"no column 'label' \(label_column\); its columns are: text, lab"):
        Classify().load(j, ClassifyConfig())
    t = Path(tmp_path / "t.tsv")
    t.write_text("id\ttext\tlabl\n1\t가\t나\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"no column 'label' \(label_column\); its columns are: id, text, labl"):
        Classify().load(t, ClassifyConfig())


def test_the_dev_carve_holds_no_list_or_tuple_a_row():
    """The carve's groups: a row's index while the text is seen once (a list and a key tuple a row before)."""
    import hashlib

    from kolectra.finetune.features import split_dev

    n = 20000
    keys = [hashlib.blake2b(str(i % 15000).encode(), digest_size=16).digest() for i in range(n)]  # 5,000 repeated
    (train, dev), peak = traced(lambda: split_dev(range(n), 0.1, 1, key=keys.__getitem__))
    assert peak < 140 * n, peak / n  # about 93 bytes a row; 187 with a list and a tuple a row
    assert sorted(train + dev) == list(range(n)) and dev == sorted(dev) and 1900 <= len(dev) <= 2000
    side = {keys[i]: "dev" for i in dev}
    assert all(keys[i] not in side for i in train)  # a repeated text on one side only
    assert (train, dev) == split_dev(range(n), 0.1, 1, key=keys.__getitem__)


def test_a_conll_file_is_read_without_a_list_of_its_lines(tmp_path):
    from kolectra.finetune.readers.ner import read_sentences

    path = tmp_path / "train.conll"
    sentence = "\n".join(f"토큰{j}\t{'B-PER' if j == 0 else 'O'}" for j in range(12))
    path.write_text("\n\n".join(sentence for _ in range(5000)) + "\n", encoding="utf-8")
    table, peak = traced(lambda: read_sentences(path))
    assert len(table.records) == 5000 and table.records[1][0] == 14 and table.bad == []
    # the sentences (a token, a tag and a line number a token) are about 18 times the file's bytes; with the
    # file's lines held beside them, 27 times
    assert peak < 21 * path.stat().st_size, peak / path.stat().st_size


def test_an_nsmc_file_is_read_a_line_at_a_time_into_slotted_rows(tmp_path):
    """NSMC's reader keeps the rows as columns (ids, reviews, labels, line numbers: no object a row since
    d44b937) and no list of the file's lines beside them: its peak is the columns and the ids' set (4.2
    times the file's bytes here: a review in Python's two-byte form; 4.6 with a slotted row a line); the
    lines and a ``__dict__`` a row made it 6.9 times. ``rows`` makes the row objects on demand."""
    from kolectra.finetune.readers.nsmc import read_nsmc  # noqa: PLC0415

    n = 20000
    path = tmp_path / "ratings_train.txt"
    path.write_text("id\tdocument\tlabel\n" + "".join(f"{9000000 + i}\t{'재밌는 영화였어요 배우 연기' * 2} {i}\t{i % 2}\n"
                                                       for i in range(n)), encoding="utf-8")
    f, peak = traced(lambda: read_nsmc(path))
    assert peak < 5.5 * path.stat().st_size, (peak, path.stat().st_size)
    assert len(f.rows) == n and f.rows[7].document == "재밌는 영화였어요 배우 연기" * 2 + " 7" and f.rows[7].line == 9
    assert f.stats["labels"] == {"0": n // 2, "1": n // 2} and f.stats["duplicate_ids"] == 0
