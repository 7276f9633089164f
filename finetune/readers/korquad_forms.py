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


def _clusters(context: str) -> list[int]:
    """The offsets of ``context`` between its syllables with their trailing jamo and marks: NFC and NFD compose and
    decompose nothing across these cuts, so a prefix up to one normalises to the normalised text's prefix."""
    bounds, i = [0], 0
    while i < len(context):
        i = cluster_end(context, i + 1)
        bounds.append(i)
    return bounds


def _counted(context: str, bounds: list[int], form: str) -> dict[int, int]:
    """Each cut of ``bounds`` -> its offset in ``context`` normalised to ``form`` (``len(normalize(form, prefix))``)."""
    counted = {0: 0}
    for a, b in zip(bounds, bounds[1:]):
        counted[b] = counted[a] + len(unicodedata.normalize(form, context[a:b]))
    return counted


def _composed(context: str, bounds: list[int]) -> tuple[str, dict[int, int]]:
    """``context`` in NFC a cut's piece at a time, and each cut's offset there -> its offset in ``context``."""
    joined = "".join(unicodedata.normalize("NFC", context[a:b]) for a, b in zip(bounds, bounds[1:]))
    return joined, {n: b for b, n in _counted(context, bounds, "NFC").items()}


def _spans(context: str, bounds: list[int], text: str, composed=None) -> list[tuple[int, int]]:
    """Every ``(i, j)`` cut at ``bounds`` with ``context[i:j]`` canonically equal to ``text`` (the same NFC);
    ``composed``: :func:`_composed`'s, when the caller has it."""
    joined, at = composed or _composed(context, bounds)
    target = unicodedata.normalize("NFC", text)
    spans, p = [], joined.find(target) if target else -1
    while p >= 0:
        if p in at and p + len(target) in at:
            spans.append((at[p], at[p + len(target)]))
        p = joined.find(target, p + 1)
    return spans


def canonical_span(context: str, text: str, start: int) -> tuple[int, int] | None:
    """``(i, j)`` with ``context[i:j]`` canonically equal to ``text`` (the same NFC), cut at whole syllables and
    their combining marks, the one starting nearest ``start``; None if there is none.

    ``start`` counts the context in the answer's own form, where the two were written together (``str.find`` finds
    an NFC answer in the NFC context, not in its NFD one): measured in the context's offsets as it is, the nearest
    to an NFC ``answer_start`` of a word an NFD context holds twice was an earlier one (``평양`` at 15 of ``임수경 씨는
    평양에 갔다. 평양 ...``: the first, NFD 15, not the second, NFD 31), and the question trained on other words."""
    bounds = _clusters(context)
    form = "NFC" if unicodedata.is_normalized("NFC", text) else "NFD"  # the form answer_start counts the context in
    counted = _counted(context, bounds, form)
    spans = _spans(context, bounds, text)
    return min(spans, key=lambda s: abs(counted[s[0]] - start)) if spans else None


def _hits(q: Question, bounds: list[int], counted: dict[str, dict[int, int]], composed) -> dict[str, tuple[int, int]]:
    """For each way of counting (``"as is"``, ``"NFC"``, ``"NFD"``): the span of ``q``'s first answer that its
    ``answer_start`` names counted so, where there is one."""
    text, start = q.answers[0]
    hits = {"as is": (start, start + len(text))} if q.span_ok(0) else {}
    for i, j in _spans(q.context, bounds, text, composed):
        for form, at in counted.items():
            if at[i] == start:
                hits.setdefault(form, (i, j))
    return hits


def placed(questions: list[Question]) -> tuple[list[Question], dict[str, int]]:
    """``questions`` with the first answer of each that misses its ``answer_start`` only for counting the context in
    another Unicode form put at the answer that start names, as the context's own slice; and how many were: of
    those whose text is in another form than the context's (``"text"``), of the others by the form their start
    counts (``"NFC"``, ``"NFD"``).

    A context in decomposed Hangul (NFD) with its ``answer_start``s counted in the composed (NFC) text, or the
    reverse, misses them (an NFD syllable is two or three code points): a context's answers count one way, so
    the way that places the most of a paragraph's answers exactly is taken (ties: the file's, then the one its
    answers are written in, then the context as it is). Contexts whose answers all sit at their starts are left as
    they are. An NFD answer at its NFC start had been left out of training, and an NFC answer at its NFD start
    trained on the occurrence nearest that start counted in NFC (of a word there twice, the other one)."""
    by_context: dict[str, list[int]] = {}
    for n, q in enumerate(questions):
        by_context.setdefault(q.context, []).append(n)
    found: dict[int, dict[str, tuple[int, int]]] = {}
    file_votes = {"as is": 0, "NFC": 0, "NFD": 0}
    for context, members in by_context.items():
        already = {f for f in ("NFC", "NFD") if unicodedata.is_normalized(f, context)}  # counted so, it is as it is
        if all(questions[n].span_ok(0) for n in members):
            for form in ("as is", *already):
                file_votes[form] += len(members)
            continue
        bounds = _clusters(context)
        counted = {f: ({b: b for b in bounds} if f == "as is" or f in already else _counted(context, bounds, f))
                   for f in ("as is", "NFC", "NFD")}
        composed = _composed(context, bounds)
        for n in members:
            found[n] = _hits(questions[n], bounds, counted, composed)
            for form in found[n]:
                file_votes[form] += 1
    _drop_chance_forms(questions, found, file_votes)
    out, counts = list(questions), {"text": 0, "NFC": 0, "NFD": 0}
    for context, members in by_context.items():
        if not any(n in found for n in members):
            continue
        votes = {f: sum(f in found[n] for n in members) for f in file_votes}
        written = {f for n in members for f in ("NFC", "NFD")  # the answers' form, where they are in one only
                   if unicodedata.is_normalized(f, questions[n].answers[0][0])
                   and not unicodedata.is_normalized("NFD" if f == "NFC" else "NFC", questions[n].answers[0][0])}
        form = max(("as is", "NFC", "NFD"), key=lambda f: (votes[f], file_votes[f], written == {f}, f == "as is"))
        for n in members:
            q = questions[n]
            # moved too where it is at its start as it is by chance (a word there twice) and the paragraph counts otherwise
            if form in found[n] and (q.context[slice(*found[n][form])], found[n][form][0]) != q.answers[0]:
                i, j = found[n][form]
                out[n] = Question(q.id, q.question, q.context, ((q.context[i:j], i), *q.answers[1:]), q.title)
                counts["text" if q.context[i:j] != q.answers[0][0] else form] += 1
    return out, counts


def _drop_chance_forms(questions: list[Question], found: dict[int, dict[str, tuple[int, int]]],
                       file_votes: dict[str, int]) -> None:
    """Forget, in ``found`` and ``file_votes``, a way of counting that places a verbatim answer by chance alone.

    A start counted in UTF-8 bytes equals the NFD count wherever each syllable before it has a final consonant
    (3 bytes, 3 jamo), and a start past the context's end may name an NFD offset of the answer: one such hit in a
    file of misses is no evidence the file counts so. A form is taken for answers found as they are only where it
    places at least two of the file's missed starts and at least half of them; an answer found only canonically
    (written in the other form) is evidence of the other form by itself."""
    missed = [n for n, q in enumerate(questions) if not q.span_ok(0)]
    for form in ("NFC", "NFD"):
        placed = sum(form in found.get(n, {}) for n in missed)
        if placed >= 2 and 2 * placed >= len(missed):
            continue
        for n, hits in found.items():
            q = questions[n]
            if form in hits and q.context[slice(*hits[form])] == q.answers[0][0]:
                del hits[form]
                file_votes[form] -= 1


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
