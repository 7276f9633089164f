"""Learning WordPiece pieces, optionally under the stored morpheme segmentation.

Stage: corpus -> **vocab** -> examples. Pure functions: a word-type table in, a piece list out.

Why our own learner. WordPiece as shipped by BERT and HF ``tokenizers`` learns its vocabulary by
greedy pair merging (BPE-style, Sennrich et al. 2016) over the pre-tokenised words, marking every
non-initial symbol with ``##``; the runtime then does greedy longest-match-first. To make pieces
fall on morpheme boundaries we must forbid merges that cross a boundary *inside* a word while the
``##`` marks still follow the word (an eojeol), not the morpheme. Feeding morphemes to the HF
trainer as separate words would mark them as word-initial (and ``##`` written into the training
text is split off again by the BERT pre-tokeniser), and its trainer has no hook for a merge
constraint, so the same merge procedure is implemented here with one extra rule:

    a merge of neighbouring symbols a, b (span [a.start, b.end)) is allowed only if that span
    lies inside one morpheme, or it is a run of whole morphemes that ``cross_morph`` permits:
    ``"prefix"`` — only at the start of the word (영화+##를 -> 영화를, 재밌+##었 -> 재밌었);
    ``"any"`` — anywhere (also ##었+##어요 -> ##었어요); ``"none"`` — never.

So no learned piece starts or ends mid-morpheme. ``"prefix"`` (the default) keeps frequent
eojeols and stems-with-endings whole while every ``##`` piece is one morpheme or part of one:
the runtime's greedy longest match starts at the word's first character, so a word-initial run
of whole morphemes leaves the rest of the word to start on a boundary, whereas multi-morpheme
``##`` pieces learned in one word get matched across a boundary in another (사람들 ##은지 ##금 for
사람들은 지금) — measured on NSMC reviews, see the vocab report. With ``respect_morphs=False`` the rule is off and this is
plain WordPiece training — the baseline. Merge order: highest pair count (each occurrence
weighted by its word's count) first, ties by the pair's text, so the result is deterministic.
"""

from __future__ import annotations

import gc
import heapq
from typing import Callable, Mapping

from kolectra.core.errors import UserInputError
from kolectra.vocab import tables
from kolectra.vocab.slots import Slots
from kolectra.vocab.words import WordType

PREFIX = "##"
CROSS_MORPH = ("prefix", "any", "none")


def alphabet(table: Mapping[WordType, int], limit: int) -> tuple[list[str], list[str]]:
    """:func:`alphabet_of` the table's own characters (:func:`vocab.tables.char_counts`)."""
    return alphabet_of(tables.char_counts(table), limit)


def alphabet_of(chars: Mapping[str, int], limit: int) -> tuple[list[str], list[str]]:
    """The kept characters as (word-initial forms, ``##`` forms), most frequent ``limit`` chars,
    from a character table (:mod:`vocab.tables`: ``c`` and ``##c`` counts).

    Every kept character gets an initial form; the ``##`` form only if it ever occurs in a longer
    word (punctuation and Hanja are always words of their own after pre-tokenisation).
    """
    freq = {c: n for c, n in chars.items() if len(c) == 1}
    kept = sorted(sorted(freq, key=lambda c: (-freq[c], c))[:limit])
    return kept, [PREFIX + c for c in kept if chars.get(PREFIX + c)]


def _items(table: Mapping[WordType, int], respect_morphs: bool) -> list[tuple[str, tuple[int, ...], int]]:
    """The word types as (text, cuts, count); without the rule a word's cuts do not matter: one entry a text."""
    if respect_morphs:
        return [(word, cuts, n) for (word, cuts), n in table.items()]
    merged: dict[str, int] = {}
    for (word, _), n in table.items():
        merged[word] = merged.get(word, 0) + n
    return [(word, (), n) for word, n in merged.items()]


def learn_pieces(table: Mapping[WordType, int], *, budget: int, initial: list[str], min_frequency: int,
                 respect_morphs: bool, cross_morph: str = "prefix", max_chars: int | None = None,
                 on_piece: Callable[[], None] | None = None) -> tuple[list[str], dict]:
    """Merged pieces in learning order until ``len(initial) + len(pieces) == budget``.

    ``initial`` are the alphabet symbols (both forms); words that cannot be spelled with them are
    left out (at run time they are [UNK] anyway) and counted in the returned stats, and so are words
    longer than ``max_chars`` (the runtime WordPiece's ``max_input_chars_per_word``: it makes them
    one [UNK] whatever the vocabulary, so their pairs must not vote for pieces). ``on_piece`` is
    called for every new piece (a progress bar's advance).
    """
    # the learner makes no reference cycles, but many small containers (the heap's entries, the
    # slots listed per pair): the collector's passes over them cost 5-10 % of the learning
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _learn(table, budget, initial, min_frequency, respect_morphs, cross_morph, max_chars, on_piece)
    finally:
        if enabled:
            gc.enable()


def _learn(table: Mapping[WordType, int], budget: int, initial: list[str], min_frequency: int,
           respect_morphs: bool, cross_morph: str, max_chars: int | None,
           on_piece: Callable[[], None] | None) -> tuple[list[str], dict]:
    if cross_morph not in CROSS_MORPH:
        raise UserInputError(f"cross_morph: expected one of {CROSS_MORPH}, got {cross_morph!r}")
    # symbol ids in the pieces' sorted order; a word's symbols are looked up by character
    text: list[str] = sorted(set(initial))
    ids: dict[str, int] = {t: i for i, t in enumerate(text)}
    items, too_long = _items(table, respect_morphs), 0
    if max_chars is not None:
        # one such word's run of a repeated character (a review of 120 hearts) made a chain of pieces
        too_long = sum(n for word, _, n in items if len(word) > max_chars)
        items = [item for item in items if len(item[0]) <= max_chars]
    # every new symbol is a new piece, so there are never more than the budget's (plus the initial)
    words = Slots(items, ids, cross_morph, max_symbols=max(budget, len(text)) + 2)
    width, count = words.width, words.count
    have = set(initial)
    pieces: list[str] = []
    # max-heap by count, ties by the pair's text (deterministic, independent of symbol numbering); a
    # pair below min_frequency is left out: counts of the pairs there are only fall, so it could only
    # end the learning, as an empty heap does
    heap = []
    for k, c in count.items():
        if c >= min_frequency:
            a, b = divmod(k, width)
            heap.append((-c, text[a], text[b], a, b))
    heapq.heapify(heap)
    merges = 0
    while heap and len(have) < budget:
        neg, _, _, a, b = heapq.heappop(heap)
        if count.get(a * width + b, 0) != -neg:  # stale entry; the current count was pushed when it changed
            continue
        piece = text[a] + text[b][len(PREFIX):]
        new = ids.get(piece)
        if new is None:
            new = ids[piece] = len(text)
            text.append(piece)
        for k, d in zip(*words.merge(a, b, new)):
            if not d:
                continue
            c = count.get(k, 0) + d
            if c <= 0:
                words.forget(k)
                continue
            count[k] = c
            if c >= min_frequency:
                x, y = divmod(k, width)
                heapq.heappush(heap, (-c, text[x], text[y], x, y))
        merges += 1
        if piece not in have:
            have.add(piece)
            pieces.append(piece)
            if on_piece is not None:
                on_piece()
    return pieces, {"merges": merges, "train_word_types": words.kept, "words_outside_alphabet": words.skipped,
                    "words_too_long": too_long}
