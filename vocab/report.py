"""How well a vocabulary fits Korean: the figures of the vocab artifact's ``report.json``.

Stage: corpus -> **vocab** -> examples. Measured on held-out documents (the corpus's ``valid``
split, else ``train``) with the exported tokenizers themselves, every recipe in one pass.

"Words" are the runtime BERT pre-tokeniser's units (an eojeol with its punctuation split off) for
every recipe, so WordPiece and SentencePiece are measured on the same units: a *cut* is a token
that starts strictly inside such a word (a SentencePiece ``▁`` or a split before punctuation is
not a cut; byte-fallback tokens of one character make one cut).

- ``unk_rate``: share of tokens that are [UNK]; ``unk_word_rate``: share of words touched by [UNK];
- ``tokens_per_eojeol``: tokens per whitespace-separated eojeol (sequence-length cost);
- ``chars_per_token``: non-space characters per token;
- ``morph_boundary_share``: share of cuts that fall on a stored morpheme boundary;
- ``words_kept_whole``: share of words with no cut and no [UNK];
- ``most_fragmented``: among the ``report_top_words`` most frequent words (seen twice or more),
  those cut into the most pieces (words kept whole are left out).
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Iterable, Mapping

from tokenizers import Tokenizer

from kolectra.vocab.words import WordSplitter, morph_cuts, prune

BATCH_DOCS = 256


class _Tally:
    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self.unk_id = tok.token_to_id("[UNK]")
        self.tokens = self.unk = self.words = self.whole = self.unk_words = 0
        self.cuts = self.cuts_on_morph = 0

    def add(self, texts: list[str], cuts: list[list[int]], spans: list[tuple[list[int], list[int]]]) -> None:
        encodings = self.tok.encode_batch(texts, add_special_tokens=False)
        for doc_cuts, (starts, ends), enc in zip(cuts, spans, encodings):
            ids = enc.ids
            self.tokens += len(ids)
            self.words += len(starts)
            cut_words: set[int] = set()
            unk_words: set[int] = set()
            seen: set[int] = set()
            for i, (at, _) in zip(ids, enc.offsets):
                j = bisect.bisect_right(starts, at) - 1
                inside = j >= 0 and at < ends[j]
                if i == self.unk_id:
                    self.unk += 1
                    if inside:
                        unk_words.add(j)
                if inside and at > starts[j] and at not in seen:
                    seen.add(at)
                    cut_words.add(j)
                    self.cuts += 1
                    k = bisect.bisect_left(doc_cuts, at)
                    self.cuts_on_morph += k < len(doc_cuts) and doc_cuts[k] == at
            self.unk_words += len(unk_words)
            self.whole += len(starts) - len(cut_words | unk_words)

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
    encodings = tok.encode_batch([w for w, _ in frequent], add_special_tokens=False) if frequent else []
    rows = [{"word": word, "count": n, "pieces": enc.tokens}
            for (word, n), enc in zip(frequent, encodings) if len(enc.tokens) > 1]  # whole words are not news
    rows.sort(key=lambda r: (-len(r["pieces"]), -r["count"], r["word"]))
    return rows[:show]


def measure(tokenizers: Mapping[str, Tokenizer], docs: Iterable[dict], *, top_words: int = 2000,
            show_words: int = 20, max_word_types: int | None = None) -> dict:
    """One pass over ``docs``: the figures above for each named tokenizer. The word frequencies
    behind ``most_fragmented`` hold at most ``max_word_types`` types (:func:`vocab.words.prune`
    past it, the types and occurrences dropped counted in ``word_frequencies_pruned``)."""
    tallies = {name: _Tally(tok) for name, tok in tokenizers.items()}
    splitter = WordSplitter()
    freq: Counter = Counter()
    n_docs = eojeols = chars = 0
    pruned: dict = {}
    batch_texts: list[str] = []
    batch_cuts: list[list[int]] = []
    batch_spans: list[tuple[list[int], list[int]]] = []

    def flush() -> None:
        for t in tallies.values():
            t.add(batch_texts, batch_cuts, batch_spans)
        batch_texts.clear()
        batch_cuts.clear()
        batch_spans.clear()

    for doc in docs:
        text = doc["text"]
        n_docs += 1
        eojeols += len(text.split())
        chars += sum(1 for ch in text if not ch.isspace())
        words = splitter(text)
        freq.update(text[s:e] for _, s, e in words)
        if max_word_types and len(freq) > max_word_types:
            types, occurrences = prune(freq, max_word_types * 3 // 4)
            pruned = {"types": pruned.get("types", 0) + types, "words": pruned.get("words", 0) + occurrences}
        batch_texts.append(text)
        batch_cuts.append(morph_cuts(doc))
        batch_spans.append(([s for _, s, _ in words], [e for _, _, e in words]))
        if len(batch_texts) >= BATCH_DOCS:
            flush()
    if batch_texts:
        flush()
    out = {"documents": n_docs, "eojeols": eojeols, "chars": chars, "recipes": {}}
    if pruned:  # only then: a report under the bound keeps its bytes
        out["word_frequencies_pruned"] = {"max_word_types": max_word_types, **pruned}
    for name, t in tallies.items():
        fig = t.figures(eojeols, chars)
        fig["most_fragmented"] = _fragmented(t.tok, freq, top_words, show_words)
        out["recipes"][name] = fig
    return out
