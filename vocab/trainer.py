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
from collections import defaultdict
from typing import Callable, Mapping, NamedTuple

import numpy as np

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
    removals. The indexes start from one vectorised pass over all words' characters (:func:`_index`);
    a word's own pair list and symbol offsets are made when a merge first touches it, then kept.
    """

    def __init__(self, table: Mapping[WordType, int], symbols: set[str], respect_morphs: bool,
                 cross_morph: str) -> None:
        if cross_morph not in CROSS_MORPH:
            raise UserInputError(f"cross_morph: expected one of {CROSS_MORPH}, got {cross_morph!r}")
        # symbol ids in the pieces' sorted order; a word's symbols are looked up by character
        self.text: list[str] = sorted(symbols)
        self.ids: dict[str, int] = {t: i for i, t in enumerate(self.text)}
        if respect_morphs:
            items = [(word, cuts, n) for (word, cuts), n in table.items()]
        else:  # without the rule a word's cuts do not matter: one entry per text
            merged: dict[str, int] = {}
            for (word, _), n in table.items():
                merged[word] = merged.get(word, 0) + n
            items = [(word, (), n) for word, n in merged.items()]
        # where a run of whole morphemes may start, as bits: anywhere on a boundary (``any``: the
        # word's own cuts), only at the word's start (``prefix``: bit 0), nowhere (``none``)
        self.runs_anywhere = cross_morph == "any"
        self.run_starts = int(cross_morph == "prefix")
        index = _index(items, self.ids, cross_morph)
        self.skipped: int = index.skipped
        self.counts: list[int] = index.counts
        self.syms: list[list[int]] = index.syms
        # the word's morpheme boundaries (its two ends included) as bits of an int, bit c for offset c;
        # None: no constraint. A mask, not a set: the check below is the learner's hottest code, and
        # "a boundary strictly inside [start, end)" is then one shift and one and (docs/benchmarks.md)
        self.cuts: list[int | None] = index.cuts
        # made when a merge first touches the word: symbol i covers [pos[i], pos[i+1]) of it (words
        # with cuts only), and its allowed pairs (kept up to date)
        self.pos: list[list[int] | None] = [None] * len(self.syms)
        self.pairs: list[list[tuple[int, int]] | None] = [None] * len(self.syms)
        self.pair_count: dict[tuple[int, int], int] = index.pair_count
        self.pair_words: dict[tuple[int, int], set[int]] = index.pair_words

    def symbol(self, piece: str) -> int:
        i = self.ids.get(piece)
        if i is None:
            i = self.ids[piece] = len(self.text)
            self.text.append(piece)
        return i

    def _pairs(self, w: int) -> list[tuple[int, int]]:
        syms, cuts = self.syms[w], self.cuts[w]
        if cuts is None:
            return list(zip(syms, syms[1:]))
        pos = self.pos[w]
        if pos is None:  # first touch: the symbols are still the word's characters
            pos = self.pos[w] = list(range(len(syms) + 1))
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
        delta: defaultdict[tuple[int, int], int] = defaultdict(int)
        pairs, pair_words = self.pairs, self.pair_words
        for w in pair_words.pop(pair, ()):
            before = pairs[w]
            if before is None:
                before = pairs[w] = self._pairs(w)
            if pair not in before:  # the lazy index: this word lost the pair in an earlier merge
                continue
            syms, cuts = self.syms[w], self.cuts[w]
            i = 0
            if cuts is None:
                while i < len(syms) - 1:
                    if syms[i] == left and syms[i + 1] == right:
                        syms[i:i + 2] = [new]
                    i += 1
            else:
                pos = self.pos[w]
                while i < len(syms) - 1:
                    if syms[i] == left and syms[i + 1] == right and self._ok(cuts, pos[i], pos[i + 2]):
                        syms[i:i + 2] = [new]
                        del pos[i + 1]
                    i += 1
            after = pairs[w] = self._pairs(w)
            n = self.counts[w]
            for p in before:
                delta[p] -= n
            for p in after:
                delta[p] += n
                # only pairs with the new symbol can be new to the word: the others were allowed before
                if new in p:
                    ws = pair_words.get(p)
                    if ws is None:
                        pair_words[p] = {w}
                    else:
                        ws.add(w)
        changed = []
        for p, d in delta.items():
            if d:
                self.pair_count[p] = self.pair_count.get(p, 0) + d
                changed.append(p)
        return changed


class _Index(NamedTuple):
    counts: list[int]
    syms: list[list[int]]
    cuts: list[int | None]
    pair_count: dict[tuple[int, int], int]
    pair_words: dict[tuple[int, int], set[int]]
    skipped: int


def _codes(chars: np.ndarray, ids: Mapping[str, int]) -> np.ndarray:
    """Each code point's symbol id among the one-character ``ids``, -1 where there is none."""
    table = sorted((ord(t), i) for t, i in ids.items() if len(t) == 1)
    if not table:
        return np.full(len(chars), -1, dtype=np.int64)
    keys, values = (np.array(col, dtype=np.int64) for col in zip(*table))
    at = np.minimum(np.searchsorted(keys, chars), len(keys) - 1)
    return np.where(keys[at] == chars, values[at], -1)


def _index(items: list[tuple[str, tuple[int, ...], int]], ids: Mapping[str, int], cross_morph: str) -> _Index:
    """The words as symbol ids and the pair indexes, in one numpy pass over all their characters (a
    Python step per word, none per character or pair). Words the alphabet cannot spell are left out
    and their count returned as ``skipped``. A pair's allowed-ness is :meth:`_Words._ok` for two
    characters at word offset i: no cut at i+1, or a run of whole morphemes from i to i+2."""
    first = {t: i for t, i in ids.items() if not t.startswith(PREFIX)}
    inner = {t[len(PREFIX):]: i for t, i in ids.items() if t.startswith(PREFIX)}
    words = [word for word, _, _ in items]
    lens = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    chars = np.frombuffer("".join(words).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    ends = np.cumsum(lens)
    starts = ends - lens
    word_of = np.repeat(np.arange(len(words)), lens)
    is_first = np.zeros(len(chars) + 1, dtype=bool)
    is_first[starts[lens > 0]] = True
    is_first[-1] = True  # past the last word: a sentinel for "the next character starts a word"
    sym = np.where(is_first[:-1], _codes(chars, first), _codes(chars, inner))
    keep = lens > 0
    keep[word_of[sym < 0]] = False
    wanted = np.flatnonzero(keep)
    counts = [items[w][2] for w in wanted.tolist()]
    skipped = sum(items[w][2] for w in np.flatnonzero(~keep).tolist())
    # cut[c]: character c starts a morpheme (a word's first character included), words with cuts only
    cut = np.zeros(len(chars) + 1, dtype=bool)
    has_cuts = np.zeros(len(words), dtype=bool)
    at = [(w, c) for w in wanted.tolist() for c in items[w][1]]
    if at:
        w_at, c_at = np.array(at, dtype=np.int64).T
        cut[starts[w_at] + c_at] = True
        has_cuts[w_at] = True
        cut[starts[has_cuts]] = True
    cuts: list[int | None] = []
    for w, k in zip(wanted.tolist(), has_cuts[wanted].tolist()):
        if k:
            word, wcuts, _ = items[w]
            mask = 1 | 1 << len(word)
            for c in wcuts:
                mask |= 1 << c
            cuts.append(mask)
        else:
            cuts.append(None)
    flat = sym.tolist()
    syms = [flat[s:e] for s, e in zip(starts[wanted].tolist(), ends[wanted].tolist())]
    # pairs: character j and j+1 of one kept word; allowed unless a cut falls between them, then only
    # as a run of whole morphemes (from a cut, or the word's start for "prefix", to a cut or the end)
    j = np.flatnonzero(~is_first[1:-1]) if len(chars) > 1 else np.zeros(0, dtype=np.int64)
    j = j[keep[word_of[j]]]
    run_start = {"any": cut[j], "prefix": is_first[j], "none": np.zeros(len(j), dtype=bool)}[cross_morph]
    run_end = is_first[j + 2] | cut[np.minimum(j + 2, len(chars))]
    j = j[~has_cuts[word_of[j]] | ~cut[j + 1] | (run_start & run_end)]
    renumber = np.cumsum(keep) - 1
    n_sym = len(ids)
    key = sym[j] * n_sym + sym[j + 1]
    uniq, inv = np.unique(key, return_inverse=True)
    weights = np.array([items[w][2] for w in wanted.tolist()] or [0], dtype=np.int64)[renumber[word_of[j]]]
    totals = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(totals, inv, weights)
    pairs = list(zip((uniq // n_sym).tolist(), (uniq % n_sym).tolist()))
    order = np.argsort(inv, kind="stable")
    holders = renumber[word_of[j]][order].tolist()
    bounds = np.concatenate(([0], np.cumsum(np.bincount(inv, minlength=len(uniq))))).tolist()
    pair_words = {p: set(holders[s:e]) for p, s, e in zip(pairs, bounds, bounds[1:])}
    return _Index(counts, syms, cuts, dict(zip(pairs, totals.tolist())), pair_words, skipped)


def learn_pieces(table: Mapping[WordType, int], *, budget: int, initial: list[str], min_frequency: int,
                 respect_morphs: bool, cross_morph: str = "prefix",
                 on_piece: Callable[[], None] | None = None) -> tuple[list[str], dict]:
    """Merged pieces in learning order until ``len(initial) + len(pieces) == budget``.

    ``initial`` are the alphabet symbols (both forms); words that cannot be spelled with them are
    left out (at run time they are [UNK] anyway) and counted in the returned stats. ``on_piece``
    is called for every new piece (a progress bar's advance).
    """
    # the learner makes no reference cycles, but keeps a list per word it touched: with the
    # collector on, its full passes over them cost about as much as the incremental index saves
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _learn(table, budget, initial, min_frequency, respect_morphs, cross_morph, on_piece)
    finally:
        if enabled:
            gc.enable()


def _learn(table: Mapping[WordType, int], budget: int, initial: list[str], min_frequency: int,
           respect_morphs: bool, cross_morph: str, on_piece: Callable[[], None] | None) -> tuple[list[str], dict]:
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
