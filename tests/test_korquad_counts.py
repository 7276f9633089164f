"""What KorQuAD's metrics.json and manifest store (h7): ``exact_match`` and ``f1`` at the 4 decimals NSMC's
``accuracy_pct`` has (finetune/report.py PERCENT_DECIMALS; 1 of 3 questions right had been 33.333333333333336),
a --seeds summary of them too; and the training file's counts reconciled with the remapping of starts counted in
another Unicode form (readers/korquad_forms.placed): ``answer_starts_remapped`` and
``bad_answer_starts_after_remapping`` beside ``bad_answer_starts``, which stays the file's count as written (h13: 364bb31
had made it the count after remapping, where ``dev_file``'s and korquad 11's are the file's)."""

from __future__ import annotations

import json

import numpy as np

from kolectra.finetune import korquad, seeds
from kolectra.finetune.config import sample_korquad
from kolectra.finetune.korquad_metric import evaluate
from kolectra.finetune.skeleton import Data, Fit, Scored
from tests.test_korquad_start_forms import document, form


class _Feats:
    """A split's windows as Korquad.metrics reads them: their count and each one's start target."""

    def __init__(self, starts):
        self.per_row = {"start_positions": np.array(starts)}

    def __len__(self):
        return len(self.per_row["start_positions"])


def test_exact_match_and_f1_are_stored_without_binary_noise():
    scores = evaluate({"a": ["평양"], "b": ["서울"], "c": ["목요일"]}, {"a": "평양", "b": "부산", "c": "월요일"})
    assert scores["exact_match"] == 33.333333333333336  # as evaluate gives it, kept for the health checks
    nbest = {q: [{"text": t}] for q, t in {"a": "평양", "b": "부산", "c": "월요일"}.items()}
    fit = Fit(final=Scored(scores, nbest, 0.0))
    splits = {"train": type("S", (), {"feats": _Feats([3, 0])})(), "dev": type("S", (), {"feats": _Feats([0] * 3)})()}
    metrics = korquad.Korquad().metrics(Data([0, 0], [0] * 3, None, {}), splits, fit)
    assert (metrics["exact_match"], metrics["f1"]) == (33.3333, 55.5556), metrics
    assert json.dumps(metrics["exact_match"]) == "33.3333"
    assert {k for k in korquad.Korquad.stats if k in metrics} >= {"exact_match", "f1"}  # the manifest's, the same
    assert korquad.Korquad().epoch_record(scores) == {"dev_exact_match": 33.3333, "dev_f1": 55.5556}  # as before


def test_a_seeds_summary_of_exact_match_and_f1_is_rounded_as_a_run_is():
    runs = {1: {"exact_match": 81.2, "f1": 90.1}, 2: {"exact_match": 82.53, "f1": 90.3}}
    summary = seeds.summarize("korquad", runs)
    assert summary["exact_match"]["spread"] == 1.33 and summary["f1"]["spread"] == 0.2, summary
    assert summary["exact_match"]["per_seed"] == {"1": 81.2, "2": 82.53}
    ner = seeds.summarize("ner", {1: {"f1": 0.812, "precision": 0.8, "recall": 0.8},
                                  2: {"f1": 0.82531234, "precision": 0.8, "recall": 0.8}})
    assert ner["f1"]["max"] == 0.82531234  # a fraction keeps its digits


def _read(tmp_path, doc: dict):
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    train.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    dev.write_text(json.dumps(document("NFC", "NFC", "NFC"), ensure_ascii=False), encoding="utf-8")
    return korquad.Korquad().read(sample_korquad(), train, dev).facts


def test_starts_remapped_are_counted_apart_from_the_bad_ones_left_out(tmp_path):
    """An NFD context whose answers' starts count its NFC text (3 of 4 miss it as written: bad_answer_starts 3, all
    4 trained at the answers their starts name), and a fifth question whose start is off by a few, left out:
    4 starts miss as written (bad_answer_starts, the file's count, as dev_file's and korquad 11's), 4 are remapped,
    1 still misses after that."""
    doc = document("NFD", "NFD", "NFC")
    context = doc["data"][0]["paragraphs"][0]["context"]
    at = context.index(form("NFD", "서울"))
    doc["data"][0]["paragraphs"][0]["qas"].append({"id": "off", "question": "어디로?",
                                                   "answers": [{"text": form("NFD", "서울"), "answer_start": at + 3}]})
    facts = _read(tmp_path, doc)
    assert facts["train_file"]["bad_answer_starts"] == 4, facts["train_file"]  # the file's, as written
    assert facts["train_file"]["bad_answer_starts_after_remapping"] == 1
    assert facts["train_file"]["answer_starts_remapped"] == 4
    assert facts["train_questions_left_out"] == 1 and facts["train_questions_left_out_by_reason"] == {"near": 1}
    trained = 5 - facts["train_questions_left_out"]
    assert facts["train_file"]["questions"] == 5 == trained + sum(facts["train_questions_left_out_by_reason"].values())
    assert "answer_starts_remapped" not in facts["dev_file"]  # scored on its texts: its count is the file's


def test_a_file_whose_answers_sit_at_their_starts_counts_as_it_did(tmp_path):
    facts = _read(tmp_path, document("NFC", "NFC", "NFC"))
    assert facts["train_file"]["bad_answer_starts"] == 0 and facts["train_file"]["answer_starts_remapped"] == 0
    assert facts["train_file"]["bad_answer_starts_after_remapping"] == 0
    assert facts["train_questions_left_out"] == 0 and facts["train_questions_left_out_by_reason"] == {}


def test_bad_answer_starts_is_the_files_count_as_written_for_train_and_dev_alike(tmp_path):
    """The same file read as the training and as the scored file has one ``bad_answer_starts`` (the reader's: the
    answers whose ``answer_start`` misses as written), as korquad 11 stored it; 364bb31 had made the training
    file's the count after remapping (0 here, where the dev file's said 3 of the same file)."""
    from kolectra.finetune.readers.korquad import read_squad

    doc = document("NFD", "NFD", "NFC")
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    for path in (train, dev):
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    facts = korquad.Korquad().read(sample_korquad(), train, dev).facts
    as_read = read_squad(train)[1]["bad_answer_starts"]
    assert as_read == 3 == facts["train_file"]["bad_answer_starts"] == facts["dev_file"]["bad_answer_starts"], facts
    assert facts["train_file"]["bad_answer_starts_after_remapping"] == 0 == facts["train_questions_left_out"]
