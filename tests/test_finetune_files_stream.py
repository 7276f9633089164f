"""Large task files read a piece at a time: a JSON array (KLUE's own .json files) an item at a time, a
Parquet file a batch of rows at a time; both had been read whole (s13)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tracemalloc

import pytest

from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers import json_array
from kolectra.finetune.readers.tables import open_table


def test_a_json_array_is_read_an_item_at_a_time(tmp_path, monkeypatch):
    # json.loads of the whole file held its text and a dict an item: a 93 MB KLUE-YNAT-like array peaked at 436 MB
    # (JSON Lines of the same rows: 18 MB, the interpreter's)
    monkeypatch.setattr(json_array, "BLOCK", 4096)
    path = tmp_path / "klue-ynat-v1.1_train.json"
    items = [{"guid": f"ynat-v1_train_{i:05d}", "title": f"제목 {i} " + "뉴스 " * (i % 20), "label": "경제"}
             for i in range(20000)]
    path.write_text(json.dumps(items, ensure_ascii=False, indent=4), encoding="utf-8")
    assert path.stat().st_size > 3_000_000
    tracemalloc.start()
    try:
        table = open_table(path, read=["title", "label"])
        n = sum(1 for _ in table.records)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (n, table.bad, table.columns) == (20000, [], ["guid", "title", "label"])
    assert peak < 500_000, peak  # before: the file's text and 20,000 dicts, over 10 MB


def test_a_json_array_read_in_pieces_gives_what_json_loads_gives(tmp_path, monkeypatch):
    # items cut anywhere by the blocks: a number at a block's end ("3" of "3.25e-07") must not be read short
    r, path = random.Random(0), tmp_path / "a.json"
    for trial in range(120):
        items = [r.choice([{"t": "가" * r.randint(0, 9), "n": r.randint(-10**12, 10**12), "f": r.random(), "l": [1, None]},
                           12345678901234, 3.25e-07, "s", None, True, [], {}]) for _ in range(r.randint(0, 6))]
        text = json.dumps(items, ensure_ascii=r.random() < .5, indent=r.choice([None, 0, 4]))
        path.write_text(("\ufeff" if trial % 3 == 0 else "") + text + "\n", encoding="utf-8")
        monkeypatch.setattr(json_array, "BLOCK", r.randint(1, 12))
        assert [v for _, _, v in json_array.array_items(path)] == items, text
    path.write_text('[\n    {"a": 1},\n    {"a": 2}\n]\n', encoding="utf-8")
    assert [(n, line) for n, line, _ in json_array.array_items(path)] == [(1, 2), (2, 3)]


@pytest.mark.parametrize("text, said", [
    ('[\n{"a": 1},\n{"a": tru}\n]', r"a\.json:3: item 2 of the JSON array is not valid JSON \(Expecting value\)"),
    ('[{"a": 1},\n{"a": 2}', r"a\.json:2: the JSON array is never closed"),
    ('[{"a": 1},]', r"a\.json:1: the JSON array has a ',' before its '\]'"),
    ('[{"a": 1}]\n[{"a": 2}]\n', r"a\.json:2: more after the JSON array closes \('\['\)"),
])
def test_a_broken_json_array_is_refused_in_one_line_naming_where(tmp_path, text, said):
    path = tmp_path / "a.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FinetuneError, match=said):
        list(open_table(path).records)


@pytest.mark.parametrize("broken, said", [
    ('"label": tru,', r"a\.json:8: item 2 of the JSON array is not valid JSON \(Expecting value\)"),
    ('"label": 1x,', r"a\.json:8: item 2 of the JSON array is not valid JSON \(Expecting ',' delimiter\)"),
])
def test_a_broken_item_early_in_a_large_json_array_is_refused_without_reading_the_rest(tmp_path, monkeypatch, broken,
                                                                                        said):
    # the reader took any parse error for an item cut by its buffer and read on to the end of the file before
    # refusing it: a 93 MB array with item 4 broken peaked at 396 MB (a file of a few GB: killed, not refused)
    monkeypatch.setattr(json_array, "BLOCK", 4096)
    path = tmp_path / "a.json"
    items = [{"title": f"제목 {i} " + "뉴스 " * (i % 20), "label": "경제"} for i in range(20000)]
    text = json.dumps(items, ensure_ascii=False, indent=4)
    at = text.index('"label"', text.index('"label"') + 1)
    path.write_text(text[:at] + broken + text[at + len('"label": "경제"'):], encoding="utf-8")
    tracemalloc.start()
    try:
        with pytest.raises(FinetuneError, match=said):
            list(json_array.array_items(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak  # before: the rest of the file's text, 8.8 MB
    path.write_text("[1x,\n" + text[1:], encoding="utf-8")  # a number followed by what ends no number
    tracemalloc.start()
    try:
        with pytest.raises(FinetuneError, match=r"a\.json:1: expected ',' or '\]' after item 1 of the JSON array, got 'x'"):
            list(json_array.array_items(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak


PARQUET_PEAK = """
import sys, pyarrow, pyarrow.parquet as pq
from kolectra.finetune.readers.tables import open_table
table = open_table(sys.argv[1], read=["text", "label"])
n = sum(1 for _ in table.records)
print(n, pyarrow.default_memory_pool().max_memory(), pq.read_metadata(sys.argv[1]).num_row_groups)
"""


def test_a_parquet_file_is_read_a_batch_of_rows_at_a_time(tmp_path):
    # pq.read_table held the whole table (a 32 MB file of 400,000 titles peaked at 561 MB); Arrow's own pool,
    # measured in a fresh interpreter (tracemalloc does not see it)
    import pyarrow  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    rows = 60000
    table = pyarrow.table({"text": [f"경기 결과 {i} " + "득점 " * (i % 30) for i in range(rows)],
                           "label": ["스포츠" if i % 2 else "경제" for i in range(rows)],
                           "meta": [{"source": "news", "id": i} for i in range(rows)]})
    path = tmp_path / "train.parquet"
    pq.write_table(table, path, row_group_size=2000)
    out = subprocess.run([sys.executable, "-c", PARQUET_PEAK, str(path)], capture_output=True, text=True, check=True)
    n, peak, groups = map(int, out.stdout.split())
    assert (n, groups) == (rows, 30)
    assert peak < table.nbytes / 4, (peak, table.nbytes)  # before: the whole table, over its nbytes
    first = next(iter(open_table(path).records))
    assert first == (1, {"text": "경기 결과 0 ", "label": "경제", "meta.source": "news", "meta.id": 0})


def test_label_names_that_do_not_fit_the_labels_say_so_not_raise_max_bad_fraction(tmp_path):
    # too few names: "20 of 80 rows are malformed (... raise it with --set max_bad_fraction=0.25)", a way out that
    # drops a whole class; names for text labels: "none is readable: check the file's format and columns"
    import dataclasses  # noqa: PLC0415

    from kolectra.finetune import config  # noqa: PLC0415
    from kolectra.finetune.classify import Classify  # noqa: PLC0415

    codes, texts = tmp_path / "codes.jsonl", tmp_path / "texts.jsonl"
    codes.write_text("".join(json.dumps({"text": f"제목 {i}", "label": i % 4}) + "\n" for i in range(80)), encoding="utf-8")
    texts.write_text("".join(json.dumps({"text": f"리뷰 {i}", "label": ["neg", "pos"][i % 2]}) + "\n" for i in range(80)),
                     encoding="utf-8")
    cfg = config.sample_classify()
    with pytest.raises(FinetuneError, match=r"codes\.jsonl: label_names gives 3 names \(codes 0 to 2\), but 20 rows have "
                                            r"codes past them \(up to 3\): give every class's name in code order"):
        Classify().read(dataclasses.replace(cfg, label_names=("IT과학", "경제", "사회")), codes, codes)
    with pytest.raises(FinetuneError, match=r"texts\.jsonl: label_names names integer class codes, but 80 rows' labels "
                                            r"are text that is none of its names \('neg', 'pos'\): leave label_names out"):
        Classify().read(dataclasses.replace(cfg, label_names=("부정", "긍정")), texts, texts)
    # one code past the names among many rows, under max_bad_fraction: a counted bad row, as before
    data = Classify().read(dataclasses.replace(cfg, label_names=("a", "b", "c"), max_bad_fraction=0.3), codes, codes)
    assert data.facts["test_file"]["bad_rows"] == 20 and data.facts["test_file"]["labels"] == {"a": 20, "b": 20, "c": 20}


def test_label_names_with_unlabelled_rows_coded_minus_one_keep_the_way_out_that_drops_them(tmp_path):
    # -1 is the Hub's code of a row without a label: s13's refusal called it "text that is none of its names ('-1'):
    # leave label_names out", which would train a class '-1'; dropping those rows (max_bad_fraction) is the way out
    import dataclasses  # noqa: PLC0415

    from kolectra.finetune import config  # noqa: PLC0415
    from kolectra.finetune.classify import Classify  # noqa: PLC0415

    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"text": f"제목 {i}", "label": -1 if i % 4 == 3 else i % 2}) + "\n"
                            for i in range(80)), encoding="utf-8")
    cfg = dataclasses.replace(config.sample_classify(), label_names=("neg", "pos"))
    with pytest.raises(FinetuneError, match=r"train\.jsonl: 20 of 80 rows are malformed .*raise it with --set "
                                            r"max_bad_fraction=0\.25.*label '-1' is neither a code of label_names"):
        Classify().read(cfg, path, path)
    # codes past the names beside them: only those are counted as past
    path.write_text("".join(json.dumps({"text": f"제목 {i}", "label": [0, 1, 2, -1][i % 4]}) + "\n" for i in range(80)),
                    encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"label_names gives 2 names \(codes 0 to 1\), but 20 rows have codes past "
                                            r"them \(up to 2\)"):
        Classify().read(cfg, path, path)


def test_label_names_for_a_scale_from_minus_one_say_the_labels_are_no_codes(tmp_path):
    # sentiment labels -1, 0, 1 with label_names=neg,neu,pos: "30 of 90 rows are malformed ... raise it with --set
    # max_bad_fraction=0.34", a way out that drops every -1 row and names 0 'neg', 1 'neu', silently wrong
    import dataclasses  # noqa: PLC0415

    from kolectra.finetune import config  # noqa: PLC0415
    from kolectra.finetune.classify import Classify  # noqa: PLC0415

    path = tmp_path / "scale.jsonl"
    path.write_text("".join(json.dumps({"text": f"리뷰 {i}", "label": i % 3 - 1}) + "\n" for i in range(90)),
                    encoding="utf-8")
    cfg = dataclasses.replace(config.sample_classify(), label_names=("neg", "neu", "pos"))
    with pytest.raises(FinetuneError, match=r"scale\.jsonl: label_names gives 3 names for the codes 0 to 2, but the "
                                            r"labels are -1 to 1, as many values as names: a scale, not class-label "
                                            r"codes \(which count from 0\)\? Leave label_names out to train the classes "
                                            r"'-1', '0', '1' as they are; dropping the rows of -1 \(max_bad_fraction\) "
                                            r"would name 0 'neg', 1 'neu'"):
        Classify().read(cfg, path, path)
    task = Classify()
    task.read(dataclasses.replace(cfg, label_names=()), path, path)
    assert task.labels == ["-1", "0", "1"]  # the way out it names


def test_csv_files_joined_each_with_a_byte_order_mark_before_a_quoted_header_read_it_as_the_header(tmp_path):
    # R's write.csv(fileEncoding="UTF-8-BOM") quotes every name: joined with cat, the second header read
    # \ufeff"text","label" as a training row, text '\ufeff"text"', of one more class 'label'
    from kolectra.finetune import config  # noqa: PLC0415
    from kolectra.finetune.classify import Classify  # noqa: PLC0415

    part = '\ufeff"text","label"\n' + "".join(f'"리뷰 {i}","{["neg", "pos"][i % 2]}"\n' for i in range(500))
    path = tmp_path / "joined.csv"
    path.write_text(part + part, encoding="utf-8")
    table = open_table(path)
    assert sum(1 for _ in table.records) == 1000
    assert table.bad == [(502, "repeats the header line (files joined with their headers, as `cat a.csv b.csv` does?)")]
    task = Classify()
    task.read(config.sample_classify(), path, path)
    assert task.labels == ["neg", "pos"]  # before: ['label', 'neg', 'pos']
    # a first name that is quoted text of its own (no mark before it) is still compared as it is
    (tmp_path / "q.tsv").write_text('"text"\tlabel\n가\tpos\n"text"\tlabel\n', encoding="utf-8")
    table = open_table(tmp_path / "q.tsv")
    assert [n for n, _ in table.records] == [2] and [n for n, _ in table.bad] == [3]


def test_tag_names_too_few_or_not_bio_say_so_not_raise_max_bad_fraction(tmp_path):
    # too few: "25 of 50 sentences are malformed (... raise it with --set max_bad_fraction=0.5)", which drops every
    # sentence holding the unnamed tag; a name that is no BIO tag: each sentence holding its code bad, one by one
    from kolectra.core.config import ConfigError, override  # noqa: PLC0415
    from kolectra.finetune import config  # noqa: PLC0415
    from kolectra.finetune.readers.ner import read_sentences  # noqa: PLC0415

    path = tmp_path / "ner.jsonl"
    path.write_text("".join(json.dumps({"tokens": ["서", "울", "에"], "ner_tags": [0, 1, 2 + i % 2]}) + "\n"
                            for i in range(50)), encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"ner\.jsonl: tag_names gives 3 names \(codes 0 to 2\), but 25 sentences "
                                            r"have codes past them \(up to 3\): give every tag's name in code order"):
        read_sentences(path, tag_names=("B-LC", "I-LC", "O"))
    with pytest.raises(ConfigError, match=r"tag_names: must be BIO tags"):
        override(config.NerConfig(), ["tag_names=B-LC,I-LC,O,X"]).validate()
    assert [s["tags"] for _, s in read_sentences(path, tag_names=("B-LC", "I-LC", "O", "B-PS")).records][:2] == [
        ["B-LC", "I-LC", "O"], ["B-LC", "I-LC", "B-PS"]]


def test_negative_tag_codes_are_not_called_codes_past_tag_names(tmp_path):
    # -100 (the ignore index a tokenized export writes) was counted as a code "past" the names: "25 sentences have
    # codes past them (up to -100)"; those sentences keep the refusal that names the code and max_bad_fraction
    from kolectra.finetune.readers.ner import read_sentences  # noqa: PLC0415

    path = tmp_path / "ner.jsonl"
    path.write_text("".join(json.dumps({"tokens": ["서", "울", "에"], "ner_tags": [0, 1, -100 if i % 2 else 2]}) + "\n"
                            for i in range(50)), encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"ner\.jsonl: 25 of 50 sentences are malformed .*max_bad_fraction=0\.5.*"
                                            r"tag code -100 is not a code of tag_names"):
        read_sentences(path, tag_names=("B-LC", "I-LC", "O"))


def test_a_null_among_class_label_tags_is_a_bad_sentence_not_a_type_error(tmp_path):
    # a Parquet file (or saved dataset) whose list of class-label tags holds a null ended the run in
    # "TypeError: '<=' not supported between instances of 'int' and 'NoneType'"
    import datasets  # noqa: PLC0415
    import pyarrow  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    from kolectra.finetune.readers.ner import read_sentences  # noqa: PLC0415

    features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-LC", "I-LC"]))})
    table = pyarrow.table({"tokens": [["서", "울"], ["에", "서"]] * 5, "ner_tags": [[1, 2], [0, None]] * 5})
    pq.write_table(table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features.to_dict()}})}),
                   tmp_path / "ner.parquet")
    read = read_sentences(tmp_path / "ner.parquet", max_bad_fraction=0.5)
    assert [s["tags"] for _, s in read.records] == [["B-LC", "I-LC"]] * 5
    assert [n for n, _ in read.bad] == [2, 4, 6, 8, 10]


def test_the_error_for_a_file_that_is_not_utf8_holds_no_copy_of_it(tmp_path):
    # the message's line, byte and cp949 hint were found in the file's bytes and its cp949 text held whole: a 144 MB
    # cp949 file peaked at 316 MB for one line of error (a few GB's file: an out-of-memory kill instead)
    from kolectra.finetune.files import not_utf8  # noqa: PLC0415

    path = tmp_path / "ratings.txt"
    path.write_bytes(("id\tdocument\tlabel\n" + "".join(f"{i}\t정말 재미있는 영화 {i}\t{i % 2}\n" for i in range(150000)))
                     .encode("cp949"))
    assert path.stat().st_size > 4_000_000
    tracemalloc.start()
    try:
        said = str(not_utf8(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert said.startswith(f"{path}:2: not UTF-8 (invalid start byte: byte 0xc1 at offset 20); it reads as cp949")
    assert peak < 1_000_000, peak
    # a bad byte past the first block, in a file of CR line ends: the line counted by CR, as before
    path.write_bytes(b"text\tlabel\r" + b"a\t1\r" * 30000 + b"\xff\t0\r")
    assert str(not_utf8(path)).startswith(f"{path}:30002: not UTF-8 (invalid start byte: byte 0xff at offset 120011)")
