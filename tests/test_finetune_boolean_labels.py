"""JSON and Parquet booleans as labels: classes `false`/`true` for classify, one clear refusal for regress."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kolectra.finetune import config
from kolectra.finetune.classify import Classify
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.regress import Regress


def _jsonl(path, labels):
    path.write_text("".join(json.dumps({"text": f"리뷰 {i}", "label": y}, ensure_ascii=False) + "\n"
                            for i, y in enumerate(labels)), encoding="utf-8")
    return path


def test_json_and_parquet_boolean_labels_are_the_classes_false_and_true(tmp_path):
    """A JSONL file of `"label": true` (pandas' to_json of a bool column) had every row counted bad, "label must be
    text or an integer, got True", and the file refused; a Parquet file's bool column the same (z6). They are the
    classes 'false' and 'true' (false 0, true 1), the classes of a TSV's text true/false."""
    labels = [i % 3 == 0 for i in range(60)]
    train = _jsonl(tmp_path / "train.jsonl", labels)
    test = tmp_path / "test.tsv"
    test.write_text("text\tlabel\n" + "".join(f"글 {i}\t{'true' if i % 2 else 'false'}\n" for i in range(8)),
                    encoding="utf-8")
    cfg = dataclasses.replace(config.sample_classify(), dev_fraction=0.25)
    task = Classify()
    data = task.read(cfg, train, test)
    assert task.labels == ["false", "true"]
    assert data.facts["train_file"]["bad_rows"] == 0
    assert data.facts["test_file"]["labels"] == {"false": 4, "true": 4}
    import pandas  # noqa: PLC0415

    pandas.DataFrame({"text": [f"리뷰 {i}" for i in range(60)], "label": labels}).to_parquet(tmp_path / "train.parquet")
    parquet = Classify()
    data = parquet.read(cfg, tmp_path / "train.parquet", train)
    assert parquet.labels == ["false", "true"] and data.facts["test_file"]["labels"] == {"false": 40, "true": 20}


def test_a_test_label_differing_from_a_training_label_only_in_case_says_so(tmp_path):
    """pandas' to_csv writes a bool column as True/False: against a JSONL file's true/false the refusal named the
    labels alone; it now says the two differ only in case and where each spelling comes from."""
    train = _jsonl(tmp_path / "train.jsonl", [i % 2 == 0 for i in range(40)])
    test = tmp_path / "test.csv"
    test.write_text("text,label\n글,True\n글,False\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match=r"test\.csv:2: label 'True' is not among the training labels \(false, "
                                            r"true\); the training label 'true' differs from it only in case \(a JSON "
                                            r"or Parquet true/false is read as 'true'/'false'; pandas' to_csv writes"):
        Classify().read(config.sample_classify(), train, test)


def test_boolean_scores_are_refused_in_one_line_that_sends_them_to_classify(tmp_path):
    """regress read true/false as bad rows "score must be a number, got True", the refusal's way out "check the
    file's format and columns"; it now says they are booleans, not scores, and that classify reads them. A file with
    a few among its scores keeps them as counted bad rows, as before."""
    train = _jsonl(tmp_path / "train.jsonl", [i % 2 == 0 for i in range(40)])
    with pytest.raises(FinetuneError, match=r"40 of 40 rows are malformed .*; 40 of them are a JSON or Parquet boolean "
                                            r"\(true/false\), not a score: regression reads numbers; a yes/no label is "
                                            r"two classes, kolectra finetune classify reads them"):
        Regress().read(config.sample_regress(), train, train)
    mixed = _jsonl(tmp_path / "mixed.jsonl", [True] + [i / 10 for i in range(59)])
    data = Regress().read(dataclasses.replace(config.sample_regress(), max_bad_fraction=0.05), mixed, mixed)
    # each row's reason says what the value is (a6): "got True" had read as a value to correct, not one of another kind
    assert data.facts["train_file"]["bad_lines"] == [{"line": 1, "reason": "score must be a number, not a boolean "
                                                      "(a JSON or Parquet true/false; never read as 1/0)"}]


def test_a_file_mixing_booleans_with_integer_labels_is_refused_not_trained_as_four_classes(tmp_path):
    """A JSONL file whose labels are true/false in some rows and 0/1 in others (files concatenated) trained the four
    classes '0', '1', 'false', 'true' without a word (before booleans were read, their rows were bad, dropped within
    max_bad_fraction); it is now refused in one line naming a row of each (z9). Booleans alone, or beside text labels
    of a TSV's spelling, are as before."""
    mixed = _jsonl(tmp_path / "mixed.jsonl", [(i % 2 == 0) if i < 30 else i % 2 for i in range(60)])
    with pytest.raises(FinetuneError, match=r"mixed\.jsonl:\d+: its labels mix JSON or Parquet booleans \(true/false\) "
                                            r"with integers \(.*mixed\.jsonl:\d+: [01]\): they would be the 4 classes "
                                            r"'0', '1', 'false', 'true', false and 0 not one; write the file's labels "
                                            r"alike"):
        Classify().read(config.sample_classify(), mixed, mixed)
    texts = _jsonl(tmp_path / "texts.jsonl", [(i % 2 == 0) if i < 30 else ("true" if i % 2 else "false")
                                               for i in range(60)])
    task = Classify()
    task.read(config.sample_classify(), texts, texts)
    assert task.labels == ["false", "true"]


def test_boolean_labels_with_label_names_are_named_as_the_codes_false_0_and_true_1(tmp_path):
    """label_names (class-label codes' names) on a file of JSON booleans was refused, "leave label_names out" (z9);
    a boolean is the code Python, pandas and numpy give it, false 0 and true 1: label_names=negative,positive names a
    false row negative (a6). A TSV's text true/false is the same class, in any case (pandas' to_csv writes True);
    with one name, a true row is a code past it, and a file refused for such rows says to give both names."""
    train = _jsonl(tmp_path / "train.jsonl", [i % 3 == 0 for i in range(60)])
    test = tmp_path / "test.csv"
    test.write_text("text,label\n글,True\n글,false\n글,TRUE\n", encoding="utf-8")
    cfg = dataclasses.replace(config.sample_classify(), label_names=("negative", "positive"))
    task = Classify()
    data = task.read(cfg, train, test)
    assert task.labels == ["negative", "positive"] and data.facts["train_file"]["bad_rows"] == 0
    assert data.facts["test_file"]["labels"] == {"negative": 1, "positive": 2}
    assert list(data.test["label"]) == [1, 0, 1]
    named = Classify()  # a name that is itself true/false stays the name
    named.read(dataclasses.replace(cfg, label_names=("true", "false")), train, train)
    assert named.labels == ["false", "true"]
    spelt = Classify()  # in any case: names True,False (pandas' spelling) name true True, not the code 1 False
    data = spelt.read(dataclasses.replace(cfg, label_names=("True", "False")), train, test)
    assert spelt.labels == ["False", "True"] and data.facts["test_file"]["labels"] == {"False": 1, "True": 2}
    with pytest.raises(FinetuneError, match=r"train\.jsonl: label_names gives one name \('negative'\), but 20 rows' "
                                            r"labels are true, the code 1 \(false is 0\): give both names, false's "
                                            r"first \(--set label_names=negative,positive\)"):
        Classify().read(dataclasses.replace(cfg, label_names=("negative",)), train, train)


def test_a_tsv_mixing_true_false_with_integer_labels_is_refused_as_a_json_one_is(tmp_path):
    """A TSV's text true is the class of a JSON true, and the docs say a file mixing booleans with integers is
    refused; a TSV of true/false in some rows and 1/0 in others (pandas' True/False beside them) trained the four
    classes '0', '1', 'false', 'true' without a word, only a JSON or Parquet file was refused (a15)."""
    for name, spelt in (("mixed.tsv", ("false", "true")), ("pandas.tsv", ("False", "True"))):
        mixed = tmp_path / name
        mixed.write_text("text\tlabel\n" + "".join(f"글 {i}\t{spelt[i % 2] if i < 30 else i % 2}\n" for i in range(60)),
                         encoding="utf-8")
        with pytest.raises(FinetuneError, match=rf"{name.replace('.', '[.]')}:\d+: its labels mix booleans \(true/false\)"
                                                rf" with integers \(.*:\d+: [01]\): they would be the 4 classes "):
            Classify().read(config.sample_classify(), mixed, mixed)
