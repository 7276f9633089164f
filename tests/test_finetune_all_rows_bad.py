"""A file whose every row is bad, let through by max_bad_fraction=1: refused with the rows' reasons, not without."""

import dataclasses

import pytest

from kolectra.finetune.classify import Classify
from kolectra.finetune.config import sample_classify
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers.ner import read_sentences


def test_no_usable_rows_says_why_each_row_was_bad(tmp_path):
    """'train.tsv: no usable rows' (or NER's 'no tagged sentences') named neither a line nor a reason, where the
    same file under the default max_bad_fraction was refused with both (a6)."""
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n가\t\n나\t\n", encoding="utf-8")
    cfg = dataclasses.replace(sample_classify(), max_bad_fraction=1.0)
    with pytest.raises(FinetuneError, match=r"train\.tsv: no usable rows \(2 bad row\(s\): lines 2, 3: empty label\)$"):
        Classify().read(cfg, train, train)
    tags = tmp_path / "train.conll"
    tags.write_text("서울\tb-loc\n에\to\n\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"train\.conll: no tagged sentences \(1 bad sentence\(s\): line 1: tag "
                                            r"'b-loc' is not a BIO tag"):
        read_sentences(tags, "auto", "tokens", "ner_tags", 1.0, ())


def test_bad_rows_left_out_within_max_bad_fraction_are_said(tmp_path, capsys):
    """A scored file's bad rows let through by max_bad_fraction were left out of its figures with no word on stderr
    (only metrics.json's bad_lines): the score was over fewer rows than the file holds, unsaid (a6)."""
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"글 {i}\t{'pos' if i % 2 else 'neg'}\n" for i in range(40)), encoding="utf-8")
    test = tmp_path / "test.tsv"
    test.write_text("text\tlabel\n" + "".join(f"시험 {i}\t{'pos' if i % 2 else 'neg'}\n" for i in range(18))
                    + "빈 라벨\t\n", encoding="utf-8")
    Classify().read(dataclasses.replace(sample_classify(), max_bad_fraction=0.1), train, test)
    err = capsys.readouterr().err
    assert ("WARNING: classify: test.tsv: 1 bad row(s) left out (empty_label 1; line 20: empty label; "
            "test_file.bad_rows_by_reason, .bad_lines in metrics.json)") in err
    assert "train.tsv: " not in err


def test_a_ner_row_of_no_tokens_says_so_not_that_its_tokens_are_blank(tmp_path):
    """A JSONL row '"tokens": [], "ner_tags": []' was the bad row "every token is blank (0 dropped)" (a6)."""
    rows = tmp_path / "ner.jsonl"
    rows.write_text('{"tokens": [], "ner_tags": []}\n' + '{"tokens": ["서울"], "ner_tags": ["B-LOC"]}\n' * 3,
                    encoding="utf-8")
    table = read_sentences(rows, "auto", "tokens", "ner_tags", 0.5, ())
    assert table.bad == [(1, "no tokens (an empty list): nothing to tag")]
