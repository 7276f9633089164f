"""KorQuAD answers written in another Unicode form than their context: found in it, for training.

A context in decomposed Hangul (NFD, as text saved on macOS may be) with answers typed composed (NFC), or
the reverse, misses every ``answer_start``: ``context[start:start + len(text)]`` is never the text, though
the answer is there, canonically equal. Such a training question had been left out of training
(``finetune.korquad``). :func:`refound` gives it the context's slice that is the answer in the context's own
form, nearest its ``answer_start``; the windows and targets are then those of any answer.
"""

from __future__ import annotations

import unicodedata

from kolectra.finetune.readers.korquad_questions import Question
from kolectra.finetune.readers.korquad_windows import cluster_end


def canonical_span(context: str, text: str, start: int) -> tuple[int, int] | None:
    """``(i, j)`` with ``context[i:j]`` canonically equal to ``text`` (the same NFC), cut at whole syllables and
    their combining marks, the one starting nearest ``start``; None if there is none."""
    bounds, i = [0], 0
    while i < len(context):  # a syllable with its trailing jamo and marks: NFC composes nothing across these cuts
        i = cluster_end(context, i + 1)
        bounds.append(i)
    at, composed = {0: 0}, []  # composed offset -> context offset, at each cut
    for a, b in zip(bounds, bounds[1:]):
        composed.append(unicodedata.normalize("NFC", context[a:b]))
        at[sum(map(len, composed))] = b
    joined, target = "".join(composed), unicodedata.normalize("NFC", text)
    spans, p = [], joined.find(target) if target else -1
    while p >= 0:
        if p in at and p + len(target) in at:
            spans.append((at[p], at[p + len(target)]))
        p = joined.find(target, p + 1)
    return min(spans, key=lambda s: abs(s[0] - start)) if spans else None


def refound(q: Question) -> Question | None:
    """``q`` with its first answer the context's slice canonically equal to it, when that answer misses its
    ``answer_start`` only for being in the other Unicode form; None otherwise (found as it is, or nowhere)."""
    text, start = q.answers[0]
    if q.span_ok(0) or text in q.context:
        return None  # there as it is: its answer_start is what misses (off by a few, bytes), which why_missed says
    span = canonical_span(q.context, text, start)
    if span is None:
        return None
    i, j = span
    return Question(q.id, q.question, q.context, ((q.context[i:j], i), *q.answers[1:]), q.title)
