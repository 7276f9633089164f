"""KorQuAD span decoding: from the windows' start and end logits to each question's n-best answers.

The last step of :mod:`finetune.readers.korquad` (which re-exports each name here), after the
questions are read (:mod:`.korquad_questions`) and windowed (:mod:`.korquad_windows`):

* :func:`nbest_spans` takes the n-best start and end logits of every window, keeps spans inside
  the context with ``start <= end``, at most ``max_answer_length`` tokens and a max-context
  start, and maps them back to slices of the original context through the offset mapping
  (whitespace at a slice's edges left out: a SentencePiece token's span holds the space before it);
  :func:`decode` keeps the best one per question. :class:`NBest` holds its answer as numbers.
* :class:`SpanIndex` holds what decoding reads of the windows (character offsets and max-context marks),
  read in place from the tokenised split's Arrow columns.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from kolectra.finetune.features import TokenColumn
from kolectra.finetune.readers.korquad_questions import Question
from kolectra.finetune.readers.korquad_windows import Windows


class NBest(Mapping):
    """:func:`nbest_spans`' answer: per question id, its n-best spans as dicts (``text``, ``score``,
    ``start_logit``, ``end_logit``, ``start_char``, ``probability``), made when asked. Held as six numbers
    a span (one array a question) beside the questions, whose contexts give the texts: the dicts, kept
    for ``nbest_predictions.json`` for the whole run, were about 10 KiB a question at ``n_best=20``
    (docs/finetune.md, "Memory and large task files")."""

    def __init__(self, questions: list[Question]):
        self._questions = questions
        self._index: dict[str, int] = {}
        self._spans: list[np.ndarray] = []  # [k, 6]: score, start_logit, end_logit, probability, start, end char

    def add(self, qi: int, spans: list[dict]) -> None:
        """Question ``qi``'s spans (each question's in turn, from the first)."""
        self._spans.append(np.array([(k["score"], k["start_logit"], k["end_logit"], k["probability"], k["start_char"],
                                      k["start_char"] + len(k["text"])) for k in spans], dtype=np.float64))
        self._index[self._questions[qi].id] = qi

    def __getitem__(self, qid: str) -> list[dict]:
        qi = self._index[qid]
        context = self._questions[qi].context
        return [{"text": context[int(start):int(end)] if start >= 0 else "", "score": score, "start_logit": sl,
                 "end_logit": el, "start_char": int(start), "probability": p}
                for score, sl, el, p, start, end in self._spans[qi].tolist()]

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def nbest_spans(questions: list[Question], windows: "Windows | SpanIndex", start_logits: list[np.ndarray],
                end_logits: list[np.ndarray], n_best: int, max_answer_length: int) -> NBest:
    """Per question id, up to ``n_best`` distinct answer texts, best first (BERT's n-best list).

    Candidates: the top ``n_best`` start and end tokens of every window, inside the context,
    ``start <= end``, at most ``max_answer_length`` tokens, starting at a token whose max-context
    window this is.  The text is the context's slice from the start token's first character to the
    end token's last, whitespace at either edge left out (a span of whitespace alone is no
    candidate).  Score = start logit + end logit; equal texts from several windows keep the
    best; ``probability`` is a softmax over the kept scores.  No valid span -> one empty answer.
    A question's candidates are gathered and cut to its n-best before the next question's, and kept as
    numbers (:class:`NBest`).
    """
    spans = SpanIndex.of(windows)
    order = np.argsort(spans.question_index, kind="stable")  # each question's windows, in row order
    cuts = np.searchsorted(spans.question_index[order], np.arange(len(questions) + 1)).tolist()
    out = NBest(questions)
    for qi, q in enumerate(questions):
        cands: list[tuple[float, int, int, int, float, float]] = []
        for r in order[cuts[qi]:cuts[qi + 1]].tolist():
            starts, maxc = spans.start.row(r), spans.max_context.row(r)  # start -1: not a context token
            s_log, e_log = start_logits[r], end_logits[r]
            n = len(starts)
            s_top = [i for i in np.argsort(-s_log[:n], kind="stable")[:n_best] if starts[i] >= 0 and maxc[i]]
            e_top = [i for i in np.argsort(-e_log[:n], kind="stable")[:n_best] if starts[i] >= 0]
            for s in s_top:
                for e in e_top:
                    if e < s or e - s + 1 > max_answer_length:
                        continue
                    sl, el = float(s_log[s]), float(e_log[e])
                    cands.append((sl + el, r, int(s), int(e), sl, el))
        kept: list[dict] = []
        seen: set[str] = set()
        # best score first; ties keep discovery order (window, start, end) for determinism
        for score, r, s, e, sl, el in sorted(cands, key=lambda c: (-c[0], c[1], c[2], c[3])):
            first = int(spans.start.row(r)[s])
            text = q.context[first:int(spans.end.row(r)[e])]
            # whitespace at the edges is no part of an answer: a SentencePiece (Metaspace) token's span
            # takes in the space before it ("▁임수경": " 임수경"), a lone "▁" is only a space
            start_char = first + len(text) - len(text.lstrip())
            text = text.strip()
            if not text or text in seen:
                continue
            seen.add(text)
            kept.append({"text": text, "score": score, "start_logit": sl, "end_logit": el,
                         "start_char": start_char})
            if len(kept) == n_best:
                break
        if not kept:
            kept = [{"text": "", "score": 0.0, "start_logit": 0.0, "end_logit": 0.0, "start_char": -1}]
        top = kept[0]["score"]
        weights = [float(np.exp(k["score"] - top)) for k in kept]
        for k, wgt in zip(kept, weights):
            k["probability"] = wgt / sum(weights)
        out.add(qi, kept)
    return out


def decode(questions: list[Question], windows: Windows, start_logits: list[np.ndarray],
           end_logits: list[np.ndarray], n_best: int, max_answer_length: int) -> dict[str, str]:
    """Best span per question over all its windows -> {question_id: context substring}."""
    nbest = nbest_spans(questions, windows, start_logits, end_logits, n_best, max_answer_length)
    return {qid: spans[0]["text"] for qid, spans in nbest.items()}


def rounded_nbest(nbest: dict[str, list[dict]], digits: int = 4) -> dict[str, list[dict]]:
    """The n-best lists with floats rounded, as written to ``nbest_predictions.json``."""
    return {qid: [{k: round(v, digits) if isinstance(v, float) else v for k, v in span.items()}
                  for span in spans] for qid, spans in nbest.items()}


@dataclasses.dataclass
class SpanIndex:
    """What :func:`nbest_spans` reads of the windows: per window its tokens' first context character and end
    (-1 off the context) and max-context marks, read in place from the tokenised split's Arrow columns
    (:class:`finetune.features.TokenColumn`: memory-mapped from the cache file, when there is one), with a
    bool a token copied. Flat int64 copies of the offsets held 17 bytes a token, and the windows as
    :class:`Windows` (a list, a tuple and Python ints a token: about 160 bytes a token) 250 MB for a file
    the size of KorQuAD's dev set, for the whole run (docs/finetune.md, "Memory and large task files")."""

    question_index: np.ndarray  # [windows]
    start: TokenColumn  # .row(r): window r's tokens' first context character; -1 off-context
    end: TokenColumn  # their ends (exclusive); -1 off-context
    max_context: TokenColumn  # bool (see mark_max_context)

    @classmethod
    def of(cls, w: "Windows | SpanIndex") -> "SpanIndex":
        """From :class:`Windows` (a window without ``max_context`` marks: each context token its own)."""
        if isinstance(w, SpanIndex):
            return w
        import pyarrow as pa  # noqa: PLC0415

        maxc = [w.max_context[r] if r < len(w.max_context) else [o is not None for o in offs]
                for r, offs in enumerate(w.offsets)]
        return cls.of_table(pa.table({
            "question_index": pa.array(w.question_index, pa.int64()),
            "offset_start": pa.array([[o[0] if o is not None else -1 for o in offs] for offs in w.offsets],
                                     pa.list_(pa.int64())),
            "offset_end": pa.array([[o[1] if o is not None else -1 for o in offs] for offs in w.offsets],
                                   pa.list_(pa.int64())),
            "max_context": pa.array(maxc, pa.list_(pa.bool_()))}))

    @classmethod
    def of_table(cls, table) -> "SpanIndex":
        """From the tokenised split's Arrow table (:func:`window_columns`' columns), with no Python object a token."""
        return cls(np.asarray(table.column("question_index").to_numpy(), dtype=np.int64),
                   TokenColumn(table.column("offset_start")), TokenColumn(table.column("offset_end")),
                   TokenColumn(table.column("max_context")))
