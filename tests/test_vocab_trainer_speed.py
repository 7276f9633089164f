"""The WordPiece learner's pieces, pinned: a faster learner must give the very same pieces.

A seeded synthetic word table (Korean-like morphemes joined into words, with their cuts and
Zipf-like counts, many ties) learned under every rule, an alphabet cut short so that some words fall outside it; the pieces' digest is the learner's output
before its speed-up (issue 42), and the pieces also match the naive recount of test_vocab_sp.
"""

from __future__ import annotations

import hashlib
import random

import pytest

from kolectra.vocab import slots, trainer
from tests.test_vocab_sp import _naive_learn

SYLLABLES = [chr(0xAC00 + 28 * i) for i in range(0, 399, 9)] + ["했", "었", "는", "를", "에", "요"]


def synthetic_table(seed: int = 0, morphemes: int = 400, types: int = 6000) -> dict:
    """``types`` word types of 1-4 morphemes (each 1-3 syllables), cuts where morphemes meet, counts
    1 + a Pareto draw (most types rare, equal counts common, as in a corpus)."""
    rng = random.Random(seed)
    morphs = sorted({"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(morphemes)})
    table: dict = {}
    while len(table) < types:
        parts = [rng.choice(morphs) for _ in range(rng.randint(1, 4))]
        ends = [sum(map(len, parts[:i + 1])) for i in range(len(parts))]
        word = "".join(parts)
        table[(word, tuple(ends[:-1]))] = 1 + int(rng.paretovariate(1.2))
    table[("ab", ())] = 50  # Latin letters: outside a cut alphabet of Hangul
    return table


def learn(table: dict, rule: str | None, extra: int = 1500, limit: int = 40) -> tuple[list[str], dict]:
    initial, continuing = trainer.alphabet(table, limit)
    return trainer.learn_pieces(table, budget=len(initial) + len(continuing) + extra, initial=initial + continuing,
                                min_frequency=2, respect_morphs=rule is not None, cross_morph=rule or "prefix")


# sha256 of the pieces, one a line, from the learner as of commit b1e66cd (before issue 42's speed-up)
PINNED = {
    None: "2aefae7be172325ba825e451ad3ed3db75637783dd67b945d883638de405b715",
    "prefix": "30f7b1afa08adb6a1764f9e11ab27290cdf7b4bac9efeab42ebe414e9a3255d1",
    "any": "509400577f2c0d30925f4d9f567a49d7ef590621db2da6d49087a57fe89e18e1",
    "none": "055b681a1a907acadb6b67441b57f956e4ddd43e04f1fb4f043bfeeb6e1b2ead",
}


@pytest.mark.parametrize("rule", list(PINNED))
def test_pieces_are_those_of_the_learner_before(rule):
    pieces, stats = learn(synthetic_table(), rule)
    assert len(pieces) > 400 and stats["words_outside_alphabet"] > 50  # the alphabet's cut leaves words out
    assert hashlib.sha256("\n".join(pieces).encode()).hexdigest() == PINNED[rule]


@pytest.mark.parametrize("rule", [None, "prefix", "any"])
def test_pieces_match_a_naive_recount(rule):
    # the whole alphabet: the reference has no notion of words outside it
    table = synthetic_table(seed=1, morphemes=60, types=400)
    initial = sum(trainer.alphabet(table, 3000), [])
    assert learn(table, rule, extra=200, limit=3000)[0] == _naive_learn(table, initial, len(initial) + 200, 2, rule)


@pytest.mark.parametrize("vectorise_from", [0, 10**9])
@pytest.mark.parametrize("rule", list(PINNED))
def test_each_merge_path_alone_gives_the_pinned_pieces(rule, vectorise_from, monkeypatch):
    # every merge with numpy (0) or every merge in Python (10**9): the two paths agree on their own
    monkeypatch.setattr(slots, "VECTORISE_FROM", vectorise_from)
    pieces, _ = learn(synthetic_table(), rule)
    assert hashlib.sha256("\n".join(pieces).encode()).hexdigest() == PINNED[rule]
