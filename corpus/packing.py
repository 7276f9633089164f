"""The examples stage's pure core: ELECTRA's sequences of a document, how they fill the rows of the
examples artifact, and the stage's statistics.

A *sequence* is what ELECTRA calls an example: ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` cut
from one document (:func:`pack_document`). A *row* is one line of the artifact, ``max_seq_length``
tokens, what the pretraining loader calls an example. How sequences become rows is the config's
``packing`` (see :mod:`kolectra.corpus.examples_config`):

- ``isolated`` (default): several sequences share a row, each keeping its own [CLS] and [SEP]s
  and segment ids; ``doc_ids`` numbers them within the row (1, 2, ...; 0 = padding) so the model
  lets each attend only within itself and restarts positions at its [CLS]. Rows are filled by
  best-fit decreasing (:func:`fill_rows`).
- ``none``: one sequence per row, the rest padding (ELECTRA as published).
- ``stream``: one sequence per row cut from the shard's documents read as one stream
  (RoBERTa's FULL-SENTENCES); ``doc_ids`` is 1 on every real token, so attention crosses documents.

Sequences travel between the Beam steps as :class:`Sequences`, flat columnar arrays (a few bytes
a token, no padding) rather than padded rows. No I/O and no Beam: :mod:`corpus.examples_beam`
runs these functions on workers; :mod:`corpus.examples_format` writes the rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import numpy as np

from kolectra.core.tokens import SPECIAL_IDS
from kolectra.corpus.examples_config import MIN_TARGET, ExamplesConfig

PAD, CLS, SEP = SPECIAL_IDS["[PAD]"], SPECIAL_IDS["[CLS]"], SPECIAL_IDS["[SEP]"]
MIN_SEQUENCE = 3  # [CLS] x [SEP]: segment A is never empty


class DocRng:
    """A document's own random stream: SHA-256 of (seed, document id), then of (that digest,
    counter), each digest giving four 64-bit draws.

    ELECTRA's recipe needs two or three draws for a short document. ``random.Random`` seeded per
    document spends most of its cost on seeding (Mersenne Twister's 624-word state), which for a
    one-sentence review outweighed everything else packing does (``benchmarks/examples.py``,
    profiled); a hash stream costs one digest per four draws. ``random`` has 53 bits;
    ``randint`` maps 64 bits by multiply-shift (bias below 2**-60 for these ranges).
    """

    __slots__ = ("_key", "_block", "_words")
    WORDS = "<4Q"  # little-endian whatever the host: the same artifact id means the same bytes anywhere

    def __init__(self, seed: int, doc_id: str):
        self._key = hashlib.sha256(f"{seed}\x00{doc_id}".encode("utf-8")).digest()
        self._block = 0
        self._words = list(struct.unpack(self.WORDS, self._key))

    def _next(self) -> int:
        if not self._words:
            self._block += 1
            digest = hashlib.sha256(self._key + self._block.to_bytes(8, "little")).digest()
            self._words = list(struct.unpack(self.WORDS, digest))
        return self._words.pop()

    def random(self) -> float:
        return (self._next() >> 11) * (1.0 / (1 << 53))

    def randint(self, a: int, b: int) -> int:
        return a + ((self._next() * (b - a + 1)) >> 64)


def doc_rng(seed: int, doc_id: str) -> DocRng:
    return DocRng(seed, doc_id)


def _target(rng: DocRng | random.Random, cfg: ExamplesConfig) -> int:
    if rng.random() < cfg.short_seq_prob:
        return rng.randint(MIN_TARGET, cfg.max_seq_length)
    return cfg.max_seq_length


class Cuts(NamedTuple):
    """What truncation threw away: the sentences longer than a sequence, and their tokens past its end
    (never trained on). With them the text's tokens reconcile: every token of a sentence is in a
    sequence or counted here (an empty sentence has none)."""

    sentences: int = 0
    tokens: int = 0


def pack_document(sentences: list[list[int]], cfg: ExamplesConfig,
                  rng: DocRng | random.Random) -> tuple[list[tuple[list[int], list[int]]], Cuts]:
    """One document's sentence ids -> ``[(A, B), ...]`` segment pairs (B may be empty), truncations
    (:func:`cut_pairs`' pairs, as a list)."""
    out: list[tuple[list[int], list[int]]] = []
    return out, cut_pairs(sentences, cfg, rng, out.append)


def cut_pairs(sentences: Iterable[list[int]], cfg: ExamplesConfig, rng: DocRng | random.Random,
              sink: Callable[[tuple[list[int], list[int]]], None]) -> Cuts:
    """Sentence ids -> ``(A, B)`` segment pairs (B may be empty), each handed to ``sink`` as it is
    cut; returns the truncations (:class:`Cuts`). So a stream of a whole shard (``packing=stream``)
    is never a list (a callback, not a generator: a generator cost a short document 3 µs more, about 50 %).

    Sentences are added to the current chunk while its text fits ``target - 3`` tokens (room for
    [CLS] and two [SEP]); then the chunk becomes a sequence and a new target is drawn. A sentence
    longer than ``max_seq_length - 3`` alone is cut to that length and counted, with the tokens it
    loses; no other token of a sentence is left out. The A/B split is at
    a uniformly random sentence boundary of the chunk (BERT); a chunk of one sentence, or with
    probability ``single_segment_prob``, is a single segment A.
    """
    limit = cfg.max_seq_length - 3
    truncated = lost = 0
    chunk: list[list[int]] = []
    length = 0
    target = _target(rng, cfg)

    def emit() -> None:
        if len(chunk) == 1 or rng.random() < cfg.single_segment_prob:
            sink(([t for s in chunk for t in s], []))
        else:
            k = rng.randint(1, len(chunk) - 1)
            sink(([t for s in chunk[:k] for t in s], [t for s in chunk[k:] for t in s]))

    for sent in sentences:
        if not len(sent):
            continue
        if len(sent) > limit:
            lost += len(sent) - limit
            sent = sent[:limit]
            truncated += 1
        if chunk and length + len(sent) > target - 3:
            emit()
            chunk, length, target = [], 0, _target(rng, cfg)
        chunk.append(sent)
        length += len(sent)
    if chunk:
        emit()
    return Cuts(truncated, lost)


# ---- sequences as flat arrays ---------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Sequences:
    """ELECTRA sequences as columns: sequence ``u`` is example ``k_U[u]`` of the document on line
    ``line_U[u]`` of its corpus shard; its A then B tokens lie in ``tokens_T``, in sequence order."""

    line_U: np.ndarray  # int64
    k_U: np.ndarray  # int32
    a_U: np.ndarray  # int32, tokens of segment A
    b_U: np.ndarray  # int32, tokens of segment B (0: one segment)
    tokens_T: np.ndarray  # the artifact's id dtype (uint16 for most vocabularies): half the bytes to move

    @staticmethod
    def from_pairs(pairs: list[tuple[list[int], list[int]]], lines: list[int], ks: list[int],
                   dtype: np.dtype = np.dtype(np.int32)) -> "Sequences":
        a = np.fromiter((len(p[0]) for p in pairs), np.int32, len(pairs))
        b = np.fromiter((len(p[1]) for p in pairs), np.int32, len(pairs))
        tokens = np.fromiter((t for p in pairs for seg in p for t in seg), dtype, int(a.sum() + b.sum()))
        return Sequences(np.asarray(lines, np.int64), np.asarray(ks, np.int32), a, b, tokens)

    @staticmethod
    def from_stream(sentences: Iterable[list[int]], cfg: ExamplesConfig, rng: DocRng | random.Random,
                    dtype: np.dtype) -> tuple["Sequences", Cuts]:
        """A whole stream's sentence ids -> its sequences (:func:`cut_pairs`), numbered 0, 1, ...
        (``line_U``), made into arrays :data:`BLOCK_PAIRS` pairs at a time (the lists are a block's,
        never a shard's); and the truncations (:class:`Cuts`)."""
        blocks, block = [], []

        def flush() -> None:
            first = len(blocks) * BLOCK_PAIRS  # every block before this one is full
            blocks.append(Sequences.from_pairs(block, range(first, first + len(block)), [0] * len(block), dtype))
            block.clear()

        def add(pair: tuple[list[int], list[int]]) -> None:
            block.append(pair)
            if len(block) == BLOCK_PAIRS:
                flush()

        truncated = cut_pairs(sentences, cfg, rng, add)
        flush()
        return Sequences.concat(blocks), truncated

    @staticmethod
    def concat(blocks: list["Sequences"]) -> "Sequences":
        if not blocks:
            return Sequences.from_pairs([], [], [])
        return Sequences(*(np.concatenate([getattr(s, f.name) for s in blocks]) for f in dataclasses.fields(Sequences)))

    def __len__(self) -> int:
        return len(self.a_U)

    def text_tokens(self) -> int:
        """The text's tokens in these sequences (segments A and B, no [CLS] or [SEP])."""
        return int(self.a_U.sum(dtype=np.int64) + self.b_U.sum(dtype=np.int64))

    def lengths(self) -> np.ndarray:
        """Tokens of each sequence with its specials: A + B + [CLS] [SEP] (+ [SEP] after B)."""
        return self.a_U + self.b_U + 2 + (self.b_U > 0)

    def in_corpus_order(self) -> "Sequences":
        """Sorted by (line, k): a key of the corpus, so the order never depends on Beam's bundling.
        The tokens move :data:`BLOCK_SEQUENCES` sequences at a time: the index arrays are a
        block's, never a whole shard's."""
        order = np.lexsort((self.k_U, self.line_U))
        if (order == np.arange(len(order))).all():
            return self
        n = (self.a_U + self.b_U).astype(np.int64)
        start = np.cumsum(n) - n
        tokens = np.empty_like(self.tokens_T)
        at = 0
        for i in range(0, len(order), BLOCK_SEQUENCES):
            u = order[i:i + BLOCK_SEQUENCES]
            take = _spans(start[u], n[u])
            tokens[at:at + len(take)] = self.tokens_T[take]
            at += len(take)
        return Sequences(self.line_U[order], self.k_U[order], self.a_U[order], self.b_U[order], tokens)


# Sequences (or rows) handled at a time where the work goes token by token, so that its int64
# index arrays stay a few MB whatever the shard's size (issue 41: they were ~50 bytes a token).
BLOCK_SEQUENCES = 1 << 13
BLOCK_PAIRS = 1 << 10  # segment pairs held as lists of Python ints (about 4 kB each) before they become arrays
BLOCK_ROWS = 512


@dataclasses.dataclass(frozen=True)
class Documents:
    """Tokenised documents as columns, what ``packing=stream`` sends to its shard: document ``d`` is
    line ``line_D[d]`` of its corpus shard with ``n_D[d]`` sentences; the sentences' lengths
    ``len_S`` and tokens ``tokens_T`` follow in document order (a few bytes a token, where lists
    of Python ints took about 36)."""

    line_D: np.ndarray  # int64
    n_D: np.ndarray  # int32
    len_S: np.ndarray  # int32
    tokens_T: np.ndarray  # the artifact's id dtype

    @staticmethod
    def from_lists(docs: list[tuple[int, list[list[int]]]], dtype: np.dtype) -> "Documents":
        """``[(line, sentences' ids), ...]`` -> columns."""
        lens = [len(s) for _, sents in docs for s in sents]
        return Documents(np.fromiter((line for line, _ in docs), np.int64, len(docs)),
                         np.fromiter((len(sents) for _, sents in docs), np.int32, len(docs)),
                         np.asarray(lens, np.int32),
                         np.fromiter((t for _, sents in docs for s in sents for t in s), dtype, sum(lens)))

    @staticmethod
    def concat(blocks: list["Documents"]) -> "Documents":
        if not blocks:
            return Documents.from_lists([], np.dtype(np.int32))
        return Documents(*(np.concatenate([getattr(d, f.name) for d in blocks]) for f in dataclasses.fields(Documents)))

    def sentences_by_line(self) -> Iterator[list[int]]:
        """Every sentence's ids, the documents in line order: the shard's stream, one sentence at a
        time (a list only while it is being packed)."""
        first_D = np.cumsum(self.n_D, dtype=np.int64) - self.n_D
        tokens_D = np.bincount(np.repeat(np.arange(len(self.n_D)), self.n_D), self.len_S, len(self.n_D)).astype(np.int64)
        start_D = np.cumsum(tokens_D) - tokens_D
        order = np.argsort(self.line_D, kind="stable")
        for i in range(0, len(order), BLOCK_SEQUENCES):  # Python ints for a block of documents at a time
            d_ = order[i:i + BLOCK_SEQUENCES]
            for first, n, start, size in zip(first_D[d_].tolist(), self.n_D[d_].tolist(), start_D[d_].tolist(),
                                              tokens_D[d_].tolist()):
                ids, at = self.tokens_T[start:start + size].tolist(), 0
                for length in self.len_S[first:first + n].tolist():
                    yield ids[at:at + length]
                    at += length


def _spans(start: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The indices ``start[i] .. start[i] + n[i] - 1`` of every span, one after the other."""
    return np.repeat(start - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))


# ---- sequences -> rows ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Placement:
    """Where each sequence goes: row, first column, and its number within the row (1, 2, ...)."""

    row_U: np.ndarray
    offset_U: np.ndarray
    doc_U: np.ndarray
    rows: int


def one_per_row(lengths_U: np.ndarray) -> Placement:
    n = len(lengths_U)
    return Placement(np.arange(n, dtype=np.int64), np.zeros(n, np.int64), np.ones(n, np.int64), n)


def fill_rows(lengths_U: np.ndarray, max_seq_length: int) -> Placement:
    """Best-fit decreasing: the longest sequence first, each into the open row whose free space
    fits it most tightly (a new row when none does).

    Sequences are short next to a row on review-like corpora, so the rows come out nearly full:
    the padding is the free space of the last rows. Ties go to the row opened last, and equal
    lengths keep their input order, so the placement is a pure function of the input order.
    Open rows are kept in buckets by free space, with a bit mask of the non-empty buckets: the
    tightest fit is the lowest set bit at or above the length, one integer operation.
    """
    L = max_seq_length
    n = len(lengths_U)
    row_U, offset_U, doc_U = (np.zeros(n, np.int64) for _ in range(3))
    buckets: list[list[int]] = [[] for _ in range(L + 1)]  # free space -> open rows
    used: list[int] = []  # sequences placed in each row
    mask = 0  # bit c set: some open row has exactly c free tokens
    for u in np.lexsort((np.arange(n), -lengths_U)).tolist():
        need = int(lengths_U[u])
        above = mask >> need
        if above:
            free = need + (above & -above).bit_length() - 1
            rows = buckets[free]
            r = rows.pop()
            if not rows:
                mask ^= 1 << free
        else:
            free, r = L, len(used)
            used.append(0)
        used[r] += 1
        row_U[u], offset_U[u], doc_U[u] = r, L - free, used[r]
        left = free - need
        if left >= MIN_SEQUENCE:
            if not buckets[left]:
                mask |= 1 << left
            buckets[left].append(r)
    return Placement(row_U, offset_U, doc_U, len(used))


def doc_ids_dtype(max_seq_length: int) -> np.dtype:
    """Enough for the most sequences a row can hold (each takes at least 3 tokens)."""
    return np.dtype(np.uint8 if max_seq_length // MIN_SEQUENCE < 256 else np.uint16)


def encode_rows(seqs: Sequences, place: Placement, max_seq_length: int,
                dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sequences written where ``place`` says -> (``input_ids`` [N, L] of ``dtype``,
    ``token_type_ids`` [N, L] uint8, ``doc_ids`` [N, L]) for all the rows at once."""
    return next(encode_pieces(seqs, place, max_seq_length, dtype, max(place.rows, 1)))


def encode_pieces(seqs: Sequences, place: Placement, max_seq_length: int, dtype: np.dtype,
                  rows_per_piece: int):
    """:func:`encode_rows` a piece of ``rows_per_piece`` rows at a time (the last may be shorter;
    one empty piece when there are no rows). Each piece is filled :data:`BLOCK_ROWS` rows at a
    time, every token set by one vectorised scatter per array and block: the memory is the
    piece's rows and a block's index arrays, never the whole shard's."""
    L = max_seq_length
    n_seq = seqs.lengths().astype(np.int64)
    if (place.offset_U + n_seq > L).any():
        u = int(np.flatnonzero(place.offset_U + n_seq > L)[0])
        raise ValueError(f"sequence of {n_seq[u]} tokens at column {place.offset_U[u]} exceeds max_seq_length={L}")
    n_text = (seqs.a_U + seqs.b_U).astype(np.int64)
    text_start = np.cumsum(n_text) - n_text  # where each sequence's A+B tokens start in tokens_T
    order = np.argsort(place.row_U, kind="stable")
    first = np.searchsorted(place.row_U[order], np.arange(place.rows + 1))  # row r: order[first[r]:first[r+1]]
    for lo in range(0, max(place.rows, 1), rows_per_piece):
        hi = min(lo + rows_per_piece, place.rows)
        piece = (np.zeros((hi - lo) * L, dtype), np.zeros((hi - lo) * L, np.uint8), np.zeros((hi - lo) * L, doc_ids_dtype(L)))
        for r in range(lo, hi, BLOCK_ROWS):
            u = order[first[r]:first[min(r + BLOCK_ROWS, hi)]]
            _encode_block(seqs, place, u, n_seq[u], text_start[u], L, lo, piece)
        yield tuple(a.reshape(-1, L) for a in piece)


def _encode_block(seqs: Sequences, place: Placement, u: np.ndarray, n_seq: np.ndarray, text_start: np.ndarray,
                  L: int, first_row: int, piece: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Write the sequences ``u`` (whose rows start at ``first_row`` of ``piece``) into it."""
    ids, types, docs = piece
    start_U = (place.row_U[u] - first_row) * L + place.offset_U[u]  # flat index of each sequence's [CLS]
    a, b = seqs.a_U[u].astype(np.int64), seqs.b_U[u].astype(np.int64)
    # every token of a sequence: its doc number; B and the [SEP] closing it: segment 1
    within = np.arange(int(n_seq.sum())) - np.repeat(np.cumsum(n_seq) - n_seq, n_seq)
    at = np.repeat(start_U, n_seq) + within
    docs[at] = np.repeat(place.doc_U[u], n_seq)
    types[at] = within > np.repeat(a + 1, n_seq)
    ids[start_U] = CLS
    ids[start_U + a + 1] = SEP
    two = b > 0
    ids[(start_U + a + b + 2)[two]] = SEP
    # text: token j of A+B goes to [CLS] + 1 + j, one more after A's [SEP]
    n_text = a + b
    j = np.arange(int(n_text.sum())) - np.repeat(np.cumsum(n_text) - n_text, n_text)
    ids[np.repeat(start_U + 1, n_text) + j + (j >= np.repeat(a, n_text))] = seqs.tokens_T[_spans(text_start, n_text)]


def ids_dtype(vocab_size: int) -> np.dtype:
    """The smallest id dtype of the contract that holds every id of the vocabulary."""
    return np.dtype(np.uint16 if vocab_size <= 65535 else np.int32)


def make_stats(tally: dict, max_seq_length: int, shards: int) -> dict:
    get = lambda k: int(tally.get(k, 0))  # noqa: E731
    examples, tokens, seqs = get("examples"), get("tokens"), get("sequences")
    return {"examples": examples, "tokens": tokens,
            "padding_share": round(1 - tokens / (examples * max_seq_length), 6) if examples else 0.0,
            "sequences": seqs, "sequences_per_example": round(seqs / examples, 4) if examples else 0.0,
            "truncated_sentences": get("truncated_sentences"), "documents": get("documents"),
            "documents_used": get("documents_used"), "sentences": get("sentences"),
            "single_segment_sequences": get("single_segment_sequences"), "shards": shards,
            "bad_documents": get("bad_documents"), "held_out_documents": get("held_out_documents"),
            # the sentences' tokens before truncation, and the [UNK] among them (examples 5)
            "text_tokens": get("text_tokens"), "unk_tokens": get("unk_tokens"),
            "unk_rate": round(get("unk_tokens") / get("text_tokens"), 6) if get("text_tokens") else 0.0,
            # where those went (examples 6): text_tokens == sequence_text_tokens + truncated_tokens
            "sequence_text_tokens": get("sequence_text_tokens"), "truncated_tokens": get("truncated_tokens"),
            "truncated_token_share": round(get("truncated_tokens") / get("text_tokens"), 6) if get("text_tokens") else 0.0}
