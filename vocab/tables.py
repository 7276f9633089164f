"""The word count's mergeable parts, pure: word-type keys, the exact character table, the running
totals and the k most frequent types.

Stage: corpus -> **vocab** -> examples; the Beam job of :mod:`vocab.count` combines these. Every
merge here is associative and commutative and every cut is by a total order (count, then key), so
the result does not depend on how the corpus was split among workers or in which order their
parts were added.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from kolectra.vocab.words import WordType

PREFIX = "##"  # a character's key in the character table for its occurrences in words of 2+ characters
KEEP_BAD = 20  # bad documents named in the error (all of them are counted)


def type_key(word: WordType) -> str:
    """``(text, cuts)`` as one string, ``text`` then the cuts: words never hold whitespace (the
    runtime pre-tokeniser splits on it), so a space separates them and the key is cheap to shuffle."""
    text, cuts = word
    return text + " " + ",".join(map(str, cuts)) if cuts else text


def word_type(key: str) -> WordType:
    text, _, cuts = key.partition(" ")
    return text, tuple(int(c) for c in cuts.split(",")) if cuts else ()


def char_counts(table: Mapping[WordType, int]) -> Counter:
    """Each character's occurrences in the table's words (weighted by count), and under ``##c``
    those in words of more than one character (where a ``##`` form can be needed). Words are grouped by count: one C-speed Counter over each group's
    joined text (most of a corpus's types occur once or twice), not a Python step per character."""
    by_count: dict[int, list[str]] = {}
    for (word, _), n in table.items():
        by_count.setdefault(n, []).append(word)
    out: Counter = Counter()
    for n, group in by_count.items():
        for ch, k in Counter("".join(group)).items():
            out[ch] += k * n
        for ch, k in Counter("".join(w for w in group if len(w) > 1)).items():
            out[PREFIX + ch] += k * n
    return out


def totals(tallies: Mapping[str, int], chars: Counter, bad: Iterable[str] = (), bad_documents: int | None = None) -> dict:
    """One part of the job's totals: counters, the character table, the bad documents' messages
    (``bad_documents`` of them, all of ``bad`` when not given)."""
    bad = sorted(bad)
    return {"tallies": Counter(tallies), "chars": chars, "bad": bad[:KEEP_BAD],
            "bad_documents": len(bad) if bad_documents is None else bad_documents}


def add_totals(parts: Iterable[dict]) -> dict:
    """The parts' totals summed; the bad documents named are the first :data:`KEEP_BAD` by text."""
    out = totals({}, Counter())
    bad: list[str] = []
    for part in parts:
        out["tallies"].update(part["tallies"])
        out["chars"].update(part["chars"])
        out["bad_documents"] += part["bad_documents"]
        bad = sorted(bad + part["bad"])[:KEEP_BAD]
    out["bad"] = bad
    return out


def most_frequent(pairs: Iterable[tuple[str, int]], k: int) -> list[tuple[str, int]]:
    """The ``k`` pairs of highest count, ties by key: a total order, so any split of the pairs gives
    the same ``k``."""
    return sorted(pairs, key=lambda p: (-p[1], p[0]))[:k]


class TopTypes:
    """The ``k`` most frequent word types of the pairs added (each type added once, with its
    total), how many types and occurrences were added in all. At most ``2 k`` pairs are held:
    past that the list is cut back to ``k`` (:func:`most_frequent`)."""

    def __init__(self, k: int):
        self.k = k
        self.pairs: list[tuple[str, int]] = []
        self.types = 0
        self.words = 0

    def add(self, pairs: Iterable[tuple[str, int]]) -> "TopTypes":
        for key, n in pairs:
            self.pairs.append((key, n))
            self.types += 1
            self.words += n
            if len(self.pairs) > 2 * self.k:
                self.pairs = most_frequent(self.pairs, self.k)
        return self

    def merge(self, other: "TopTypes") -> "TopTypes":
        self.pairs = most_frequent(self.pairs + other.pairs, self.k)
        self.types += other.types
        self.words += other.words
        return self

    def result(self) -> list[tuple[str, int]]:
        return most_frequent(self.pairs, self.k)
