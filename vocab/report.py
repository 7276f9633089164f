"""How well a vocabulary fits Korean: the figures of the vocab artifact's ``report.json``.

Stage: corpus -> **vocab** -> examples. Measured on held-out documents (the corpus's ``valid``
split, else ``train``) with the exported tokenizers themselves, every recipe in one pass:

- ``unk_rate``: share of tokens that are [UNK]; ``unk_word_rate``: share of words lost to [UNK];
- ``tokens_per_eojeol``: tokens per whitespace-separated eojeol (sequence-length cost);
- ``chars_per_token``: non-space characters per token;
- ``morph_boundary_share``: of the cuts WordPiece makes *inside* a word, the share that fall on
  a stored morpheme boundary (punctuation splits by the pre-tokeniser are not counted);
- ``words_kept_whole``: share of words (pre-tokeniser units: an eojeol minus its punctuation)
  that are a single piece;
- ``most_fragmented``: among the most frequent words (seen twice or more), those cut into the
  most pieces.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Iterable, Mapping

from tokenizers import Tokenizer

from vocab.words import morph_cuts

BATCH_DOCS = 256


class _Tally:
    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.unk_id = tok.token_to_id("[UNK]")
        self.tokens = self.unk = self.words = self.whole = self.unk_words = 0
        self.cuts = self.cuts_on_morph = 0

    def add(self, texts: list[str], cuts: list[list[int]]) -> list:
        encodings = self.tok.encode_batch(texts, add_special_tokens=False)
        for doc_cuts, enc in zip(cuts, encodings):
            ids, offsets, word_ids = enc.ids, enc.offsets, enc.word_ids
            self.tokens += len(ids)
            self.unk += sum(1 for i in ids if i == self.unk_id)
            prev = None
            for k, w in enumerate(word_ids):
                if w != prev:
                    self.words += 1
                    single = k + 1 == len(word_ids) or word_ids[k + 1] != w
                    if single:
                        if ids[k] == self.unk_id:
                            self.unk_words += 1
                        else:
                            self.whole += 1
                else:
                    self.cuts += 1
                    at = offsets[k][0]
                    j = bisect.bisect_left(doc_cuts, at)
                    self.cuts_on_morph += j < len(doc_cuts) and doc_cuts[j] == at
                prev = w
        return encodings

    def figures(self, eojeols: int, chars: int) -> dict:
        def ratio(a: int, b: int) -> float:
            return round(a / b, 4) if b else 0.0

        return {
            "tokens": self.tokens,
            "unk_rate": ratio(self.unk, self.tokens),
            "unk_word_rate": ratio(self.unk_words, self.words),
            "tokens_per_eojeol": ratio(self.tokens, eojeols),
            "chars_per_token": ratio(chars, self.tokens),
            "morph_boundary_share": ratio(self.cuts_on_morph, self.cuts),
            "words_kept_whole": ratio(self.whole, self.words),
        }


def _fragmented(tok: Tokenizer, freq: Counter, top: int, show: int) -> list[dict]:
    # words seen at least twice: hapaxes (dates, typos, run-together reviews) say little about the vocab
    frequent = sorted(((w, n) for w, n in freq.items() if n >= 2), key=lambda kv: (-kv[1], kv[0]))[:top]
    rows = []
    for word, n in frequent:
        pieces = tok.encode(word, add_special_tokens=False).tokens
        rows.append({"word": word, "count": n, "pieces": pieces})
    rows.sort(key=lambda r: (-len(r["pieces"]), -r["count"], r["word"]))
    return rows[:show]


def measure(tokenizers: Mapping[str, Tokenizer], docs: Iterable[dict], *, top_words: int = 2000,
            show_words: int = 20) -> dict:
    """One pass over ``docs``: the figures above for each named tokenizer."""
    tallies = {name: _Tally(tok) for name, tok in tokenizers.items()}
    freq: Counter = Counter()
    n_docs = eojeols = chars = 0
    batch_texts: list[str] = []
    batch_cuts: list[list[int]] = []

    def flush() -> None:
        encodings = [t.add(batch_texts, batch_cuts) for t in tallies.values()][0]
        for enc, text in zip(encodings, batch_texts):
            # word frequencies by the pre-tokeniser's words (the same for every recipe)
            spans: dict[int, list[int]] = {}
            for w, (s, e) in zip(enc.word_ids, enc.offsets):
                spans.setdefault(w, [s, e])[1] = e
            freq.update(text[s:e] for s, e in spans.values())
        batch_texts.clear()
        batch_cuts.clear()

    for doc in docs:
        text = doc["text"]
        n_docs += 1
        eojeols += len(text.split())
        chars += sum(1 for ch in text if not ch.isspace())
        batch_texts.append(text)
        batch_cuts.append(morph_cuts(doc))
        if len(batch_texts) >= BATCH_DOCS:
            flush()
    if batch_texts:
        flush()
    out = {"documents": n_docs, "eojeols": eojeols, "chars": chars, "recipes": {}}
    for name, t in tallies.items():
        fig = t.figures(eojeols, chars)
        fig["most_fragmented"] = _fragmented(t.tok, freq, top_words, show_words)
        out["recipes"][name] = fig
    return out
