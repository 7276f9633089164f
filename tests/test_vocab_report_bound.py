"""The vocab report's word frequencies, bounded by ``report_max_word_types`` (vocab/report.py).

Exact by default: the held-out split's every word type counted, the report's bytes as before. With
the setting, the table behind ``most_fragmented`` holds at most that many types (web text's
held-out split of a large corpus holds tens of millions), the pruning said in report.json."""

from __future__ import annotations

import random

import pytest

from kolectra.core.config import ConfigError
from kolectra.vocab import export, report
from kolectra.vocab.config import VocabConfig

FREQUENT = ["영화를", "재밌었다", "배우들이", "감독은"]


def documents(n: int = 200, seed: int = 5) -> list[dict]:
    """Each document: the frequent words, then 30 random 4-syllable words seen once."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        rare = ["".join(chr(0xAC00 + rng.randrange(11172)) for _ in range(4)) for _ in range(30)]
        docs.append({"id": str(i), "text": " ".join(FREQUENT + rare), "morphs": []})
    return docs


def tokenizer():
    chars = sorted({c for w in FREQUENT for c in w})
    return export.make_tokenizer(export.assemble(0, chars, ["##" + c for c in chars], []))


def test_exact_by_default_and_bounded_with_the_setting():
    tok = tokenizer()
    exact = report.measure({"r": tok}, iter(documents()), top_words=100, show_words=10)
    assert "word_frequencies_pruned" not in exact
    bounded = report.measure({"r": tok}, iter(documents()), top_words=100, show_words=10, max_word_types=1000)
    assert bounded["word_frequencies_pruned"]["max_word_types"] == 1000
    assert bounded["word_frequencies_pruned"]["types"] >= 6000 - 1000
    # the frequent words are counted in every document: the list is the exact one
    assert bounded["recipes"]["r"]["most_fragmented"] == exact["recipes"]["r"]["most_fragmented"]
    assert [r["word"] for r in exact["recipes"]["r"]["most_fragmented"]] == sorted(FREQUENT, key=lambda w: (-len(w), w))
    under = report.measure({"r": tok}, iter(documents()), top_words=100, show_words=10, max_word_types=10**6)
    assert under == exact


@pytest.mark.parametrize("value", [1, 999, -5])
def test_the_setting_is_0_or_at_least_1000(value):
    with pytest.raises(ConfigError, match="report_max_word_types: 0 .every type. or at least 1000"):
        VocabConfig(report_max_word_types=value).validate()
    VocabConfig(report_max_word_types=0).validate()
    VocabConfig(report_max_word_types=1000).validate()
