"""The file tasks without a model: readers, refused inputs (one line naming file and line), metrics, health.

Metrics are checked against figures worked out by hand (entity chunks with ``I-`` after ``O`` and
type switches, macro-F1 per class, Pearson from its definition); the readers against files written
here with the awkward bits real benchmark files have (stray quotes, ``NA``, CRLF, a quoted comma
and newline in CSV, nested JSON, a saved ``DatasetDict``, KLUE-style character tokens with spaces). The inputs
found by trying awkward files, each of which failed before its fix, are tests/test_finetune_task_inputs_awkward.py's.
"""

from __future__ import annotations

import dataclasses
import json

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
from tests.finetune_task_inputs_support import cls_cfg, fitted, topics, write


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
