"""KorQuAD windowing: every question + context as the model's overlapping windows of tokens, each with
its gold span and max-context marks.

The second step of :mod:`finetune.readers.korquad` (which re-exports each name here), after the
questions are read (:mod:`.korquad_questions`); the spans decoded from the windows' logits are
:mod:`.korquad_spans`'. Pure functions:

* :func:`make_windows` tokenizes question + context with the fast tokenizer's overflow windows
  (``return_overflowing_tokens``, ``stride``, ``return_offsets_mapping``); ``doc_stride`` keeps
  BERT's meaning, the step between window starts, so the tokenizer's ``stride`` (the overlap)
  is the window's context length minus ``doc_stride``.  A question gets at most ``max_windows``
  windows: a longer context is cut first (one 10 MB context made 25,123 windows of 86 questions),
  and the windows it would have had past the cut are counted (``windows_dropped``).
* :func:`mark_max_context` marks, for tokens shared by overlapping windows, the one window
  allowed to start a span there (BERT's max-context rule).
* :func:`window_columns`: the windows as columns of a ``datasets.Dataset``.
"""

from __future__ import annotations

import dataclasses
import unicodedata

from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers.korquad_questions import Question, visible_span


@dataclasses.dataclass
class Windows:
    """Every window of every question; row r belongs to question ``question_index[r]``."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    offsets: list[list[tuple[int, int] | None]]  # context char span per token, None off-context
    question_index: list[int]
    start_positions: list[int]  # gold token positions (0 = [CLS]: answer not in this window)
    end_positions: list[int]
    # per token: is this window the token's "max context" one (see mark_max_context)
    max_context: list[list[bool]] = dataclasses.field(default_factory=list)
    # per window: on a question's first window, how many windows its cut context lost (else 0)
    windows_dropped: list[int] = dataclasses.field(default_factory=list)


def mark_max_context(offsets: list[list[tuple[int, int] | None]]) -> list[list[bool]]:
    """For the windows of one question: True where a context token has its *max context*.

    A token in the overlap of several windows is scored in each of them; BERT's SQuAD code
    (Devlin et al. 2019, ``_check_is_max_context``) lets only one window predict a span that
    starts there: the window where the token has the most context on its poorer side,
    ``min(tokens left of it, tokens right of it) + 0.01 * window length``, the first window on
    ties.  Tokens are identified across windows by their character offsets in the context.
    """
    doc_index: dict[tuple[int, int], int] = {}
    for offs in offsets:
        for o in offs:
            if o is not None:
                doc_index.setdefault(o, 0)
    for k, o in enumerate(sorted(doc_index)):
        doc_index[o] = k
    best: dict[int, tuple[float, int]] = {}
    spans = []
    for w, offs in enumerate(offsets):
        ctx = [doc_index[o] for o in offs if o is not None]
        start, length = (ctx[0], len(ctx)) if ctx else (0, 0)
        spans.append((start, length))
        for p in ctx:
            score = min(p - start, start + length - 1 - p) + 0.01 * length
            if p not in best or score > best[p][0]:
                best[p] = (score, w)
    return [[o is not None and best[doc_index[o]][1] == w for o in offs] for w, offs in enumerate(offsets)]


def truncate_question(tokenizer, question: str, max_query_length: int) -> str:
    """Cut the question text after its ``max_query_length``-th token (BERT's max_query_length)."""
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= max_query_length:
        return question
    return question[:enc["offset_mapping"][max_query_length - 1][1]]


def windows_for(tokens: int, room: int, doc_stride: int) -> int:
    """How many overflow windows ``tokens`` context tokens make (``room`` of them fit in a window)."""
    return 1 + -(-max(0, tokens - room) // doc_stride)


def bounded_context(tokenizer, context: str, room: int, doc_stride: int, max_windows: int) -> tuple[str, int]:
    """``context`` cut after the tokens its first ``max_windows`` windows hold, and how many windows
    that drops (0: not cut). ``max_windows=0`` is no bound."""
    keep = room + (max_windows - 1) * doc_stride
    # a token spans at least one UTF-8 byte (SentencePiece adds one leading mark): short contexts
    # cannot be cut, and are not tokenised twice
    if not max_windows or len(context.encode("utf-8")) + 1 <= keep:
        return context, 0
    offsets = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True,
                        verbose=False)["offset_mapping"]  # verbose: its "longer than the maximum" warning
    if len(offsets) <= keep:
        return context, 0
    return context[:offsets[keep - 1][1]], windows_for(len(offsets), room, doc_stride) - max_windows


def cluster_end(text: str, end: int) -> int:
    """``end`` moved past the characters that only continue the one before it: combining marks and
    Hangul vowel/final jamo, which NFC composes with what precedes them. A tokenizer that normalises
    to NFC gives a token of a decomposed (NFD) syllable the offsets of its first jamo only
    (``임수경`` in NFD: the last token ended after ``ᄀ``), so an answer cut there would end mid-syllable."""
    while end < len(text) and (unicodedata.combining(text[end]) or "\u1160" <= text[end] <= "\u11ff"
                               or "\ud7b0" <= text[end] <= "\ud7ff"):
        end += 1
    return end


def make_windows(tokenizer, questions: list[Question], max_length: int, doc_stride: int,
                 max_query_length: int, max_windows: int = 0) -> Windows:
    w = Windows([], [], [], [], [], [])
    for qi, q in enumerate(questions):
        question = truncate_question(tokenizer, q.question, max_query_length)
        q_len = len(tokenizer(question, add_special_tokens=False)["input_ids"])
        room = max_length - q_len - 3  # [CLS] q [SEP] c [SEP]
        if room < 1:
            raise FinetuneError(f"max_length={max_length} leaves no room for context after "
                                f"question {q.id!r} ({q_len} tokens)")
        overlap = max(0, room - doc_stride)
        context, dropped = bounded_context(tokenizer, q.context, room, room - overlap, max_windows)
        enc = tokenizer(question, context, truncation="only_second", max_length=max_length,
                        stride=overlap, return_overflowing_tokens=True, return_offsets_mapping=True,
                        return_token_type_ids=True)
        text, a_start = q.answers[0]
        # the answer's own characters: whitespace at its edges is in no answer (decoding strips it), and a
        # SentencePiece token starting at a space after the answer ("▁평양" of " 평양") was taken as its last
        a_start += len(text) - len(text.lstrip())
        a_end = a_start + len(text.strip())  # exclusive char end
        # a window holds the answer when it holds its visible characters: a tokenizer that drops format and
        # control characters (WordPiece's clean_text: U+200B...) has no token of one at the answer's edge, and
        # an answer ending in one at the context's end ("갔다\u200b") was in no window, every window of its
        # question trained as "no answer here"
        lo, hi = visible_span(text.strip())
        v_start, v_end = a_start + lo, a_start + hi
        decomposed = not unicodedata.is_normalized("NFC", context)  # NFC text: no syllable to complete
        trainable = q.span_ok(0) and len(text) > 0
        for k in range(len(enc["input_ids"])):
            seq_ids = enc.sequence_ids(k)
            offs = [((o[0], cluster_end(context, o[1])) if decomposed else tuple(o)) if s == 1 else None
                    for o, s in zip(enc["offset_mapping"][k], seq_ids)]
            start_tok = end_tok = 0
            if trainable:
                ctx = [i for i, o in enumerate(offs) if o is not None]
                if ctx and offs[ctx[0]][0] <= v_start and offs[ctx[-1]][1] >= v_end:
                    start_tok = next(i for i in ctx if offs[i][1] > a_start)
                    end_tok = next(i for i in reversed(ctx) if offs[i][0] < a_end)
            w.input_ids.append(enc["input_ids"][k])
            w.token_type_ids.append(enc["token_type_ids"][k])
            w.offsets.append(offs)
            w.question_index.append(qi)
            w.start_positions.append(start_tok)
            w.end_positions.append(end_tok)
        w.max_context.extend(mark_max_context(w.offsets[len(w.offsets) - len(enc["input_ids"]):]))
        w.windows_dropped.extend([dropped] + [0] * (len(enc["input_ids"]) - 1))
    return w


# --- as columns of a datasets.Dataset (finetune.korquad tokenises with Dataset.map) ------------

def window_columns(w: Windows, first_question: int) -> dict[str, list]:
    """``w`` as columns; question indices shifted by ``first_question`` (a ``map`` batch's first row)."""
    return {"input_ids": w.input_ids, "token_type_ids": w.token_type_ids,
            "start_positions": w.start_positions, "end_positions": w.end_positions,
            "question_index": [first_question + i for i in w.question_index],
            "offset_start": [[o[0] if o else -1 for o in offs] for offs in w.offsets],
            "offset_end": [[o[1] if o else -1 for o in offs] for offs in w.offsets],
            "max_context": w.max_context, "windows_dropped": w.windows_dropped}
