"""The learner's state: every word type's symbols in one flat array, merged a pair at a time.

Stage: corpus -> **vocab** -> examples; :mod:`vocab.trainer` drives it. The layout is that of fast
BPE trainers (SentencePiece's and YouTokenToMe's): one slot per character of every kept word, a
word's slots followed by an empty slot (symbol -1) that ends it, and a symbol kept in the slot of
its first character, linked to its neighbours by ``nxt`` / ``prv``. A pair is the symbol in a slot
and the one after it, its count the sum of its words' counts over its allowed occurrences, and per
pair the slots where it may occur are listed (lazily: a listed slot that no longer holds the pair is
checked and skipped). A merge then rewrites only those slots and their neighbours: with numpy, all
at once, when many are listed (a few array operations plus a Python step per pair whose count
changed, whatever the number of words that hold the pair), or one occurrence at a time in Python
when few are (most merges: a numpy call would cost more than their work).

The morpheme rule (:mod:`vocab.trainer`) is arrays too: ``cut[s]``, a morpheme starts at slot s (a
word's first slot and its end slot included), its running sum, and ``run[s]``, a run of whole
morphemes may start at s. Symbols covering slots [s, e) may merge iff no cut lies strictly inside,
or ``run[s]`` and ``cut[e]``.
"""

from __future__ import annotations

from array import array
from itertools import chain
from typing import Mapping

import numpy as np

PREFIX = "##"
# from this many listed slots a merge is done with numpy, below it in Python: about where the two
# cost the same (measured on NSMC reviews, docs/vocab.md); only the speed depends on it
VECTORISE_FROM = 96


class Slots:
    """Words as slots, pair counts and the slots listed per pair; see the module's docstring.

    The arrays live in :mod:`array` buffers with numpy views on them: a merge of many occurrences
    works on the views, one of a few (most of them: a pair's count falls as the learning goes on)
    steps through the buffers in Python, where a numpy call would cost more than the work itself.
    """

    def __init__(self, items: list[tuple[str, tuple[int, ...], int]], ids: Mapping[str, int], cross_morph: str,
                 max_symbols: int) -> None:
        self.width = max_symbols  # pair key: left * width + right
        words = [word for word, _, _ in items]
        lens = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        chars = np.frombuffer("".join(words).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        char_word = np.repeat(np.arange(len(words)), lens)
        first = np.zeros(len(chars), dtype=bool)
        first[(np.cumsum(lens) - lens)[lens > 0]] = True
        sym = np.where(first, _codes(chars, {t: i for t, i in ids.items() if not t.startswith(PREFIX)}),
                       _codes(chars, {t[len(PREFIX):]: i for t, i in ids.items() if t.startswith(PREFIX)}))
        # words the alphabet cannot spell are left out (at run time they are [UNK] anyway)
        keep = lens > 0
        keep[char_word[sym < 0]] = False
        counts = np.array([n for _, _, n in items], dtype=np.int64)
        self.kept = int(keep.sum())
        self.skipped = int(counts[~keep].sum())
        sym, lens, counts = sym[keep[char_word]], lens[keep], counts[keep]
        # slot 0 and every word's last slot are empty: a symbol's neighbour is never another word's
        base = 1 + np.cumsum(lens + 1) - (lens + 1)  # each kept word's first slot
        n = 1 + int((lens + 1).sum())
        at = np.repeat(base - (np.cumsum(lens) - lens), lens) + np.arange(len(sym))  # each character's slot
        self.sym, self.py_sym = _shared("i", n, -1)
        self.sym[at] = sym
        self.nxt, self.py_nxt = _shared("i", n, 0)
        self.nxt[:] = np.arange(1, n + 1)
        self.nxt[-1] = n - 1  # kept inside the array; an empty slot's neighbours are never used
        self.prv, self.py_prv = _shared("i", n, 0)
        self.prv[1:] = np.arange(n - 1)
        self.weight, self.py_weight = _shared("q", n, 0)
        self.weight[at] = np.repeat(counts, lens)
        self.cut, self.py_cut = _shared("b", n + 1, 0)
        self.cut[base] = True
        self.cut[base + lens] = True
        kept_cuts = [cuts for (_, cuts, _), k in zip(items, keep.tolist()) if k]
        n_cuts = np.fromiter(map(len, kept_cuts), dtype=np.int64, count=len(kept_cuts))
        offsets = np.fromiter(chain.from_iterable(kept_cuts), dtype=np.int64, count=int(n_cuts.sum()))
        self.cut[np.repeat(base, n_cuts) + offsets] = True
        self.cuts_before, self.py_cuts_before = _shared("i", n + 2, 0)  # cuts in slots [0, k)
        self.cuts_before[1:] = np.cumsum(self.cut)
        self.run, self.py_run = _shared("b", n + 1, 0)
        if cross_morph == "any":
            self.run[:] = self.cut
        elif cross_morph == "prefix":
            self.run[base] = True
        # the pairs: every slot whose symbol has a right neighbour in its word, if the pair is allowed
        s = np.flatnonzero((self.sym[:-1] >= 0) & (self.sym[1:] >= 0)).astype(np.int32)
        s = s[self._allowed(s, s + 2)]
        keys = self._keys(s)
        order = np.argsort(keys, kind="stable")
        self.initial_keys, self.initial_slots = keys[order], s[order]
        uniq, first_at = np.unique(self.initial_keys, return_index=True)
        totals = np.add.reduceat(self.weight[self.initial_slots], first_at) if len(uniq) else np.zeros(0, np.int64)
        self.count: dict[int, int] = dict(zip(uniq.tolist(), totals.tolist()))
        self.initial_symbols = len(ids)  # a pair of two of them is listed in the initial arrays
        # slots listed for a pair after the start: arrays from merges done with numpy, ints from the others
        self.added: dict[int, list[np.ndarray]] = {}
        self.added_py: dict[int, list[int]] = {}

    def _keys(self, s: np.ndarray) -> np.ndarray:
        return self.sym[s].astype(np.int64) * self.width + self.sym[self.nxt[s]]

    def _allowed(self, s: np.ndarray, end: np.ndarray) -> np.ndarray:
        """May the symbols covering slots [s, end) merge (the morpheme rule)."""
        return (self.cuts_before[end] == self.cuts_before[s + 1]) | (self.run[s] & self.cut[end])

    def _pairs_at(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The allowed pairs starting at slots ``s`` (each with a right neighbour): their slots and keys."""
        s = s[self._allowed(s, self.nxt[self.nxt[s]])]
        return s, self._keys(s)

    def merge(self, left: int, right: int, new: int) -> tuple[list[int], list[int]]:
        """Merge every allowed occurrence of the pair into the symbol ``new``; returns the pairs whose
        counts changed and by how much (some by 0)."""
        key = left * self.width + right
        initial = self.initial_slots[:0]
        if left < self.initial_symbols and right < self.initial_symbols:
            lo, hi = np.searchsorted(self.initial_keys, (key, key + 1))
            initial = self.initial_slots[lo:hi]
        arrays, ints = self.added.get(key, ()), self.added_py.get(key, ())
        if len(initial) + sum(map(len, arrays)) + len(ints) >= VECTORISE_FROM:
            return self._merge_np(np.concatenate((initial, *arrays, np.array(ints, dtype=np.int32))), left, right, new)
        listed = initial.tolist()
        for a in arrays:
            listed += a.tolist()
        return self._merge_py(listed + list(ints), left, right, new)

    def _merge_py(self, listed: list[int], left: int, right: int, new: int) -> tuple[list[int], list[int]]:
        # _merge_np one occurrence at a time (the pair test written out: this is the hot loop)
        sym, nxt, prv = self.py_sym, self.py_nxt, self.py_prv
        cut, run, cuts_before, weight, width = self.py_cut, self.py_run, self.py_cuts_before, self.py_weight, self.width
        merged = []
        for s in listed:
            if sym[s] == left:
                r = nxt[s]
                if sym[r] == right:
                    e = nxt[r]
                    if cuts_before[e] == cuts_before[s + 1] or run[s] and cut[e]:
                        merged.append(s)
        if left == right and len(merged) > 1:
            merged = _every_other(np.array(sorted(merged), dtype=np.int32), self.nxt).tolist()
        else:
            merged.sort()
        # one occurrence after the other from the left: the pairs beside it lose it and gain ``new``;
        # an occurrence right after another sees that one's ``new`` (a b a b), as a merge from scratch
        # would, so the counts come out the same (a pair that comes and goes in between nets 0)
        delta: dict[int, int] = {}
        added = self.added_py

        def beside(t: int, end: int, lost: int, new_t: int, new_end: int, gained: int, w: int) -> None:
            """A neighbouring pair: ``lost`` at slots [t, end) goes, ``gained`` at [new_t, new_end) comes
            (each if the morpheme rule allows it)."""
            if cuts_before[end] == cuts_before[t + 1] or run[t] and cut[end]:
                delta[lost] = delta.get(lost, 0) - w
            if cuts_before[new_end] == cuts_before[new_t + 1] or run[new_t] and cut[new_end]:
                delta[gained] = delta.get(gained, 0) + w
                if (slots := added.get(gained)) is None:
                    added[gained] = [new_t]
                else:
                    slots.append(new_t)

        total = 0
        for s in merged:
            q = nxt[s]
            after = nxt[q]
            w = weight[s]
            total += w
            t = prv[s]
            if (x := sym[t]) >= 0:  # (x, left) at t becomes (x, new)
                beside(t, q, x * width + left, t, after, x * width + new, w)
            if (y := sym[after]) >= 0:  # (right, y) at q becomes (new, y) at s
                e = nxt[after]
                beside(q, e, right * width + y, s, e, new * width + y, w)
            sym[q] = -1
            nxt[s] = after
            prv[after] = s
            sym[s] = new
        k = left * width + right
        delta[k] = delta.get(k, 0) - total
        return list(delta), list(delta.values())

    def _merge_np(self, s: np.ndarray, left: int, right: int, new: int) -> tuple[list[int], list[int]]:
        sym, nxt, prv = self.sym, self.nxt, self.prv
        s = s[(sym[s] == left) & (sym[nxt[s]] == right)]
        s = s[self._allowed(s, nxt[nxt[s]])]
        if left == right and len(s) > 1:  # a run a a a: merged from its left, one pair in two
            s = _every_other(np.sort(s), nxt)
        q = nxt[s]
        after = nxt[q]
        before = prv[s]
        # the pairs at the left neighbour, the merged slot and the right one lose their occurrence ...
        old = np.unique(np.concatenate((before[sym[before] >= 0], s, q[sym[after] >= 0])))
        old_slots, old_keys = self._pairs_at(old)
        old_weights = self.weight[old_slots]
        sym[s] = new
        sym[q] = -1
        nxt[s] = after
        prv[after] = s
        # ... and those at the left neighbour and the merged slot are new (both hold ``new``)
        before = prv[s]
        fresh = np.unique(np.concatenate((before[sym[before] >= 0], s[sym[after] >= 0])))
        new_slots, new_keys = self._pairs_at(fresh)
        order = np.argsort(new_keys, kind="stable")
        new_keys, new_slots = new_keys[order], new_slots[order]
        bounds = (np.flatnonzero(new_keys[1:] != new_keys[:-1]) + 1).tolist()
        added = self.added
        for k, lo, hi in zip(new_keys[[0, *bounds]].tolist() if len(new_keys) else [], [0, *bounds],
                             [*bounds, len(new_keys)]):
            listed = added.get(k)
            if listed is None:
                added[k] = [new_slots[lo:hi]]
            else:
                listed.append(new_slots[lo:hi])
        keys = np.concatenate((old_keys, new_keys))
        weights = np.concatenate((-old_weights, self.weight[new_slots]))
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) if len(keys) else keys
        deltas = np.add.reduceat(weights[order], starts) if len(keys) else keys
        return keys[starts].tolist(), deltas.tolist()

    def forget(self, key: int) -> None:
        """The pair no longer occurs: drop its count and its listed slots."""
        del self.count[key]
        self.added.pop(key, None)
        self.added_py.pop(key, None)


def _shared(code: str, n: int, fill: int) -> tuple[np.ndarray, array]:
    """An :mod:`array` buffer of ``n`` items (``"b"``: booleans) and a numpy view on the same memory."""
    buf = array(code, [fill]) * n
    return np.frombuffer(buf, dtype=bool if code == "b" else buf.typecode), buf


def _every_other(s: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Of sorted occurrences of a pair (a, a), those merged from the left: one that starts where the
    previous merged one ends is taken by it."""
    out, taken = [], -1
    for p, q in zip(s.tolist(), nxt[s].tolist()):
        if p != taken:
            out.append(p)
            taken = q
    return np.array(out, dtype=np.int32)


def _codes(chars: np.ndarray, ids: Mapping[str, int]) -> np.ndarray:
    """Each code point's symbol id among the one-character ``ids``, -1 where there is none (a
    table indexed by code point: one gather, where a search per character cost ten times more)."""
    table = np.full(int(chars.max(initial=0)) + 1, -1, dtype=np.int64)
    for t, i in ids.items():
        if len(t) == 1 and ord(t) < len(table):
            table[ord(t)] = i
    return table[chars]
