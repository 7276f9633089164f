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

import heapq
from collections import Counter
from typing import Callable, Mapping

from kolectra.core.errors import UserInputError
from kolectra.vocab import tables
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


class _Words:
    """Symbol sequences of all word types plus pair statistics, updated merge by merge.

    Symbols are small ints (``text[i]`` is the piece), a pair is ``(left, right)``. Speed comes
    from two indexes kept up to date incrementally, as in HF ``tokenizers``' BPE trainer: the
    weighted count of every pair and, per pair, the words that may hold it. A merge touches only
    the words listed for its pair and changes only the counts whose value really moved, so the
    cost of a merge is proportional to the words it rewrites, not to the corpus. The word index is
    lazy (a word stays listed after it lost the pair; it is checked and skipped), which saves the
    removals.
    """

    def __init__(self, table: Mapping[WordType, int], symbols: set[str], respect_morphs: bool,
                 cross_morph: str) -> None:
        if cross_morph not in CROSS_MORPH:
            raise UserInputError(f"cross_morph: expected one of {CROSS_MORPH}, got {cross_morph!r}")
        # symbol ids in the pieces' sorted order; a word's symbols are looked up by character
        self.text: list[str] = sorted(symbols)
        self.ids: dict[str, int] = {t: i for i, t in enumerate(self.text)}
        first = {t: i for t, i in self.ids.items() if not t.startswith(PREFIX)}
        inner = {t[len(PREFIX):]: i for t, i in self.ids.items() if t.startswith(PREFIX)}
        merged: Counter = Counter()
        self.skipped = 0
        for (word, cuts), n in table.items():
            if word and word[0] in first and inner.keys() >= set(word[1:]):
                merged[(word, cuts if respect_morphs else ())] += n
            else:
                self.skipped += n
        # where a run of whole morphemes may start, as bits: anywhere on a boundary (``any``: the
        # word's own cuts), only at the word's start (``prefix``: bit 0), nowhere (``none``)
        self.runs_anywhere = cross_morph == "any"
        self.run_starts = int(cross_morph == "prefix")
        self.counts: list[int] = []
        self.syms: list[list[int]] = []
        self.pos: list[list[int]] = []  # symbol i covers [pos[i], pos[i+1]) of the word
        # the word's morpheme boundaries (its two ends included) as bits of an int, bit c for offset c;
        # None: no constraint. A mask, not a set: the check below is the learner's hottest code, and
        # "a boundary strictly inside [start, end)" is then one shift and one and (docs/benchmarks.md)
        self.cuts: list[int | None] = []
        # the words' order does not matter (merges go by count, ties by text); the table's is the corpus's
        for (word, cuts), n in merged.items():
            self.counts.append(n)
            self.syms.append([first[word[0]], *map(inner.__getitem__, word[1:])])
            self.pos.append(list(range(len(word) + 1)))
            self.cuts.append(sum({1 << c for c in (0, len(word), *cuts)}) if respect_morphs and cuts else None)
        del merged
        self.pair_count: dict[tuple[int, int], int] = {}
        self.pair_words: dict[tuple[int, int], set[int]] = {}
        for w, n in enumerate(self.counts):
            for p in self._pairs(w):
                self.pair_count[p] = self.pair_count.get(p, 0) + n
                ws = self.pair_words.get(p)
                if ws is None:
                    self.pair_words[p] = {w}
                else:
                    ws.add(w)

    def symbol(self, piece: str) -> int:
        i = self.ids.get(piece)
        if i is None:
            i = self.ids[piece] = len(self.text)
            self.text.append(piece)
        return i

    def _pairs(self, w: int) -> list[tuple[int, int]]:
        syms, pos, cuts = self.syms[w], self.pos[w], self.cuts[w]
        if cuts is None:
            return list(zip(syms, syms[1:]))
        starts = cuts if self.runs_anywhere else self.run_starts
        # _ok written out: this is the learner's hottest line, and a call per pair doubled it
        return [(syms[i], syms[i + 1]) for i in range(len(syms) - 1)
                if not (cuts >> (pos[i] + 1)) & ((1 << (pos[i + 2] - pos[i] - 1)) - 1)
                or starts >> pos[i] & 1 and cuts >> pos[i + 2] & 1]

    def _ok(self, cuts: int, start: int, end: int) -> bool:
        """May the symbols covering [start, end) merge: no boundary strictly inside, or a run of whole
        morphemes starting where ``cross_morph`` allows."""
        return (not (cuts >> (start + 1)) & ((1 << (end - start - 1)) - 1)
                or bool((cuts if self.runs_anywhere else self.run_starts) >> start & 1 and cuts >> end & 1))

    def merge(self, pair: tuple[int, int]) -> list[tuple[int, int]]:
        """Merge every allowed occurrence of ``pair``; returns the pairs whose counts changed."""
        left, right = pair
        new = self.symbol(self.text[left] + self.text[right][len(PREFIX):])
        delta: dict[tuple[int, int], int] = {}
        for w in self.pair_words.pop(pair, ()):
            before = self._pairs(w)
            if pair not in before:  # the lazy index: this word lost the pair in an earlier merge
                continue
            syms, pos, cuts = self.syms[w], self.pos[w], self.cuts[w]
            i = 0
            while i < len(syms) - 1:
                if syms[i] == left and syms[i + 1] == right and (cuts is None or self._ok(cuts, pos[i], pos[i + 2])):
                    syms[i:i + 2] = [new]
                    del pos[i + 1]
                i += 1
            n = self.counts[w]
            for p in before:
                delta[p] = delta.get(p, 0) - n
            for p in self._pairs(w):
                delta[p] = delta.get(p, 0) + n
                ws = self.pair_words.get(p)
                if ws is None:
                    self.pair_words[p] = {w}
                else:
                    ws.add(w)
        changed = []
        for p, d in delta.items():
            if d:
                self.pair_count[p] = self.pair_count.get(p, 0) + d
                changed.append(p)
        return changed


def learn_pieces(table: Mapping[WordType, int], *, budget: int, initial: list[str], min_frequency: int,
                 respect_morphs: bool, cross_morph: str = "prefix",
                 on_piece: Callable[[], None] | None = None) -> tuple[list[str], dict]:
    """Merged pieces in learning order until ``len(initial) + len(pieces) == budget``.

    ``initial`` are the alphabet symbols (both forms); words that cannot be spelled with them are
    left out (at run time they are [UNK] anyway) and counted in the returned stats. ``on_piece``
    is called for every new piece (a progress bar's advance).
    """
    words = _Words(table, set(initial), respect_morphs, cross_morph)
    text = words.text
    have = set(initial)
    pieces: list[str] = []
    # max-heap by count, ties by the pair's text (deterministic, independent of symbol numbering)
    heap = [(-c, text[a], text[b], a, b) for (a, b), c in words.pair_count.items() if c > 0]
    heapq.heapify(heap)
    merges = 0
    while heap and len(have) < budget:
        neg, _, _, a, b = heapq.heappop(heap)
        pair = (a, b)
        count = words.pair_count.get(pair, 0)
        if count != -neg:  # stale entry; the current count was pushed when it changed
            continue
        if count < min_frequency:
            break
        for p in words.merge(pair):
            c = words.pair_count[p]
            if c > 0:
                heapq.heappush(heap, (-c, text[p[0]], text[p[1]], p[0], p[1]))
            else:
                del words.pair_count[p]
                words.pair_words.pop(p, None)
        merges += 1
        piece = text[a] + text[b][len(PREFIX):]
        if piece not in have:
            have.add(piece)
            pieces.append(piece)
            if on_piece is not None:
                on_piece()
    return pieces, {"merges": merges, "train_word_types": len(words.syms),
                    "words_outside_alphabet": words.skipped}
