"""The file tasks without a model, on inputs found by trying awkward files (each failed before its fix): a byte
order mark, blank lines and blank tokens, JSON Lines columns, integer labels, a column used twice, training, dev
or test rows left of one label or score, null, empty, -1 and out-of-range values, lone surrogates, a NER file
without an entity or named .json, a diverged regression, too few rows for a dev set, --seeds, a format that fits
neither file nor folder, trailing separators. The readers, refused inputs, metrics and health on plain files are
tests/test_finetune_task_inputs.py's."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from kolectra.core.config import ConfigError, override
from kolectra.finetune import config
from kolectra.finetune.classify import Classify, label_order
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.ner import Ner
from kolectra.finetune.readers.ner import read_sentences
from kolectra.finetune.readers.tables import read_table
from kolectra.finetune.regress import Regress, regression_scores
from tests.finetune_task_inputs_support import cls_cfg, fitted, topics, write


# ---- found by trying awkward files (each failed before its fix) ------------------------------------------
def test_a_byte_order_mark_is_dropped_from_jsonl_and_conll(tmp_path):
    rows = "".join(json.dumps({"text": f"문장 {i}", "label": "가나"[i % 2]}, ensure_ascii=False) + "\n"
                   for i in range(4))
    t = read_table(write(tmp_path / "bom.jsonl", "\ufeff" + rows))  # Windows editors start a file with one
    assert t.bad == [] and [n for n, _ in t.records] == [1, 2, 3, 4] and t.columns == ["text", "label"]
    s = read_sentences(write(tmp_path / "bom.conll", "\ufeff김민수\tB-PER\n씨\tO\n"))
    assert s.records[0][1]["tokens"] == ["김민수", "씨"]  # no invisible BOM glued to the first token


def test_blank_lines_are_skipped_and_counted_not_bad_rows(tmp_path):
    for name, text in (("t.tsv", "text\tlabel\n가\t1\n\n나\t0\n\n\n"), ("t.csv", "text,label\r\n가,1\r\n\r\n나,0\r\n\r\n"),
                       ("t.jsonl", '{"text": "가", "label": 1}\n\n{"text": "나", "label": 0}\n\n')):
        t = read_table(write(tmp_path / name, text))
        assert [n for n, _ in t.records] == ([1, 3] if name.endswith("jsonl") else [2, 4]) and t.bad == [], name
        assert t.stats()["blank_lines"] == (3 if name == "t.tsv" else 2), name
    # a trailing blank line used to be a malformed row: at the default 0.1 % a 500-row file was refused
    train = write(tmp_path / "train.tsv", "text\tlabel\n" + "".join(f"문장 {i}\t{'가나'[i % 2]}\n" for i in range(500))
                  + "\n")
    data = Classify().read(cls_cfg(), train, topics(tmp_path, "test.tsv", ["가", "나"]))
    facts = data.facts["train_file"]
    assert (facts["rows"], facts["bad_rows"], facts["blank_lines"]) == (500, 0, 1)


def test_jsonl_columns_come_from_every_object(tmp_path):
    # an optional field missing from the first object is still a column; rows without it are bad rows
    p = write(tmp_path / "pairs.jsonl", '{"a": "가", "label": "x"}\n{"a": "나", "b": "다", "label": "y"}\n'
                                        '{"a": "라", "b": "마", "label": "x"}\n')
    assert read_table(p).columns == ["a", "label", "b"]
    cfg = cls_cfg(text_column="a", text_pair_column="b", max_bad_fraction=0.5, dev_fraction=0.5)
    data = Classify().read(cfg, p, write(tmp_path / "t.jsonl", '{"a": "바", "b": "사", "label": "y"}\n'))
    assert data.facts["train_file"]["bad_lines"] == [{"line": 1, "reason": "no 'b' field"}]
    # one JSON array of objects (KLUE's own .json files) is read, its items numbered as rows; an object over
    # several lines is JSON, not JSON Lines
    assert read_table(write(tmp_path / "arr.json", '[\n  {\n    "a": "가",\n    "label": "x"\n  }\n]\n')).records == [
        (1, {"a": "가", "label": "x"})]
    with pytest.raises(FinetuneError, match=r"obj\.json: no line holds a JSON object \(JSON Lines: one object per "
                                            r"line, or one JSON array of objects; .*line 1: not valid JSON"):
        read_table(write(tmp_path / "obj.json", '{\n    "a": "가",\n    "label": "x"\n}\n'))


def test_integer_labels_sort_without_errors_or_hash_order():
    assert label_order(["²", "2"]) == ["2", "²"]  # isdigit() passes '²', int() refused it: an error without a file
    assert label_order(["--1", "2"]) == ["--1", "2"]
    assert label_order(["1", "01", "-0", "0"]) == ["-0", "0", "01", "1"]  # equal numbers by text, never set order


def test_a_column_used_twice_is_refused_by_key():
    for cls, sets, key in ((config.ClassifyConfig, ["text_pair_column=text"], "text_pair_column"),
                           (config.ClassifyConfig, ["label_column=text"], "label_column"),
                           (config.RegressConfig, ["text_pair_column=s2", "label_column=s2"], "label_column")):
        with pytest.raises(ConfigError, match=rf"^{key}: must be (another column|a column that is not)"):
            override(cls(), sets).validate()


def test_regress_refuses_one_training_score_and_digit_grouping(tmp_path):
    cfg = dataclasses.replace(config.sample_regress(), text_column="s1", text_pair_column="s2", label_column="score")
    same = write(tmp_path / "same.tsv", "s1\ts2\tscore\n" + "가\t나\t3\n" * 6)
    test = write(tmp_path / "t.tsv", "s1\ts2\tscore\n가\t나\t1\n")
    with pytest.raises(FinetuneError, match=r"same\.tsv: every training row has the score 3; regression needs"):
        Regress().read(cfg, same, test)
    grouped = write(tmp_path / "g.tsv", "s1\ts2\tscore\n가\t나\t1_0\n")
    with pytest.raises(FinetuneError, match=r"line 2: score must be a number, got '1_0'"):  # float() reads 10
        Regress().read(cfg, same, grouped)


def test_classify_refuses_training_rows_left_of_one_label_before_training(tmp_path):
    # as nsmc refuses (one_class): 20 'a' rows among 200 and max_train_examples=3 left three 'b' rows; it trained, and
    # the health said after the run that the model predicts 'b' for every dev row
    train = write(tmp_path / "train.tsv", "text\tlabel\n" + "".join(f"리뷰 {i}\t{'a' if i < 20 else 'b'}\n"
                                                                  for i in range(200)))
    cfg = dataclasses.replace(config.sample_classify(), max_train_examples=3, seed=0)
    task = Classify()
    data = task.read(cfg, train, train)
    assert set(data.train["label"]) == {task.labels.index("b")}
    with pytest.raises(FinetuneError, match=r"train\.tsv: the 3 training row\(s\) left by max_train_examples=3 and the dev "
                                            r"split \(dev_fraction=0\.2\) all have the label 'b'; classification needs at "
                                            r"least two: raise max_train_examples"):
        task.check({}, data, cfg)
    task = Classify()
    task.check({}, task.read(dataclasses.replace(cfg, max_train_examples=0), train, train), cfg)


def test_classify_names_max_train_examples_only_where_it_cut_a_label_away(tmp_path):
    # a max_train_examples of 1000 over 200 rows, the dev split having taken the one 'a' row, was told "left by
    # max_train_examples=1000 and the dev split ...: raise max_train_examples", which changes nothing
    train = write(tmp_path / "train.tsv", "text\tlabel\n" + "".join(f"리뷰 {i}\t{'a' if i < 1 else 'b'}\n"
                                                                  for i in range(200)))
    for seed in range(50):  # a seed whose carve puts the 'a' row in the dev split
        cfg = dataclasses.replace(config.sample_classify(), seed=seed, max_train_examples=1000)
        task = Classify()
        data = task.read(cfg, train, train)
        if "a" not in data.facts["train_file"]["labels"]:
            break
    with pytest.raises(FinetuneError, match=r"train\.tsv: the 160 training row\(s\) left by the dev split "
                                            r"\(dev_fraction=0\.2\) all have the label 'b'; classification needs at "
                                            r"least two: lower dev_fraction or pass --dev FILE$"):
        task.check({}, data, cfg)
    # with --dev, a cap that cut both labels to one is named alone, and raising it is the way out
    dev = write(tmp_path / "dev.tsv", "text\tlabel\n가\ta\n나\tb\n")
    task = Classify(dev)
    one = dataclasses.replace(cfg, max_train_examples=1, seed=0)
    data = task.read(one, train, train)
    with pytest.raises(FinetuneError, match=r"the 1 training row\(s\) left by max_train_examples=1 all have the label "
                                            r"'b'; classification needs at least two: raise max_train_examples$"):
        task.check({}, data, one)


def test_a_dev_set_cut_to_one_score_by_its_cap_names_the_cap_not_the_file(tmp_path):
    # a --dev file of 20 zeros then 20 ones, cut to its first 10 rows by max_eval_examples, was told "every dev row
    # has the score 0 ...; give a dev file of different scores", which it is
    cfg = dataclasses.replace(config.sample_regress(), text_column="s1", text_pair_column="s2", label_column="score",
                              max_eval_examples=10)
    train = write(tmp_path / "train.tsv", "s1\ts2\tscore\n" + "".join(f"가{i}\t나\t{i % 5}\n" for i in range(40)))
    dev = write(tmp_path / "dev.tsv", "s1\ts2\tscore\n" + "".join(f"다{i}\t라\t{i // 20}\n" for i in range(40)))
    task = Regress(dev)
    data = task.read(cfg, train, train)
    with pytest.raises(FinetuneError, match=r"dev\.tsv \(the first 10 of its 40 rows, cut by max_eval_examples=10, which "
                                            r"caps dev while max_dev_examples is -1\): every dev row has the score 0: "
                                            r".*; raise max_dev_examples \(0: all\)$"):
        task.check({}, data, cfg)
    own = dataclasses.replace(cfg, max_dev_examples=5)
    task = Regress(dev)
    with pytest.raises(FinetuneError, match=r"cut by max_dev_examples=5\): every dev row"):
        task.check({}, task.read(own, train, train), own)
    task = Regress(dev)
    task.check({}, task.read(dataclasses.replace(cfg, max_dev_examples=0), train, train), cfg)


def test_regress_refuses_training_rows_left_of_one_score_before_training(tmp_path):
    """As classify refuses rows of one label: 4 rows scored 5 among 200 scored 0, max_train_examples=3 with --dev, left
    three 0s; the head learned that score and the health said so only after the run."""
    cfg = dataclasses.replace(config.sample_regress(), text_column="s1", text_pair_column="s2", label_column="score",
                              max_train_examples=3, seed=0)
    train = write(tmp_path / "train.tsv", "s1\ts2\tscore\n" + "".join(f"가{i}\t나\t{5 if i < 4 else 0}\n"
                                                                    for i in range(200)))
    dev = write(tmp_path / "dev.tsv", "s1\ts2\tscore\n다\t라\t1\n마\t바\t4\n")
    test = write(tmp_path / "t.tsv", "s1\ts2\tscore\n사\t아\t2\n자\t차\t3\n")
    task = Regress(dev)
    data = task.read(cfg, train, test)
    with pytest.raises(FinetuneError, match=r"train\.tsv: the 3 training row\(s\) left by max_train_examples=3 all have "
                                            r"the score 0; regression needs at least two different scores: raise "
                                            r"max_train_examples$"):
        task.check({}, data, cfg)
    task = Regress(dev)
    task.check({}, task.read(dataclasses.replace(cfg, max_train_examples=0), train, test), cfg)


def test_regress_refuses_a_dev_set_of_one_score_before_training(tmp_path):
    # every dev correlation is undefined (0): the first epoch was kept, and the health said "dev Spearman 0.0000 and
    # Pearson 0.0000: ... the model learned nothing useful" of a model no dev row could judge
    cfg = dataclasses.replace(config.sample_regress(), text_column="s1", text_pair_column="s2", label_column="score")
    train = write(tmp_path / "train.tsv", "s1\ts2\tscore\n" + "".join(f"가{i}\t나\t{i % 5}\n" for i in range(40)))
    test = write(tmp_path / "t.tsv", "s1\ts2\tscore\n가\t나\t1\n다\t라\t2\n")
    dev = write(tmp_path / "dev.tsv", "s1\ts2\tscore\n" + "".join(f"다{i}\t라\t2.5\n" for i in range(12)))
    task = Regress(dev)
    data = task.read(cfg, train, test)
    with pytest.raises(FinetuneError, match=r"--dev .*dev\.tsv: every dev row has the score 2\.5: a correlation with it "
                                            r"is undefined, so no epoch can be chosen by it; give a dev file of "
                                            r"different scores"):
        task.check({}, data, cfg)
    carved = Regress()  # a carved dev of varied scores passes
    carved.check({}, carved.read(cfg, train, test), cfg)


def test_a_null_or_empty_score_or_text_is_said_empty_not_a_value_of_another_type(tmp_path):
    """A JSONL or Parquet null score (pandas' NaN) was a bad row "score must be a number, got None", an empty TSV one
    "got ''", and a null text "'text' is not text (got NoneType)": each read as a value to correct, not a missing one."""
    import pandas as pd

    cfg = dataclasses.replace(config.sample_regress(), max_bad_fraction=0.5, dev_fraction=0.5)
    rows = [{"text": f"문장 {i}", "label": i % 5} for i in range(8)]
    rows[2]["label"], rows[5]["text"] = None, None
    jsonl = write(tmp_path / "sts.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    parquet = tmp_path / "sts.parquet"
    pd.DataFrame(rows).to_parquet(parquet)  # the None score a NaN, written as a Parquet null
    test = write(tmp_path / "t.tsv", "text\tlabel\n가\t1\n")
    for path, unit in ((jsonl, "line"), (parquet, "row")):
        assert Regress().read(cfg, path, test).facts["train_file"]["bad_lines"] == [
            {unit: 3, "reason": "empty score (null)"}, {unit: 6, "reason": "'text' is empty (null)"}], path.name
    tsv = write(tmp_path / "sts.tsv", "text\tlabel\n" + "".join(f"문장 {i}\t{'' if i == 2 else ' ' if i == 4 else i}\n"
                                                            for i in range(8)))
    assert [b["reason"] for b in Regress().read(cfg, tsv, test).facts["train_file"]["bad_lines"]] == [
        "empty score", "empty score"]
    labels = [{"text": None if i == 1 else f"문장 {i}", "label": "ab"[i % 2]} for i in range(8)]
    named = write(tmp_path / "cls.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in labels))
    assert Classify().read(cls_cfg(max_bad_fraction=0.5), named, named).facts["train_file"]["bad_lines"] == [
        {"line": 2, "reason": "'text' is empty (null)"}]


def test_a_test_file_of_one_score_is_warned_of_before_training(tmp_path, capsys):
    """A test file whose scores are one placeholder (a benchmark's unlabelled test set, written to get predictions)
    trained and reported "test spearman 0.0000" as the model's figure, unsaid: a correlation with it is undefined."""
    cfg = dataclasses.replace(config.sample_regress(), text_column="s1", text_pair_column="s2", label_column="score")
    train = write(tmp_path / "train.tsv", "s1\ts2\tscore\n" + "".join(f"가{i}\t나\t{i % 5}\n" for i in range(40)))
    test = write(tmp_path / "test.tsv", "s1\ts2\tscore\n" + "".join(f"다{i}\t라\t0\n" for i in range(6)))
    task = Regress()
    task.check({}, task.read(cfg, train, test), cfg)
    assert (f"WARNING: regress: {test}: every test row has the score 0: a correlation with it is undefined, so the test "
            "pearson and spearman are reported as 0 whatever the model learned (predictions.jsonl still holds its "
            "scores); score a file of different scores") in capsys.readouterr().err
    varied = write(tmp_path / "varied.tsv", "s1\ts2\tscore\n" + "".join(f"다{i}\t라\t{i // 5}\n" for i in range(10)))
    capped = dataclasses.replace(cfg, max_eval_examples=5, max_dev_examples=0)
    task = Regress()
    task.check({}, task.read(capped, train, varied), capped)
    assert "varied.tsv (the first 5 of its 10 rows, cut by max_eval_examples=5): every test row has the score 0" in \
        (err := capsys.readouterr().err) and err.rstrip().endswith("raise max_eval_examples (0: all)")
    task = Regress()
    task.check({}, task.read(cfg, train, varied), cfg)
    assert "every test row" not in capsys.readouterr().err


def test_a_class_label_of_minus_one_is_named_an_unlabelled_row_not_an_empty_label(tmp_path):
    """A Hub test split saved as it is (every label -1, datasets' mark of an unlabelled row) was refused as
    "rows 1, 2, 3, 4: empty label", as if the labels were blank in the file, the -1 nowhere said."""
    import datasets

    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])})
    labelled = datasets.Dataset.from_dict({"text": [f"문장 {i}" for i in range(10)], "label": [i % 2 for i in range(10)]},
                                          features=features)
    unlabelled = datasets.Dataset.from_dict({"text": [f"시험 {i}" for i in range(4)], "label": [-1] * 4},
                                            features=features)
    train, test = tmp_path / "train.parquet", tmp_path / "test.parquet"
    labelled.to_parquet(str(train))
    unlabelled.to_parquet(str(test))
    unlabelled.save_to_disk(str(tmp_path / "test_saved"))
    reason = "label -1 (a class-label code outside its names: the Hub's mark of an unlabelled row, as a test split " \
             "without its labels has)"
    for path, unit in ((test, "row"), (tmp_path / "test_saved", "row")):
        with pytest.raises(FinetuneError, match=rf"4 of 4 rows are malformed .*: {unit}s 1, 2, 3, 4: "
                                                rf"{reason.replace('(', '[(]').replace(')', '[)]')}$"):
            Classify().read(cls_cfg(), train, path)
    # a score read from such a column is no -1 either (the code would have been read as a score)
    scores = write(tmp_path / "scores.tsv", "text\tlabel\n" + "".join(f"문장 {i}\t{i % 5}\n" for i in range(20)))
    with pytest.raises(FinetuneError, match=r"rows 1, 2, 3, 4: score must be a number, got -1 \(a class-label code"):
        Regress().read(config.sample_regress(), scores, test)


def test_a_json_integer_score_past_float_range_is_a_counted_bad_row(tmp_path):
    rows = [{"s1": "가", "s2": "나", "score": 1}, {"s1": "다", "s2": "라", "score": 10 ** 400},
            {"s1": "마", "s2": "바", "score": 4.5}]  # float(10 ** 400) raises OverflowError: was a traceback
    sts = write(tmp_path / "sts.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    cfg = dataclasses.replace(config.sample_regress(), text_column="s1", text_pair_column="s2", label_column="score",
                              max_bad_fraction=0.5, dev_fraction=0.5)
    data = Regress().read(cfg, sts, write(tmp_path / "t.tsv", "s1\ts2\tscore\n가\t나\t1\n"))
    facts = data.facts["train_file"]
    assert facts["rows"] == 2 and facts["bad_lines"] == [
        {"line": 2, "reason": "score must be finite, got an integer of 401 digits"}]


def test_a_lone_surrogate_in_a_jsonl_row_is_a_counted_bad_row(tmp_path):
    """JSON's "\\ud800" parses into a string Arrow and UTF-8 refuse: it was a UnicodeEncodeError traceback
    from pyarrow after the file was read; an escaped pair (an emoji) is one character and is read."""
    rows = [{"text": "좋아요 \ud83d\ude00", "label": "pos"}, {"text": "별로\ud800", "label": "neg"}]
    rows += [{"text": f"문장 {i}", "label": ["pos", "neg"][i % 2]} for i in range(10)]
    # json.dumps writes the escapes as they are: \ud83d\ude00 (a pair) and \ud800 (lone)
    train = write(tmp_path / "tr.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    test = write(tmp_path / "te.jsonl", "".join(json.dumps(r) + "\n" for r in rows[2:6]))
    cfg = dataclasses.replace(config.sample_classify(), max_bad_fraction=0.5)
    facts = Classify().read(cfg, train, test).facts["train_file"]
    assert facts["rows"] == 11 and [b["line"] for b in facts["bad_lines"]] == [2]
    assert facts["bad_lines"][0]["reason"].startswith("'text' has a lone surrogate")
    tokens = write(tmp_path / "ner.jsonl", json.dumps({"tokens": ["서울", "\udc00"], "ner_tags": ["B-LOC", "O"]}) + "\n"
                   + json.dumps({"tokens": ["부산"], "ner_tags": ["B-LOC"]}) + "\n")
    table = read_sentences(tokens, max_bad_fraction=0.5)
    assert [n for n, _ in table.records] == [2] and table.bad[0][0] == 1 and "'tokens'[1] has a lone" in table.bad[0][1]


def test_a_lone_surrogate_in_a_field_the_task_does_not_read_leaves_the_row_usable(tmp_path):
    """Only the fields a task reads are checked for a lone surrogate: a row whose other field (here
    "meta") holds one was used before the check came, and Arrow never sees that field."""
    rows = [{"text": f"문장 {i}", "label": ["pos", "neg"][i % 2], "meta": "x"} for i in range(12)]
    rows[1]["meta"] = "깨진\ud800"
    train = write(tmp_path / "tr.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    test = write(tmp_path / "te.jsonl", "".join(json.dumps(r) + "\n" for r in rows[4:8]))
    facts = Classify().read(config.sample_classify(), train, test).facts["train_file"]
    assert facts["rows"] == 12 and facts["bad_rows"] == 0
    tokens = write(tmp_path / "ner.jsonl", json.dumps({"tokens": ["서울"], "ner_tags": ["B-LOC"], "meta": "\udc00"})
                   + "\n" + json.dumps({"tokens": ["부산"], "ner_tags": ["B-LOC"]}) + "\n")
    table = read_sentences(tokens)
    assert [n for n, _ in table.records] == [1, 2] and not table.bad


def test_ner_refuses_a_training_file_without_an_entity(tmp_path):
    outside = write(tmp_path / "o.conll", "김민수\tO\n씨\tO\n\n서울\tO\n에\tO\n\n부산\tO\n")
    with pytest.raises(FinetuneError, match=r"o\.conll: every training tag is 'O': no entity to learn from"):
        Ner().read(config.sample_ner(), outside, write(tmp_path / "t.conll", "서울\tO\n"))


def test_ner_reads_json_suffix_and_counts_a_sentence_of_blank_tokens(tmp_path):
    j = write(tmp_path / "ner.json", json.dumps({"tokens": ["서울", "에"], "ner_tags": ["B-LOC", "O"]}) + "\n")
    assert read_sentences(j).records[0][1]["tags"] == ["B-LOC", "O"]  # .json is JSON Lines, as for the tables
    t = read_sentences(write(tmp_path / "b.conll", "김민수\tB-PER\n\n \tO\n\n서울\tB-LOC\n"), max_bad_fraction=0.5)
    assert [n for n, _ in t.records] == [1, 5] and t.bad == [(3, "every token is blank (1 dropped): nothing to tag")]


def test_a_diverged_regression_is_not_healthy_and_writes_no_nan_figures():
    gold, nan = np.array([0.5, 4.0, 2.0, 3.5]), np.full(4, np.nan)
    s = regression_scores(gold, nan)  # NaN compares false with everything: it passed the checks as "ok"
    assert (s["pearson"], s["spearman"], s["mse"]) == (0.0, 0.0, None)
    splits, fit = fitted(gold, {"predicted": np.array([1.0, np.inf, np.nan, 2.0])}, {"spearman": 0.0, "pearson": 0.0})
    problems, figures = Regress().health(splits, fit)
    assert problems == ["2 of the 4 dev predictions are not numbers (NaN or infinite): training diverged; try a "
                        "lower optim.lr"] and figures["dev_prediction_std"] is None


def test_too_few_rows_to_carve_a_dev_set_names_the_file(tmp_path):
    one = write(tmp_path / "one.conll", "김민수\tB-PER\n씨\tO\n")
    with pytest.raises(FinetuneError, match=r"one\.conll: train file has 1 rows: too few to carve a dev set; or pass "
                                            r"--dev FILE$"):
        Ner().read(config.sample_ner(), one, write(tmp_path / "t.conll", "서울\tB-LOC\n"))


def test_seeds_name_a_backwards_range_and_a_repeated_seed():
    from kolectra.finetune.seeds import parse_seeds

    assert parse_seeds("1-3,7") == [1, 2, 3, 7]
    with pytest.raises(ValueError, match=r"^--seeds: the range '3-1' runs backwards \(write 1-3\)$"):
        parse_seeds("3-1")
    with pytest.raises(ValueError, match=r"^--seeds: need distinct seeds, got '1,2,1'$"):
        parse_seeds("1,2,1")


def test_a_format_that_does_not_fit_file_or_folder_says_which(tmp_path):
    f = write(tmp_path / "train.conll", "김민수\tB-PER\n")
    with pytest.raises(FinetuneError, match=r"train\.conll: a file, but format=datasets reads a folder written by"):
        read_sentences(f, "datasets")  # was read as JSONL, whatever the setting said
    with pytest.raises(FinetuneError, match=r"train\.conll: a file, but format=datasets reads a folder"):
        read_table(f, "datasets")  # was "a folder, but not one written by save_to_disk"
    with pytest.raises(FinetuneError, match=r": a folder, but format=conll reads a file$"):
        read_sentences(tmp_path, "conll")  # was "cannot read ([Errno 21] Is a directory ...)"


def test_a_trailing_separator_names_no_column_and_unnamed_columns_get_a_name(tmp_path):
    for name, sep in (("t.tsv", "\t"), ("t.csv", ",")):
        text = f"text{sep}label{sep}\n좋다{sep}1{sep}\n싫다{sep}0\n{sep}{sep}\n"  # rows with and without it
        t = read_table(write(tmp_path / name, text))
        assert t.columns == ["text", "label"], name
        assert [r for _, r in t.records] == [{"text": "좋다", "label": "1"}, {"text": "싫다", "label": "0"}], name
        assert t.bad == [] and t.blank == 1  # separators alone hold no row: a blank line (q6)
    t = read_table(write(tmp_path / "u.tsv", "id\t\tlabel\n7\t좋다\t1\n"))
    assert t.columns == ["id", "column_2", "label"] and t.records[0][1]["column_2"] == "좋다"
