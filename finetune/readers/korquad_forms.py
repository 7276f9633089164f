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
    their combining marks, the one starting nearest ``start``; None if there is none.

    ``start`` counts the context in the answer's own form, where the two were written together (``str.find`` finds
    an NFC answer in the NFC context, not in its NFD one): measured in the context's offsets as it is, the nearest
    to an NFC ``answer_start`` of a word an NFD context holds twice was an earlier one (``평양`` at 15 of ``임수경 씨는
    평양에 갔다. 평양 ...``: the first, NFD 15, not the second, NFD 31), and the question trained on other words."""
    bounds, i = [0], 0
    while i < len(context):  # a syllable with its trailing jamo and marks: NFC composes nothing across these cuts
        i = cluster_end(context, i + 1)
        bounds.append(i)
    form = "NFC" if unicodedata.is_normalized("NFC", text) else "NFD"  # the form answer_start counts the context in
    at, composed, counted = {0: 0}, [], {0: 0}  # composed offset -> context offset; context offset -> in text's form
    for a, b in zip(bounds, bounds[1:]):
        composed.append(unicodedata.normalize("NFC", context[a:b]))
        at[sum(map(len, composed))] = b
        counted[b] = counted[a] + len(unicodedata.normalize(form, context[a:b]))
    joined, target = "".join(composed), unicodedata.normalize("NFC", text)
    spans, p = [], joined.find(target) if target else -1
    while p >= 0:
        if p in at and p + len(target) in at:
            spans.append((at[p], at[p + len(target)]))
        p = joined.find(target, p + 1)
    return min(spans, key=lambda s: abs(counted[s[0]] - start)) if spans else None


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
