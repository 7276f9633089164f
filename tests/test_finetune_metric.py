"""Hand cases for the KorQuAD 1.0 metric: official normalisation, EM, character-level F1."""

from collections import Counter

import pytest

from kolectra.finetune.korquad_metric import char_f1, evaluate, exact_match, normalize_answer


def squad_token_f1(prediction: str, truth: str) -> float:
    """SQuAD v1.1's whitespace-token F1 (article removal left out: irrelevant to these cases)."""
    p, t = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((Counter(p) & Counter(t)).values())
    if same == 0:
        return 0.0
    return 2 * (same / len(p)) * (same / len(t)) / (same / len(p) + same / len(t))


def test_normalisation_symbols_case_punctuation_whitespace():
    assert normalize_answer("《훈민정음》") == "훈민정음"
    assert normalize_answer("〈님의 침묵〉") == "님의 침묵"
    assert normalize_answer("‘한강’") == "한강"
    assert normalize_answer("(주)삼성") == "주 삼성"  # brackets become spaces, not nothing
    assert normalize_answer("Seoul,  KOREA!") == "seoul korea"
    assert normalize_answer("  1,947미터.\n") == "1947미터"
    # English articles are kept (SQuAD would drop "the"); CJK full stop is not ASCII punctuation
    assert normalize_answer("The Beatles") == "the beatles"
    assert normalize_answer("한국。") == "한국。"


def test_exact_match_keeps_spaces_but_char_f1_ignores_them():
    assert exact_match("한나라당", "한나라당") == 1.0
    assert exact_match("《한나라당》", "한나라당") == 1.0
    assert exact_match("한나라 당", "한나라당") == 0.0
    assert char_f1("한나라 당", "한나라당") == pytest.approx(1.0)


def test_char_f1_gives_partial_credit_where_squad_token_f1_gives_none():
    # a particle glued to the noun: 4 shared chars, precision 4/5, recall 4/4
    assert char_f1("한나라당의", "한나라당") == pytest.approx(2 * 0.8 * 1.0 / 1.8)
    assert squad_token_f1("한나라당의", "한나라당") == 0.0
    assert exact_match("한나라당의", "한나라당") == 0.0
    # multiset overlap, not set overlap
    assert char_f1("가가나", "가나나") == pytest.approx(2 / 3)
    assert char_f1("세종대왕", "태조") == 0.0


def test_empty_and_punctuation_only_answers():
    assert char_f1("", "세종") == 0.0
    # both normalise to "": the official script calls it an exact match but F1 0
    assert exact_match("...", "!") == 1.0
    assert char_f1("...", "!") == 0.0


def test_evaluate_max_over_truths_average_and_missing():
    gold = {"q1": ["1443년", "세종 25년"], "q2": ["훈민정음"], "q3": ["광화문"]}
    preds = {"q1": "세종 25년", "q2": "훈민정음이"}  # q3 unanswered: scored 0, still counted
    out = evaluate(gold, preds)
    assert out["questions"] == 3 and out["unanswered"] == 1
    assert out["exact_match"] == pytest.approx(100 / 3)
    f1_q2 = 2 * (4 / 5) * 1.0 / (4 / 5 + 1.0)
    assert out["f1"] == pytest.approx(100 * (1.0 + f1_q2 + 0.0) / 3)


def test_evaluate_rejects_empty_gold():
    with pytest.raises(ValueError, match="needs at least one question"):
        evaluate({}, {})
    with pytest.raises(ValueError, match="q9"):
        evaluate({"q9": []}, {"q9": "x"})
