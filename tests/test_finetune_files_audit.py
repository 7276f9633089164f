"""classify, regress and ner on a researcher's own files: metrics against references written here from
first principles (not kolectra's), labels in decomposed Hangul, words the tokenizer drops, truncation. How
the files themselves are read (joined headers, CSV quoting, NER formats, tag spellings, entity-less splits) is
tests/test_finetune_files_formats.py's.

The references: CoNLL's ``conlleval`` chunk rules as its Perl states them (startOfChunk / endOfChunk,
IOB), macro-F1 from per-class counts, Pearson from its definition and Spearman as Pearson of
average ranks (ties share the mean rank). seqeval is not installed here, so it is not used. The
end-to-end run fine-tunes a tiny random ELECTRA (real tokenizer, real torch) on CoNLL files written
here and checks ``metrics.json`` against the reference over ``predictions.jsonl`` and the test file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import unicodedata
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.tiny_model import build_tiny_model_dir
from kolectra.finetune import config, ner
from kolectra.finetune.classify import Classify, classification_scores
from kolectra.finetune.config import OptimConfig
from kolectra.finetune.entities import entity_scores
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.ner import Ner, word_tags
from kolectra.finetune.regress import regression_scores
from tests.finetune_files_support import conll, sentence


# ---- references -------------------------------------------------------------------------------------
def conlleval_chunks(tags: list[str]) -> set[tuple[str, int, int]]:
    """conlleval's chunks of one sentence (IOB, prefix spelling): (type, start, end exclusive)."""
    chunks, prev_tag, prev_type, start = set(), "O", "", 0
    for i, t in enumerate([*tags, "O"]):
        tag, typ = ("O", "") if t == "O" else t.split("-", 1)
        end = prev_tag != "O" and (tag in ("B", "O") or prev_type != typ)
        begin = tag == "B" or (tag == "I" and (prev_tag == "O" or prev_type != typ))
        if end:
            chunks.add((prev_type, start, i))
        if begin:
            start = i
        prev_tag, prev_type = tag, typ
    return chunks


def reference_prf(gold: list[list[str]], predicted: list[list[str]]) -> tuple[int, int, int, float]:
    correct = n_gold = n_predicted = 0
    for g, p in zip(gold, predicted, strict=True):
        gc, pc = conlleval_chunks(g), conlleval_chunks(p)
        correct, n_gold, n_predicted = correct + len(gc & pc), n_gold + len(gc), n_predicted + len(pc)
    precision = correct / n_predicted if n_predicted else 0.0
    recall = correct / n_gold if n_gold else 0.0
    return correct, n_gold, n_predicted, 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def pearson(x: list[float], y: list[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return sxy / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))


def average_ranks(x: list[float]) -> list[float]:
    order, ranks, i = sorted(range(len(x)), key=lambda k: x[k]), [0.0] * len(x), 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


# ---- metrics against the references -------------------------------------------------------------------
def test_entity_scores_match_conlleval_on_random_bio_including_orphan_i_and_adjacent_entities():
    rng = random.Random(0)
    tags = ["O", "B-PS", "I-PS", "B-LC", "I-LC"]
    for _ in range(2000):
        gold = [[rng.choice(tags) for _ in range(rng.randint(1, 8))] for _ in range(rng.randint(1, 4))]
        predicted = [[rng.choice(tags) for _ in g] for g in gold]
        got = entity_scores(gold, predicted)
        correct, n_gold, n_predicted, f1 = reference_prf(gold, predicted)
        assert (got["correct_entities"], got["gold_entities"], got["predicted_entities"]) == (
            correct, n_gold, n_predicted), (gold, predicted)
        assert got["f1"] == pytest.approx(f1, abs=1e-12)
    # the named cases: an I- with no B-, two adjacent entities of one type, an entity ending the sentence
    assert conlleval_chunks(["I-PS", "I-PS", "O"]) == {("PS", 0, 2)}
    assert conlleval_chunks(["B-PS", "B-PS", "I-PS"]) == {("PS", 0, 1), ("PS", 1, 3)}
    assert entity_scores([["O", "B-PS", "B-PS", "I-PS"]], [["O", "B-PS", "I-PS", "I-PS"]])["correct_entities"] == 0
    assert entity_scores([["O", "I-LC"]], [["O", "B-LC"]])["f1"] == 1.0  # the same chunk, either spelling


def test_accuracy_and_macro_f1_match_per_class_counts():
    rng = random.Random(1)
    for _ in range(300):
        n, k = rng.randint(2, 30), rng.randint(2, 5)
        gold, predicted = np.array([rng.randrange(k) for _ in range(n)]), np.array([rng.randrange(k) for _ in range(n)])
        f1s = []
        for c in sorted(set(gold) | set(predicted)):  # classes in the gold or the predicted labels
            tp = int(((gold == c) & (predicted == c)).sum())
            fp, fn = int(((gold != c) & (predicted == c)).sum()), int(((gold == c) & (predicted != c)).sum())
            f1s.append(2 * tp / (2 * tp + fp + fn))
        got = classification_scores(gold, predicted)
        assert got["macro_f1"] == pytest.approx(sum(f1s) / len(f1s), abs=1e-12)
        assert got["accuracy"] == pytest.approx(float(np.mean(gold == predicted)), abs=1e-12)


def test_pearson_and_spearman_match_their_definitions_with_ties_and_constants():
    rng = random.Random(2)
    for _ in range(300):
        n = rng.randint(3, 20)
        gold = [rng.choice([0.0, 1.0, 2.0, 2.5, 3.0, 5.0]) for _ in range(n)]  # KorSTS-like: many ties
        predicted = [rng.choice([0.1, 0.1, 1.0, 2.0, 3.0]) for _ in range(n)]
        got = regression_scores(np.array(gold), np.array(predicted))
        if len(set(gold)) < 2 or len(set(predicted)) < 2:  # undefined: reported as 0
            assert got["pearson"] == got["spearman"] == 0.0
            continue
        assert got["pearson"] == pytest.approx(pearson(gold, predicted), abs=1e-9)
        assert got["spearman"] == pytest.approx(pearson(average_ranks(gold), average_ranks(predicted)), abs=1e-9)
    constant = regression_scores(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5, 0.5]))
    assert constant["pearson"] == constant["spearman"] == 0.0 and constant["mse"] == pytest.approx((0.25 + 2.25 + 6.25) / 3)


def test_predictions_equal_up_to_float32_rounding_correlate_as_a_constant():
    """A head that ignored its input gave 0.044367 for every row (predictions.jsonl), spread a few 1e-9 by
    each batch's padding; scipy's Pearson of that noise was the run's figure (test -0.16, dev 0.24)."""
    rng = np.random.default_rng(0)
    gold = np.array([0.0, 2.5, 5.0] * 10)
    noise = (np.float32(0.044367) + rng.normal(0, 1.2e-9, 30)).astype(np.float32).astype(np.float64)
    assert np.ptp(noise) > 0
    got = regression_scores(gold, noise)
    assert got["pearson"] == got["spearman"] == 0.0  # were the noise's correlation
    small = 2.0 + 1e-4 * gold  # a real spread, however small, is still read
    assert regression_scores(gold, small)["pearson"] == pytest.approx(1.0)


# ---- labels in decomposed Hangul ------------------------------------------------------------------------
def test_a_label_in_decomposed_hangul_is_the_class_of_its_composed_spelling(tmp_path):
    sports, nfd = "스포츠", unicodedata.normalize("NFD", "스포츠")
    assert nfd != sports
    rows = [("축구 경기", sports), ("야구 경기", nfd), ("주가 상승", "경제"), ("환율 하락", "경제")] * 3
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\n" + "".join(f"{t} {i}\t{lab}\n" for i, (t, lab) in enumerate(rows)), "utf-8")
    test = tmp_path / "test.tsv"
    test.write_text(f"text\tlabel\n농구 경기\t{nfd}\n금리 인상\t경제\n", "utf-8")
    cfg = dataclasses.replace(config.sample_classify(), dev_fraction=0.25)
    task = Classify()
    data = task.read(cfg, train, test)  # was: "test.tsv:2: label '스포츠' is not among the training labels (경제, 스포츠, 스포츠)"
    assert task.labels == ["경제", sports]  # was two classes printed alike
    assert data.facts["test_file"]["labels"] == {"경제": 1, sports: 1}
    other = tmp_path / "other.tsv"
    other.write_text("text\tlabel\n농구 경기\t기타\n", "utf-8")
    with pytest.raises(FinetuneError, match="label '기타' is not among the training labels"):
        Classify().read(cfg, train, other)


# ---- words without a sub-token ----------------------------------------------------------------------------
def test_a_dropped_word_inside_an_entity_continues_it_and_one_outside_is_outside():
    assert word_tags(["B-OG", None, "I-OG", "O"]) == ["B-OG", "I-OG", "I-OG", "O"]
    assert word_tags(["B-OG", None, None, "I-OG"]) == ["B-OG", "I-OG", "I-OG", "I-OG"]
    assert word_tags(["OG-B", None, "OG-I"]) == ["OG-B", "OG-I", "OG-I"]  # Naver's spelling
    assert word_tags(["B-OG", None, "B-OG"]) == ["B-OG", "O", "B-OG"]  # two entities: nothing continues
    assert word_tags(["B-PS", None, "I-OG"]) == ["B-PS", "O", "I-OG"]
    assert word_tags([None, "I-OG"]) == ["O", "I-OG"]
    assert word_tags(["B-PS", None, None]) == ["B-PS", "O", "O"]  # cut by max_length: O, still scored


def test_ner_scores_an_entity_with_a_zero_width_space_inside_as_one():
    """Ner.score on the sentence 삼성 \\u200b 전자 직원 (gold B-OG I-OG I-OG O), the model right on every
    word it sees: the entity is found. Before, the dropped word was O and split it in two wrong ones."""
    task = Ner()
    task.labels, task.gold_only = ["O", "B-OG", "I-OG"], []
    logits = np.full((6, 3), -5.0, np.float32)  # [CLS] 삼성 전자 직원 [SEP] + one spare row
    for position, tag in ((1, 1), (2, 2), (3, 0), (0, 0), (4, 0)):
        logits[position, tag] = 5.0
    split = SimpleNamespace(derived={}, rows={"tags": [[1, 2, 2, 0]]}, encoded={"word_starts": [[1, -1, 2, 3]]})
    scores, predictions = task.score(split, {"logits": [logits]}, None)
    assert predictions["predicted"] == [["B-OG", "I-OG", "I-OG", "O"]]
    assert scores["f1"] == 1.0  # was 0.0: ORG(0,1) and ORG(2,3) predicted, ORG(0,3) missed


# ---- a real fine-tune, reconciled with the reference -------------------------------------------------------
def test_ner_fine_tune_scores_every_word_and_its_figures_reconcile(tmp_path):
    model = build_tiny_model_dir(tmp_path / "model", [" ".join(t for t, _ in sentence(i)) for i in range(6)],
                                 seed=0, hidden=64, layers=2, heads=2, vocab_size=200, max_position=64)
    train = conll(tmp_path / "train.conll", [sentence(i) for i in range(80)], newline="\r\n", bom=True)
    dev = conll(tmp_path / "dev.conll", [sentence(i) for i in range(3, 13)])
    test_sentences = [sentence(i) for i in range(12)] + [
        [("삼성", "B-ORG"), ("\u200b", "I-ORG"), ("전자", "I-ORG"), ("직원", "O")],  # a word WordPiece drops
        [("김민수", "B-PER"), ("서울", "B-LOC"), ("부산", "B-LOC"), ("에서", "O")],  # adjacent entities
        [("왔다", "O")] * 40 + [("김민수", "B-PER")],  # an entity past max_length 32
        [("직원", "I-ORG"), ("전자", "I-ORG")],  # an I- with no B-
    ]
    test = conll(tmp_path / "test.conll", test_sentences)
    cfg = dataclasses.replace(config.sample_ner(), max_length=32, epochs=12,
                              optim=OptimConfig(lr=5e-3, warmup_fraction=0.1, layerwise_lr_decay=0.9))
    ner.run(cfg, model, train, test, tmp_path / "out", dev_file=dev)
    m = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    predictions = [json.loads(line) for line in (tmp_path / "out" / "predictions.jsonl").read_text("utf-8").splitlines()]
    gold = [[g for _, g in s] for s in test_sentences]
    assert [p["tags"] for p in predictions] == gold  # every word of every sentence, the cut ones too
    assert all(len(p["predicted"]) == len(p["tags"]) for p in predictions)
    correct, n_gold, n_predicted, f1 = reference_prf(gold, [p["predicted"] for p in predictions])
    assert (m["correct_entities"], m["gold_entities"], m["predicted_entities"]) == (correct, n_gold, n_predicted)
    assert m["f1"] == pytest.approx(f1, abs=1e-12) and n_gold == 12 * 2 + 1 + 3 + 1 + 1
    assert m["train_file"]["rows"] == 80 and m["train_file"]["bad_rows"] == 0  # CRLF and a BOM
    assert m["words_without_prediction"] == 11 + 1 and m["words_past_max_length"] == 11  # 30 of 41 fit
    cut = predictions[14]
    assert cut["predicted"][-1] == "O" and cut["tags"][-1] == "B-PER"  # scored as missed, not left out
    assert m["health"]["status"] == "ok" and m["f1"] >= 0.8, m
    # right on the words it sees, so the entity is whole (the dropped word was O: two wrong entities, one missed)
    assert predictions[12]["predicted"] == ["B-ORG", "I-ORG", "I-ORG", "O"]
