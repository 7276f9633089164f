"""KorQuAD 1.0 (SQuAD v1.1 format) reading, by-article splitting, windowing and span decoding.

Feeds ``finetune.korquad`` (last stage of the chain).  Pure functions:

* :func:`read_squad` checks the document shape and every ``answer_start`` (the answer text must
  sit at that character offset of the context); mismatches are counted, and such questions are
  still evaluated against their answer texts but never used as training targets.
* :func:`split_by_article` makes a deterministic, seeded train/dev split of one file by article,
  so no context is shared between the two sides (the KorQuAD train set is not always at hand).
* :func:`make_windows` tokenizes question + context with the fast tokenizer's overflow windows
  (``return_overflowing_tokens``, ``stride``, ``return_offsets_mapping``); ``doc_stride`` keeps
  BERT's meaning, the step between window starts, so the tokenizer's ``stride`` (the overlap)
  is the window's context length minus ``doc_stride``.
* :func:`decode` takes the n-best start and end logits of every window, keeps spans inside the
  context with ``start <= end`` and at most ``max_answer_length`` tokens, and maps the best one
  back to a slice of the original context through the offset mapping.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np

from finetune.runtime import FinetuneError


@dataclasses.dataclass(frozen=True)
class Question:
    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]  # (text, answer_start)
    title: str = ""

    @property
    def answer_texts(self) -> list[str]:
        return [a for a, _ in self.answers]

    def span_ok(self, k: int = 0) -> bool:
        text, start = self.answers[k]
        return 0 <= start and self.context[start:start + len(text)] == text


def load_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise FinetuneError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except OSError as e:
        raise FinetuneError(f"{path}: cannot read ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise FinetuneError(f"{path}: expected a SQuAD-format object with a 'data' list")
    return doc


def questions_of(doc: dict, source: str = "<data>") -> tuple[list[Question], dict]:
    """Flatten articles -> questions; returns them with counts of what was checked."""
    out: list[Question] = []
    seen: set[str] = set()
    bad_starts = 0
    for a_i, article in enumerate(doc["data"]):
        for p_i, para in enumerate(article.get("paragraphs", [])):
            context = para.get("context")
            if not isinstance(context, str):
                raise FinetuneError(f"{source}: data[{a_i}].paragraphs[{p_i}] has no context string")
            for qa in para.get("qas", []):
                where = f"{source}: question {qa.get('id')!r} (data[{a_i}].paragraphs[{p_i}])"
                if not isinstance(qa.get("id"), str) or not isinstance(qa.get("question"), str):
                    raise FinetuneError(f"{where}: needs string 'id' and 'question'")
                if qa["id"] in seen:
                    raise FinetuneError(f"{where}: duplicate question id")
                seen.add(qa["id"])
                answers = qa.get("answers") or []
                try:
                    pairs = tuple((str(x["text"]), int(x["answer_start"])) for x in answers)
                except (KeyError, TypeError, ValueError):
                    raise FinetuneError(f"{where}: answers need 'text' and integer 'answer_start'") from None
                if not pairs:
                    raise FinetuneError(f"{where}: no answers (KorQuAD 1.0 has no unanswerable questions)")
                q = Question(qa["id"], qa["question"], context, pairs, str(article.get("title", "")))
                bad_starts += sum(1 for k in range(len(pairs)) if not q.span_ok(k))
                out.append(q)
    stats = {"articles": len(doc["data"]), "questions": len(out), "bad_answer_starts": bad_starts}
    return out, stats


def read_squad(path: Path) -> tuple[list[Question], dict]:
    return questions_of(load_json(Path(path)), str(path))


def split_by_article(path: Path, dev_fraction: float, seed: int) -> tuple[dict, dict]:
    """Two SQuAD-format documents (train, dev) from one file, split by whole articles.

    The article order is shuffled with ``random.Random(seed)``; the first
    ``round(dev_fraction * n)`` (at least 1) become dev.  Both sides keep the file's order.
    """
    doc = load_json(Path(path))
    n = len(doc["data"])
    if n < 2 or not 0.0 < dev_fraction < 1.0:
        raise FinetuneError(f"{path}: cannot split {n} articles with dev_fraction={dev_fraction}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_dev = min(n - 1, max(1, int(round(dev_fraction * n))))
    dev_ids = set(order[:n_dev])
    version = doc.get("version", "")
    train = {"version": version, "data": [a for i, a in enumerate(doc["data"]) if i not in dev_ids]}
    dev = {"version": version, "data": [a for i, a in enumerate(doc["data"]) if i in dev_ids]}
    return train, dev


@dataclasses.dataclass
class Windows:
    """Every window of every question; row r belongs to question ``question_index[r]``."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    offsets: list[list[tuple[int, int] | None]]  # context char span per token, None off-context
    question_index: list[int]
    start_positions: list[int]  # gold token positions (0 = [CLS]: answer not in this window)
    end_positions: list[int]


def truncate_question(tokenizer, question: str, max_query_length: int) -> str:
    """Cut the question text after its ``max_query_length``-th token (BERT's max_query_length)."""
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= max_query_length:
        return question
    return question[:enc["offset_mapping"][max_query_length - 1][1]]


def make_windows(tokenizer, questions: list[Question], max_length: int, doc_stride: int,
                 max_query_length: int) -> Windows:
    w = Windows([], [], [], [], [], [])
    for qi, q in enumerate(questions):
        question = truncate_question(tokenizer, q.question, max_query_length)
        q_len = len(tokenizer(question, add_special_tokens=False)["input_ids"])
        room = max_length - q_len - 3  # [CLS] q [SEP] c [SEP]
        if room < 1:
            raise FinetuneError(f"max_length={max_length} leaves no room for context after "
                                f"question {q.id!r} ({q_len} tokens)")
        overlap = max(0, room - doc_stride)
        enc = tokenizer(question, q.context, truncation="only_second", max_length=max_length,
                        stride=overlap, return_overflowing_tokens=True, return_offsets_mapping=True,
                        return_token_type_ids=True)
        text, a_start = q.answers[0]
        a_end = a_start + len(text)  # exclusive char end
        trainable = q.span_ok(0) and len(text) > 0
        for k in range(len(enc["input_ids"])):
            seq_ids = enc.sequence_ids(k)
            offs = [tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][k], seq_ids)]
            start_tok = end_tok = 0
            if trainable:
                ctx = [i for i, o in enumerate(offs) if o is not None]
                if ctx and offs[ctx[0]][0] <= a_start and offs[ctx[-1]][1] >= a_end:
                    start_tok = next(i for i in ctx if offs[i][1] > a_start)
                    end_tok = next(i for i in reversed(ctx) if offs[i][0] < a_end)
            w.input_ids.append(enc["input_ids"][k])
            w.token_type_ids.append(enc["token_type_ids"][k])
            w.offsets.append(offs)
            w.question_index.append(qi)
            w.start_positions.append(start_tok)
            w.end_positions.append(end_tok)
    return w


def decode(questions: list[Question], windows: Windows, start_logits: list[np.ndarray],
           end_logits: list[np.ndarray], n_best: int, max_answer_length: int) -> dict[str, str]:
    """Best span per question over all its windows -> {question_id: context substring}."""
    best: dict[int, tuple[float, str]] = {}
    for r, qi in enumerate(windows.question_index):
        offs = windows.offsets[r]
        s_log, e_log = start_logits[r], end_logits[r]
        n = len(offs)
        s_top = [i for i in np.argsort(-s_log[:n], kind="stable")[:n_best] if offs[i] is not None]
        e_top = [i for i in np.argsort(-e_log[:n], kind="stable")[:n_best] if offs[i] is not None]
        context = questions[qi].context
        for s in s_top:
            for e in e_top:
                if e < s or e - s + 1 > max_answer_length:
                    continue
                score = float(s_log[s]) + float(e_log[e])
                if qi not in best or score > best[qi][0]:
                    best[qi] = (score, context[offs[s][0]:offs[e][1]])
    return {q.id: best[qi][1] if qi in best else "" for qi, q in enumerate(questions)}
