"""The examples' stats reconcile the text's tokens: every token of the corpus's sentences is either in
a sequence (``sequence_text_tokens``, the rows' tokens other than [PAD], [CLS] and [SEP]) or cut off a
sentence longer than a sequence (``truncated_tokens``), in every packing. Before, ``stats.json`` counted
the sentences cut and not their tokens: a document of one long sentence without boundaries lost most of
its tokens while the share of sentences cut stayed under the warning's bound, without a word.
The vocab is ``tests/test_examples.py``'s fixture's (the real vocab stage on a real Kiwi corpus)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from tokenizers import Tokenizer

from kolectra.core.config import override
from kolectra.corpus import shards
from kolectra.corpus.examples import TRUNCATED_TOKENS_WARN, TRUNCATED_WARN, build, truncation_warning
from kolectra.corpus.packing import CLS, PAD, SEP
from tests.test_examples import CFG, _load, inputs  # noqa: F401 - inputs is a fixture
from tests.test_vocab_corpus import documents, korean_sentences, write_corpus

LENGTH = 128  # no sentence of the fixture's is this long: only the long one is cut


@pytest.fixture(scope="module")
def long_corpus(inputs):
    """The fixture's kind of documents, plus one of a single sentence of 60 sentences' text (no
    boundary between them, as in a table or a list), an empty one, one of an empty sentence and a short
    one, and one spelling special tokens (text: tokenised as text)."""
    docs = documents(korean_sentences(150, seed=1), random.Random(1), 7)
    long = " ".join(korean_sentences(60, seed=7))
    docs[5:5] = [[long], [], ["", "짧은 문장입니다."], ["[CLS] [SEP] [MASK] 漢字 🙂"]]
    return write_corpus(inputs["root"] / "long_corpus", {"train": docs})


def _expected(corpus, vocab) -> tuple[int, int, int]:
    """(text tokens, tokens past the sequence's text limit, sentences cut), from the tokenizer alone."""
    tok = Tokenizer.from_file(str(vocab / "tokenizer.json"))
    tok.encode_special_tokens = True  # as the stage reads text
    lens = [len(e.ids) for d in shards.iter_documents(corpus, "train")
            for e in tok.encode_batch(shards.sentences(d), add_special_tokens=False)]
    limit = LENGTH - 3
    return sum(lens), sum(max(0, n - limit) for n in lens), sum(n > limit for n in lens)


@pytest.mark.parametrize("packing", ["isolated", "none", "stream"])
def test_the_text_tokens_are_the_sequences_tokens_and_the_tokens_cut(inputs, long_corpus, packing, capsys):
    out = inputs["root"] / f"long_{packing}"
    out.mkdir()
    stats = build(override(CFG, [f"max_seq_length={LENGTH}", f"packing={packing}"]), long_corpus, inputs["vocab"],
                  out).stats
    text, lost, cut = _expected(long_corpus, inputs["vocab"])
    _, ids, _ = _load(out)
    in_rows = int(np.isin(ids, [PAD, CLS, SEP], invert=True).sum())  # [UNK] and [MASK] are text's tokens
    assert stats["text_tokens"] == text
    assert stats["truncated_tokens"] == lost > text // 5 and stats["truncated_sentences"] == cut == 1
    assert stats["sequence_text_tokens"] == in_rows == text - lost
    assert stats["truncated_token_share"] == round(lost / text, 6)
    # the sentences' share alone stays under its bound: the tokens' share is what warns
    assert cut / stats["sentences"] <= TRUNCATED_WARN < lost / text
    line = next(x for x in capsys.readouterr().err.splitlines() if "were cut" in x)
    assert line.endswith(
        f"WARNING: examples: {cut / stats['sentences']:.1%} of the sentences ({cut} of {stats['sentences']}) were "
        f"longer than a sequence of {LENGTH} tokens and were cut: their ends, {lost / text:.0%} of the text's tokens "
        f"({lost:,} of {text:,}), are never trained on (a longer --max-seq-length keeps them)"), line


def test_either_share_above_its_bound_warns_and_says_both():
    few = {"truncated_sentences": 3, "sentences": 3_000, "text_tokens": 60_000}
    said = truncation_warning({**few, "truncated_tokens": 40_000}, 128)
    assert said == ("examples: 0.1% of the sentences (3 of 3,000) were longer than a sequence of 128 tokens and were "
                    "cut: their ends, 67% of the text's tokens (40,000 of 60,000), are never trained on (a longer "
                    "--max-seq-length keeps them)")
    assert TRUNCATED_TOKENS_WARN == TRUNCATED_WARN == 0.05
    assert truncation_warning({**few, "truncated_tokens": 3_000}, 128) is None  # 5 %: at the bound, not above
    assert truncation_warning({**few, "truncated_tokens": 3_001}, 128) is not None
    many = {"truncated_sentences": 2_200, "sentences": 10_000, "text_tokens": 200_000, "truncated_tokens": 4_000}
    assert "were cut: their ends, 2.0% of the text's tokens (4,000 of 200,000), are" in truncation_warning(many, 16)
