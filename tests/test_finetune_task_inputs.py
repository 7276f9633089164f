"""The file tasks without a model: readers, refused inputs (one line naming file and line), metrics, health.

Metrics are checked against figures worked out by hand (entity chunks with ``I-`` after ``O`` and
type switches, macro-F1 per class, Pearson from its definition); the readers against files written
here with the awkward bits real benchmark files have (stray quotes, ``NA``, CRLF, a quoted comma
and newline in CSV, nested JSON, a saved ``DatasetDict``, KLUE-style character tokens with spaces).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from kolectra.core.config import ConfigError, override
from kolectra.finetune import config
from kolectra.finetune.classify import Classify, classification_scores, label_order
from kolectra.finetune.entities import entities, entity_scores, split_tag
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.ner import Ner
from kolectra.finetune.readers.ner import read_sentences
from kolectra.finetune.readers.tables import read_table
from kolectra.finetune.regress import Regress, regression_scores


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


# ---- metrics ----------------------------------------------------------------------------------------
def test_entity_chunks_follow_conll_rules():
    assert entities(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
    assert entities(["O", "I-PER", "I-PER"]) == [("PER", 1, 3)]  # an I- after O starts an entity
    assert entities(["I-PER", "O"]) == [("PER", 0, 1)]  # so does one at the sentence start
    assert entities(["B-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 1), ("LOC", 1, 3)]  # a type switch too
    assert entities(["B-PER", "B-PER", "I-PER"]) == [("PER", 0, 1), ("PER", 1, 3)]  # B- always starts one
    assert entities(["PER-B", "PER-I", "O", "LOC_B"]) == [("PER", 0, 2), ("LOC", 3, 4)]  # suffix spellings
    assert entities(["O", "O"]) == [] and entities([]) == []
    assert split_tag("B-DT") == ("B", "DT") and split_tag("ORG_I") == ("I", "ORG") and split_tag("O") == ("O", "")
    for bad in ("E-PER", "PER", "B-", "-B", "S_LOC"):
        with pytest.raises(ValueError, match="is not a BIO tag"):
            split_tag(bad)


def test_entity_scores_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"], ["B-PER", "I-PER"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "I-ORG"], ["O", "I-PER"]]
    # gold: PER(0,2) LOC(3,4) | ORG(1,2) | PER(0,2); predicted: PER(0,1) LOC(3,4) | ORG(0,2) | PER(1,2)
    s = entity_scores(gold, pred)
    assert (s["correct_entities"], s["gold_entities"], s["predicted_entities"]) == (1, 4, 4)
    assert s["precision"] == s["recall"] == s["f1"] == pytest.approx(0.25)
    assert s["per_type"]["LOC"]["f1"] == 1.0 and s["per_type"]["PER"]["f1"] == 0.0
    assert s["per_type"]["PER"]["gold_entities"] == 2 and s["per_type"]["ORG"]["precision"] == 0.0
    perfect = entity_scores(gold, gold)
    assert perfect["f1"] == 1.0 and entity_scores([["O"]], [["O"]])["f1"] == 0.0  # nothing to find: 0, not NaN
    with pytest.raises(ValueError, match="2 gold tags but 1 predicted"):
        entity_scores([["O", "O"]], [["O"]])


def test_macro_f1_and_accuracy_by_hand():
    gold, pred = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 1, 1, 2, 0])
    # per class F1: 0 -> P 1/2 R 1/2 F 0.5; 1 -> P 2/3 R 1 F 0.8; 2 -> P 1 R 1/2 F 2/3
    s = classification_scores(gold, pred)
    assert s["accuracy"] == pytest.approx(4 / 6) and s["macro_f1"] == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    assert label_order(["10", "2", "1"]) == ["1", "2", "10"] and label_order(["neutral", "entailment"]) == [
        "entailment", "neutral"]


def test_pearson_and_spearman_by_hand():
    gold, pred = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 4.0, 9.0, 16.0])
    # deviations (-1.5, -0.5, 0.5, 1.5) and (-6.5, -3.5, 1.5, 8.5): covariance sum 25, squares 5 and 129
    s = regression_scores(gold, pred)
    assert s["pearson"] == pytest.approx(25 / np.sqrt(5 * 129)) and s["spearman"] == pytest.approx(1.0)
    assert regression_scores(gold, -pred)["spearman"] == pytest.approx(-1.0)
    assert s["mse"] == pytest.approx(np.mean((gold - pred) ** 2))
    flat = regression_scores(gold, np.full(4, 2.5))  # undefined for a constant: 0.0, never NaN
    assert flat["pearson"] == 0.0 and flat["spearman"] == 0.0


# ---- readers ----------------------------------------------------------------------------------------
def test_tsv_is_read_without_quoting_and_counts_bad_rows_by_line(tmp_path):
    p = write(tmp_path / "sts.tsv", 'score\tsentence1\tsentence2\r\n'
                                    '4.0\t"따옴표로 시작\t비교\r\n'
                                    '1.5\tNA\tnull\r\n'
                                    '2.0\t열이 하나 모자람\r\n'
                                    '3.0\t끝 따옴표"\t비교')
    t = read_table(p)
    assert t.columns == ["score", "sentence1", "sentence2"]
    assert [(n, r["sentence1"]) for n, r in t.records] == [(2, '"따옴표로 시작'), (3, "NA"), (5, '끝 따옴표"')]
    assert t.bad == [(4, "expected 3 tab-separated columns, got 2")]


def test_csv_quoting_and_start_lines_jsonl_dotted_names(tmp_path):
    p = write(tmp_path / "pairs.csv", 'a,b,label\n"쉼표, 포함","두 줄\n짜리",yes\n둘,셋,no\n')
    t = read_table(p)
    assert t.records == [(2, {"a": "쉼표, 포함", "b": "두 줄\n짜리", "label": "yes"}),
                         (4, {"a": "둘", "b": "셋", "label": "no"})]  # a row's number: the line it starts on
    j = write(tmp_path / "sts.jsonl", '{"s": "가", "labels": {"label": 3.2, "binary": 1}}\n\n[1, 2]\n{"s": "나"\n')
    t = read_table(j)
    assert t.columns == ["s", "labels.label", "labels.binary"] and t.records[0] == (
        1, {"s": "가", "labels.label": 3.2, "labels.binary": 1})
    assert [n for n, _ in t.bad] == [3, 4] and t.bad[0][1] == "expected a JSON object, got list"


def test_saved_datasets_class_labels_and_splits(tmp_path):
    import datasets

    names = ["IT과학", "경제"]
    ds = datasets.Dataset.from_dict({"title": ["새 휴대폰 출시", "주가 상승", "라벨 없음"], "label": [0, 1, -1]},
                                    features=datasets.Features({"title": datasets.Value("string"),
                                                                "label": datasets.ClassLabel(names=names)}))
    datasets.DatasetDict({"train": ds, "validation": ds}).save_to_disk(str(tmp_path / "ynat"))
    with pytest.raises(FinetuneError, match=r"ynat: holds several splits \(train, validation\); name one, e\.g\. "
                                            r".*ynat/train"):
        read_table(tmp_path / "ynat")
    t = read_table(tmp_path / "ynat" / "train")
    # class names, not codes; -1 (the Hub's "no label") is no name, which the task counts as a bad row
    assert t.unit == "row" and [r["label"] for _, r in t.records] == names + [-1]  # its code, said as such
    assert t.where(2) == f"{tmp_path / 'ynat' / 'train'} row 2"
    with pytest.raises(FinetuneError, match="cannot tell its format from the name; pass --set format=tsv"):
        read_table(write(tmp_path / "data.xlsx", "x"))


def test_ner_readers_lines_format_and_klue_style_characters(tmp_path):
    import datasets

    p = write(tmp_path / "naver.tsv", "김민수 씨는 서울에 갔다\tPER-B O LOC-B O\n그건 아니다 .\tO O O\n둘 셋\tO\n")
    t = read_sentences(p, max_bad_fraction=0.5)  # auto: several tags in one field -> a sentence a line
    assert [s["tags"] for _, s in t.records] == [["PER-B", "O", "LOC-B", "O"], ["O", "O", "O"]]
    assert t.bad == [(3, "2 words but 1 tags")]
    tags = ["B-PS", "I-PS", "O"]
    klue = datasets.Dataset.from_dict(
        {"tokens": [["이", "순", "신", " ", "장", "군"]], "ner_tags": [[0, 1, 1, 2, 2, 2]]},
        features=datasets.Features({"tokens": datasets.List(datasets.Value("string")),
                                    "ner_tags": datasets.List(datasets.ClassLabel(names=tags))}))
    klue.save_to_disk(str(tmp_path / "klue"))
    t = read_sentences(tmp_path / "klue")
    (n, s), = t.records
    assert n == 1 and s["tokens"] == ["이", "순", "신", "장", "군"] and s["tags"] == ["B-PS", "I-PS", "I-PS", "O", "O"]
    assert s["dropped"] == 1  # the space, a token of its own in KLUE-NER
    j = write(tmp_path / "ner.jsonl", json.dumps({"words": ["서울", "에"], "labels": ["B-LOC", "O"]}) + "\n")
    assert read_sentences(j, tokens_column="words", tags_column="labels").records[0][1]["tokens"] == ["서울", "에"]
    with pytest.raises(FinetuneError, match=r"no column 'tokens' \(tokens_column\); its columns are: words, labels"):
        read_sentences(j)


# ---- refused inputs ---------------------------------------------------------------------------------
def topics(tmp_path: Path, name: str, labels: list[str]) -> Path:
    return write(tmp_path / name, "id\ttext\tlabel\n" + "".join(f"{i}\t문장 {i}\t{y}\n" for i, y in enumerate(labels)))


def cls_cfg(**kw):
    return dataclasses.replace(config.sample_classify(), **kw)


def test_a_wrong_column_lists_the_columns_there_are(tmp_path):
    train = topics(tmp_path, "train.tsv", ["가", "나"] * 5)
    with pytest.raises(FinetuneError, match=r"train\.tsv: no column 'lable' \(label_column\); its columns are: "
                                            r"id, text, label$"):
        Classify().read(cls_cfg(label_column="lable"), train, topics(tmp_path, "test.tsv", ["가"]))


def test_a_label_outside_the_training_labels_names_label_file_and_line(tmp_path):
    train = topics(tmp_path, "train.tsv", ["스포츠", "경제", "날씨"] * 4)
    test = topics(tmp_path, "test.tsv", ["경제", "스포츠", "기타"])
    with pytest.raises(FinetuneError, match=r"test\.tsv:4: label '기타' is not among the training labels "
                                            r"\(경제, 날씨, 스포츠\)"):
        Classify().read(cls_cfg(), train, test)
    dev = topics(tmp_path, "dev.tsv", ["연예"])
    with pytest.raises(FinetuneError, match=r"dev\.tsv:2: label '연예' is not among the training labels"):
        Classify(dev).read(cls_cfg(), train, topics(tmp_path, "ok.tsv", ["경제"]))
    with pytest.raises(FinetuneError, match=r"every training row has the label '경제'"):
        Classify().read(cls_cfg(), topics(tmp_path, "one.tsv", ["경제"] * 6), test)
    with pytest.raises(FinetuneError, match=r"--dev .*test\.tsv is the test file .*overstate the score"):
        Classify(test).read(cls_cfg(), train, test)


def test_unreadable_rows_are_counted_then_refused_above_the_limit(tmp_path):
    sts = write(tmp_path / "sts.tsv", "s1\ts2\tscore\n가\t나\t1.5\n다\t라\t높음\n마\t바\t4\n사\t아\tnan\n")
    cfg = dataclasses.replace(config.sample_regress(), text_column="s1", text_pair_column="s2", label_column="score")
    with pytest.raises(FinetuneError, match=r"sts\.tsv: 2 of 4 rows are malformed \(limit max_bad_fraction=0\.001; to go on with the 2 "
                                            r"good ones, raise it with --set max_bad_fraction=0\.5\): "
                                            r"line 3: score must be a number, got '높음'; line 5: score must be finite"):
        Regress().read(cfg, sts, write(tmp_path / "t.tsv", "s1\ts2\tscore\n가\t나\t1\n"))
    data = Regress().read(dataclasses.replace(cfg, max_bad_fraction=0.5, dev_fraction=0.5), sts,
                          write(tmp_path / "t.tsv", "s1\ts2\tscore\n가\t나\t1\n"))
    facts = data.facts["train_file"]
    assert facts["rows"] == 2 and facts["bad_rows"] == 2 and facts["bad_lines"][0] == {
        "line": 3, "reason": "score must be a number, got '높음'"}


def test_a_conll_line_without_a_tag_and_a_tag_unseen_in_training(tmp_path):
    good = "김민수\tB-PER\n씨\tO\n\n서울\tB-LOC\n에\tO\n\n"
    bad = write(tmp_path / "train.conll", good + "부산\tB-LOC\n에서\n왔다\tO\n")
    with pytest.raises(FinetuneError, match=r"train\.conll: 1 of 3 sentences are malformed .*: line 8: no tag "
                                            r"\(expected token<TAB>tag\)"):
        read_sentences(bad)
    t = read_sentences(bad, max_bad_fraction=0.5)
    assert len(t.records) == 2 and t.stats()["bad_lines"] == [{"line": 8, "reason": "no tag (expected token<TAB>tag)"}]
    with pytest.raises(FinetuneError, match=r"x\.conll: 1 of 1 sentences are malformed .*line 2: tag 'B_' is not"):
        read_sentences(write(tmp_path / "x.conll", "가\tO\n나\tB_\n"))
    train = write(tmp_path / "ok.conll", good * 3)
    test = write(tmp_path / "test.conll", "오늘\tB-DAT\n\n서울\tB-LOC\n어제\tB-DAT\n")
    cfg = config.sample_ner()
    with pytest.raises(FinetuneError, match=r"test\.conll:1: tag 'B-DAT' is not among the training tags "
                                            r"\(O, B-LOC, B-PER\)"):
        Ner().read(cfg, train, test)


def test_settings_of_the_file_tasks_name_their_key():
    for cls, sets, key in ((config.ClassifyConfig, ["select_on=f1"], "select_on"),
                           (config.RegressConfig, ["select_on=accuracy"], "select_on"),
                           (config.NerConfig, ["format=csv"], "format"),
                           (config.ClassifyConfig, ["text_column="], "text_column")):
        with pytest.raises(ConfigError, match=rf"^{key}: must be"):
            override(cls(), sets)  # checks the result (cfg.validate())


# ---- health -----------------------------------------------------------------------------------------
def fitted(labels, predictions: dict, scores: dict):
    split = SimpleNamespace(feats=SimpleNamespace(per_row={"labels": np.asarray(labels)}), rows=[None] * len(labels))
    return {"dev": split}, SimpleNamespace(dev=SimpleNamespace(predictions=predictions, scores=scores))


def test_health_says_when_a_run_learned_nothing():
    task = Regress()
    splits, fit = fitted([0.5, 4.0, 2.0, 3.5], {"predicted": np.array([2.5, 2.5001, 2.5, 2.4999])},
                         {"spearman": 0.4, "pearson": 0.3})
    problems, figures = task.health(splits, fit)
    assert problems[0].startswith("the model gives all 4 dev rows nearly the same score (2.5,")
    assert problems[0].endswith("mean 2.5): its score does not depend on the input; it learned nothing")
    assert figures["dev_prediction_std"] < 1e-3
    splits, fit = fitted([0.5, 4.0], {"predicted": np.array([3.0, 1.0])}, {"spearman": -1.0, "pearson": -1.0})
    assert "do not rise with the gold ones" in task.health(splits, fit)[0][0]
    classify = Classify()
    classify.labels = ["경제", "날씨", "스포츠"]
    splits, fit = fitted([0, 1, 2, 2], {"predicted": np.array([2, 2, 2, 2])}, {})
    problems, figures = classify.health(splits, fit)
    assert problems[0].startswith("the model predicts class '스포츠' for all 4 dev rows")
    assert figures["dev_majority_label"] == "스포츠"
    entities_none = {"gold_entities": 5, "predicted_entities": 0, "correct_entities": 0}
    splits, fit = fitted([0, 0], {"entities": entities_none}, {})
    assert Ner().health(splits, fit)[0] == ["the model predicts no entity in the 2 dev sentences (O for every token; "
                                            "they hold 5): it learned nothing"]
    splits, fit = fitted([0, 0], {"entities": {**entities_none, "predicted_entities": 3}}, {})
    assert "none of the 3 entities predicted" in Ner().health(splits, fit)[0][0]


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
