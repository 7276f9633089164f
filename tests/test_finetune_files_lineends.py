"""Users' task files as other tools write them: old-Mac CR line ends, JSONL tags as class-label codes
(``Dataset.to_json``), blank tokens that carried a whole gold entity (r6)."""

import json

import pytest

from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers.ner import CODES, read_sentences
from kolectra.finetune.readers.tables import read_table


def test_a_tsv_with_cr_line_ends_reads_its_rows_at_their_lines(tmp_path):
    # Excel for Mac's tab-delimited text: CR alone; read by LF it was one line, "no column 'label'"
    path = tmp_path / "train.tsv"
    path.write_bytes("text\tlabel\r가\t1\r\r나\t0\r".encode())
    table = read_table(path)
    assert table.columns == ["text", "label"]
    assert table.records == [(2, {"text": "가", "label": "1"}), (4, {"text": "나", "label": "0"})]
    assert (table.bad, table.blank) == ([], 1)


def test_jsonl_and_conll_with_cr_line_ends_are_read(tmp_path):
    rows = tmp_path / "train.jsonl"
    rows.write_bytes('{"text": "가", "label": 1}\r{"text": "나", "label": 0}'.encode())
    assert [n for n, _ in read_table(rows).records] == [1, 2]
    conll = tmp_path / "train.conll"
    conll.write_bytes("삼성\tB-ORG\r전자\tI-ORG\r\r서울\tB-LOC\r".encode())
    table = read_sentences(conll)
    assert [(n, s["tags"]) for n, s in table.records] == [(1, ["B-ORG", "I-ORG"]), (4, ["B-LOC"])]


def test_a_cr_inside_an_lf_file_stays_text_and_a_cr_file_names_its_bad_line(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes("text\tlabel\n가\r다\t1\n".encode())
    assert read_table(path).records == [(2, {"text": "가\r다", "label": "1"})]
    path.write_bytes(b"text\tlabel\r\xea\xb0\x80\t1\r\xff\t0\r")
    with pytest.raises(FinetuneError, match=r"train\.tsv:3: not UTF-8"):
        read_table(path)


def codes_file(path, tags):
    path.write_text("".join(json.dumps({"tokens": ["김", "민", "수"], "ner_tags": t}) + "\n" for t in tags),
                    encoding="utf-8")
    return path


def test_jsonl_tags_as_class_label_codes_say_how_to_get_the_names(tmp_path):
    path = codes_file(tmp_path / "train.jsonl", [[1, 2, 0], [1, 2, 2]])
    with pytest.raises(FinetuneError) as e:
        read_sentences(path)
    assert "integers, not tag names" in str(e.value) and "save_to_disk" in str(e.value)
    assert "int2str" in str(e.value) and "--tags-column tags" in str(e.value)
    assert "\n" not in str(e.value)


def test_one_row_of_codes_among_names_is_a_bad_row_saying_so(tmp_path):
    path = codes_file(tmp_path / "train.jsonl", [["B-PS", "I-PS", "O"]] * 999 + [[1, 2, 0]])
    table = read_sentences(path)
    assert table.bad == [(1000, CODES)]


def test_the_gold_entities_of_blank_tokens_are_counted(tmp_path):
    # a JSONL row's space tagged alone (lost entirely) and one beginning the second of two entities (joined)
    path = tmp_path / "train.jsonl"
    rows = [{"tokens": ["김", " ", "가"], "ner_tags": ["O", "B-PS", "O"]},
            {"tokens": ["서", "울", " ", "부", "산"], "ner_tags": ["B-LC", "I-LC", "B-LC", "I-LC", "I-LC"]},
            {"tokens": ["한", " ", "국"], "ner_tags": ["B-LC", "I-LC", "I-LC"]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    records = [s for _, s in read_sentences(path).records]
    assert [s["entities_lost"] for s in records] == [1, 1, 0]
    from kolectra.finetune.ner import Ner
    counts = Ner.counts(None, records)
    assert (counts["blank_tokens_dropped"], counts["blank_entities_dropped"]) == (3, 2)


def test_a_jsonl_label_written_as_a_whole_float_is_its_integer_class():
    # pandas writes an integer column with a missing value as floats: 1.0 is the class of 1 and "1"
    from kolectra.finetune.classify import label_text
    from kolectra.finetune.text_task import BadRow
    assert label_text(1.0) == label_text(1) == label_text("1") == "1"
    assert (label_text(True), label_text(False)) == ("true", "false")  # classify 10: JSON's spelling, never 1/0
    for value in (1.5, [1], float("nan")):
        with pytest.raises(BadRow, match="label must be text or an integer"):
            label_text(value)


def test_a_label_that_is_an_object_names_its_dotted_fields():
    from kolectra.finetune.text_task import row_of
    record = {"text": "가", "label.gold": 1, "label.votes": 3}
    assert row_of(record, "text", None, "label") == \
        "'label' is an object (label.gold, label.votes): a dotted name reaches a field of it, e.g. 'label.gold'"
    assert row_of({"text": "가"}, "text", None, "label") == "no 'label' field"


def test_cr_line_ends_with_a_stray_lf_say_so_in_the_column_error(tmp_path):
    # one LF (the last line's, say) keeps the file read by LF: the header runs on through the rows
    path = tmp_path / "train.tsv"
    path.write_bytes("text\tlabel\r가\t1\r나\t0\n".encode())
    with pytest.raises(FinetuneError) as e:
        read_table(path).column("label", "label_column")
    assert "its columns are: text, label\\r가, 1\\r나, 0; a column name holds a CR" in str(e.value)
    assert "\r" not in str(e.value) and "tr '\\r' '\\n'" in str(e.value)
