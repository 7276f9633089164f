"""KorQuAD 1.0 exact match and character-level F1, with the official v1.0 script's semantics.

Last step of the chain: ``finetune.korquad`` scores its ``predictions.json`` with :func:`evaluate`.
Written for kolectra from the published behaviour of the KorQuAD v1.0 evaluation script (itself
derived from SQuAD v1.1's), which differs from SQuAD in three ways that matter for Korean:

* normalisation replaces the quote/bracket symbols ``' " 《 》 < > 〈 〉 ( ) ‘ ’`` by spaces, then
  lowercases, then deletes ASCII punctuation (``string.punctuation``), then collapses whitespace to
  single spaces.  No English-article removal (SQuAD removes a/an/the; KorQuAD does not).
* exact match compares the normalised strings, spaces included ("한나라 당" != "한나라당").
* F1 is over the multiset of *characters* of the normalised answer with spaces dropped, not over
  whitespace tokens: a particle glued to a noun ("한나라당의" vs "한나라당") earns partial credit,
  where SQuAD's token F1 gives 0.  No overlap (including both sides empty) scores 0.

kolectra adds one step, first: both sides are NFC (composed Hangul). The official files are NFC, where
this changes nothing; on decomposed text (NFD, as files saved on macOS may hold) the script counted
jamo, not syllables ("한나라당의" against "한나라당" 90.9, not 88.9), and a prediction, a slice of an NFD
context, scored 0 against its NFC answer text whatever it was.

Per question the score is the maximum over its ground truths; a question with no prediction
scores 0 but still counts; the averages are reported times 100.
"""

from __future__ import annotations

import string
import unicodedata
from collections import Counter
from typing import Iterable, Mapping

from kolectra.core.errors import UserInputError

# Symbols the official script turns into spaces before anything else (Korean/CJK quotes and
# brackets that ``string.punctuation`` does not contain, plus a few ASCII ones it does).
_TO_SPACE = "'\"《》<>〈〉()‘’"
_SPACE_TABLE = str.maketrans({c: " " for c in _TO_SPACE})
_ASCII_PUNCT = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """NFC, symbols -> space, lowercase, drop ASCII punctuation, collapse whitespace (in that order)."""
    text = unicodedata.normalize("NFC", text).translate(_SPACE_TABLE).lower()
    text = "".join(ch for ch in text if ch not in _ASCII_PUNCT)
    return " ".join(text.split())


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def char_f1(prediction: str, truth: str) -> float:
    """Harmonic mean of character precision and recall over the normalised, space-free answers."""
    pred_chars = list(normalize_answer(prediction).replace(" ", ""))
    truth_chars = list(normalize_answer(truth).replace(" ", ""))
    same = sum((Counter(pred_chars) & Counter(truth_chars)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred_chars)
    recall = same / len(truth_chars)
    return 2 * precision * recall / (precision + recall)


def best_over_truths(metric, prediction: str, truths: Iterable[str]) -> float:
    return max(metric(prediction, t) for t in truths)


def evaluate(gold: Mapping[str, list[str]], predictions: Mapping[str, str]) -> dict:
    """``gold`` maps question id -> answer texts.  Returns percentages and counts."""
    if not gold:
        raise UserInputError("KorQuAD evaluation needs at least one question")
    em = f1 = 0.0
    missing = 0
    for qid, truths in gold.items():
        if not truths:
            raise UserInputError(f"question {qid!r} has no ground-truth answers")
        if qid not in predictions:
            missing += 1  # the official script scores it 0 and keeps it in the denominator
            continue
        em += best_over_truths(exact_match, predictions[qid], truths)
        f1 += best_over_truths(char_f1, predictions[qid], truths)
    n = len(gold)
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n, "questions": n,
            "unanswered": missing}


CHANCE_SPANS = 8  # spans a question in :func:`chance_f1`


def chance_f1(questions: Iterable) -> float:
    """The F1 (percent) of answering without reading the question: for each question, spans of its
    first answer's length at :data:`CHANCE_SPANS` evenly spaced places in its context, each scored
    against its answers and averaged. Character-level F1 rewards common syllables, so this is well
    above 0 (about 4 on the embedded sample); a fine-tuned model that scores near it learned nothing
    (``Korquad.health``). Deterministic: no sampling."""
    total, n = 0.0, 0
    for q in questions:
        length, context = len(q.answers[0][0]), q.context
        last = max(len(context) - length, 0)
        starts = sorted({round(k * last / max(CHANCE_SPANS - 1, 1)) for k in range(CHANCE_SPANS)})
        total += sum(best_over_truths(char_f1, context[s:s + length], q.answer_texts) for s in starts) / len(starts)
        n += 1
    return 100.0 * total / n if n else 0.0
