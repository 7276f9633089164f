"""The runtime text pipeline and the corpus word table the vocab learner trains on.

Stage: corpus -> **vocab** -> examples. The exported tokenizer is a plain BERT-style pipeline
(:func:`runtime_normalizer`, :func:`runtime_pre_tokenizer`, then WordPiece), with no morpheme
analyser at run time. To learn pieces that fit that pipeline, the corpus text goes through the very
same normaliser and pre-tokeniser, and each resulting *word* (an eojeol with its punctuation split
off) keeps the morpheme boundaries the corpus stage stored for it — Kiwi is never run again here.

A word type is ``(text, cuts)``: ``cuts`` are the offsets inside the word (0 < cut < len) where a
stored morpheme starts or ends. Kiwi's surface spans may overlap where morphemes fuse into one
syllable (했 = 하+었); taking every start and end as a cut handles that: the fused syllable is then
one indivisible unit.
"""

from __future__ import annotations

import bisect
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

from tokenizers import PreTokenizedString, normalizers, pre_tokenizers

from kolectra.core import bars
from kolectra.core.errors import UserInputError
from kolectra.corpus import shards

WordType = tuple[str, tuple[int, ...]]


def runtime_normalizer() -> normalizers.Normalizer:
    # NFC first: the corpus stage stores NFC, so every piece is composed Hangul; text given decomposed
    # (NFD, as files written on macOS often are) reached WordPiece as conjoining jamo no vocabulary
    # learned here holds, and every such word was [UNK]. NFC, never NFKC (that would fold widths and
    # compatibility characters, which the corpus stage rules on). Cased and no accent stripping:
    # lowercasing/stripping NFD-decomposes Hangul syllables into jamo.
    return normalizers.Sequence([
        normalizers.NFC(),
        normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=False),
    ])


def runtime_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.BertPreTokenizer()


class WordSplitter:
    """Text -> the runtime pipeline's words, with char offsets into the original text."""

    def __init__(self) -> None:
        self._normalizer = runtime_normalizer()
        self._pre_tokenizer = runtime_pre_tokenizer()

    def __call__(self, text: str) -> list[tuple[str, int, int]]:
        return [(w, s, e) for w, (s, e), _ in self.splits(text)]

    def splits(self, text: str) -> list[tuple[str, tuple[int, int], None]]:
        """The words as ``tokenizers`` returns them, ``(word, (start, end), None)``: for hot loops."""
        pts = PreTokenizedString(text)
        pts.normalize(self._normalizer.normalize)
        self._pre_tokenizer.pre_tokenize(pts)
        return pts.get_splits(offset_referential="original", offset_type="char")


def morph_cuts(doc: dict, where: str = "") -> list[int]:
    """Sorted, distinct offsets where a stored morpheme starts or ends.

    Zero-width spans (Kiwi's elided copula 이 in 제주도라서) carry no surface and are skipped.
    """
    try:
        cuts = set()
        for m in doc["morphs"]:
            s, e = int(m[0]), int(m[1])
            if e > s:
                cuts.update((s, e))
        return sorted(cuts)
    except (KeyError, TypeError, IndexError, ValueError) as e:
        raise UserInputError(f"{where}document {doc.get('id', '?')!r}: bad or missing 'morphs' ({e!r})") from None


def doc_words(doc: dict, splitter: WordSplitter, where: str = "") -> tuple[list[WordType], int]:
    """The document's words with their internal morpheme cuts, and how many did not align.

    A word whose normalised text differs from its original span (a control character removed,
    say) cannot carry offsets over; it gets no cuts and is counted as unaligned.
    """
    text = doc["text"]
    cuts = morph_cuts(doc, where)
    out: list[WordType] = []
    unaligned = 0
    for word, (s, e), _ in splitter.splits(text):
        if text[s:e] != word:
            out.append((word, ()))
            unaligned += 1
            continue
        lo = bisect.bisect_right(cuts, s)
        hi = bisect.bisect_left(cuts, e)
        out.append((word, tuple([c - s for c in cuts[lo:hi]]) if hi > lo else ()))
    return out, unaligned


def iter_docs(corpus_dir: Path, split: str, desc: str | None = None) -> Iterator[dict]:
    """The split's documents, checked to have text; with ``desc``, under a progress bar (:mod:`core.bars`)."""
    docs, where = shards.iter_documents(corpus_dir, split), f"{corpus_dir}: {split}"
    if not desc:
        yield from checked(docs, where)
        return
    with doc_bar(desc, shards.document_count(corpus_dir, split)) as bar:
        yield from checked(docs, where, bar)


def doc_bar(desc: str, total: int | None) -> bars.Bar:
    """A progress bar over documents (a line every tenth of ``total``, or every 100,000 without one)."""
    return bars.Bar(desc, total, "doc", every=max(1, total // 10) if total else 100_000, min_seconds=bars.QUIET_SECONDS)


def checked(docs: Iterable[dict], where: str, bar: bars.Bar | None = None) -> Iterator[dict]:
    """``docs``, each checked to have text; each one advances ``bar`` when given."""
    for doc in docs:
        if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
            raise UserInputError(f"{where} document without a 'text' string: {str(doc)[:80]}")
        yield doc
        if bar is not None:
            bar.advance()


def prune(table: Counter, keep: int) -> tuple[int, int]:
    """Drop the rarest types (count <= 1, then <= 2, ...) until at most ``keep`` remain.

    Returns (types, occurrences) dropped. The word2vec-style "reduce vocab" step: it bounds memory
    by the number of distinct words whatever the corpus size; a pruned word seen again later
    starts from zero, so counts of rare words are lower bounds. Deterministic: it depends only
    on the documents' order.
    """
    types = occurrences = 0
    floor = 1
    while len(table) > keep:
        drop = [w for w, n in table.items() if n <= floor]
        for w in drop:
            occurrences += table.pop(w)
        types += len(drop)
        floor += 1
    return types, occurrences


def count_words(docs: Iterable[dict], max_word_types: int | None = None) -> tuple[Counter, dict]:
    """Stream documents into a word-type table ``{(word, cuts): count}`` and counters.

    Only the table grows with the corpus (by distinct words); past ``max_word_types`` it is
    pruned to 3/4 of that (:func:`prune`) and the drops are counted.
    """
    splitter = WordSplitter()
    table: Counter = Counter()
    n_docs = n_words = unaligned = pruned_types = pruned_words = prunes = 0
    for doc in docs:
        n_docs += 1
        found, missed = doc_words(doc, splitter)
        table.update(found)  # a list, not a Python step a word: Counter counts it in C
        n_words += len(found)
        unaligned += missed
        if max_word_types and len(table) > max_word_types:
            t, o = prune(table, max_word_types * 3 // 4)
            pruned_types, pruned_words, prunes = pruned_types + t, pruned_words + o, prunes + 1
    return table, {"documents": n_docs, "words": n_words, "word_types": len(table), "words_unaligned": unaligned,
                   "table_prunes": prunes, "word_types_pruned": pruned_types, "words_pruned": pruned_words}


def eval_split(corpus_dir: Path) -> str:
    """The split a report measures on: ``valid``, or ``train`` when the corpus has no valid docs."""
    for _ in shards.iter_documents(corpus_dir, "valid"):
        return "valid"
    return "train"
