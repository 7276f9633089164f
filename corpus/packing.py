"""The examples stage's pure core: ELECTRA's packing of a document's sentences into
``[CLS] A [SEP] B [SEP]`` id rows, and the stage's statistics.

No I/O and no Beam: :mod:`kolectra.corpus.examples_beam` runs these functions on workers and
:mod:`kolectra.corpus.examples` checks the inputs and runs the job. The recipe and its settings
are described in :mod:`kolectra.corpus.examples_config`.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np

from kolectra.corpus.examples_config import MIN_TARGET, ExamplesConfig

FORMAT = 1
SPECIAL_IDS = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
PAD, CLS, SEP = 0, 2, 3


def doc_rng(seed: int, doc_id: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{doc_id}".encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def _target(rng: random.Random, cfg: ExamplesConfig) -> int:
    if rng.random() < cfg.short_seq_prob:
        return rng.randint(MIN_TARGET, cfg.max_seq_length)
    return cfg.max_seq_length


def pack_document(sentences: list[list[int]], cfg: ExamplesConfig,
                  rng: random.Random) -> tuple[list[tuple[list[int], list[int]]], int]:
    """One document's sentence ids -> ``[(A, B), ...]`` segment pairs (B may be empty), truncations.

    Sentences are added to the current chunk while its text fits ``target - 3`` tokens (room for
    [CLS] and two [SEP]); then the chunk becomes an example and a new target is drawn. A sentence
    longer than ``max_seq_length - 3`` alone is cut to that length and counted. The A/B split is at
    a uniformly random sentence boundary of the chunk (BERT); a chunk of one sentence, or with
    probability ``single_segment_prob``, is a single segment A.
    """
    limit = cfg.max_seq_length - 3
    out: list[tuple[list[int], list[int]]] = []
    truncated = 0
    chunk: list[list[int]] = []
    length = 0
    target = _target(rng, cfg)

    def emit() -> None:
        if len(chunk) == 1 or rng.random() < cfg.single_segment_prob:
            out.append(([t for s in chunk for t in s], []))
        else:
            k = rng.randint(1, len(chunk) - 1)
            out.append(([t for s in chunk[:k] for t in s], [t for s in chunk[k:] for t in s]))

    for sent in sentences:
        if not len(sent):
            continue
        if len(sent) > limit:
            sent = sent[:limit]
            truncated += 1
        if chunk and length + len(sent) > target - 3:
            emit()
            chunk, length, target = [], 0, _target(rng, cfg)
        chunk.append(sent)
        length += len(sent)
    if chunk:
        emit()
    return out, truncated


def encode_example(a: list[int], b: list[int], max_seq_length: int, ids_L: np.ndarray, types_L: np.ndarray) -> int:
    """Write ``[CLS] A [SEP] (B [SEP])`` into zeroed rows; returns the non-pad token count."""
    n_a = len(a) + 2
    ids_L[0] = CLS
    ids_L[1:n_a - 1] = a
    ids_L[n_a - 1] = SEP
    if not b:
        return n_a
    n = n_a + len(b) + 1
    if n > max_seq_length:
        raise ValueError(f"example of {n} tokens exceeds max_seq_length={max_seq_length}")
    ids_L[n_a:n - 1] = b
    ids_L[n - 1] = SEP
    types_L[n_a:n] = 1
    return n


def encode_pairs(pairs: list[tuple[list[int], list[int]]], max_seq_length: int,
                 dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Segment pairs -> (``input_ids`` [N, L] of ``dtype``, ``token_type_ids`` [N, L] uint8)."""
    ids_NL = np.zeros((len(pairs), max_seq_length), dtype=dtype)
    types_NL = np.zeros((len(pairs), max_seq_length), dtype=np.uint8)
    for i, (a, b) in enumerate(pairs):
        encode_example(a, b, max_seq_length, ids_NL[i], types_NL[i])
    return ids_NL, types_NL


def ids_dtype(vocab_size: int) -> np.dtype:
    """The smallest id dtype of the contract that holds every id of the vocabulary."""
    return np.dtype(np.uint16 if vocab_size <= 65535 else np.int32)


def make_stats(tally: dict, max_seq_length: int, shards: int) -> dict:
    get = lambda k: int(tally.get(k, 0))  # noqa: E731
    examples, tokens = get("examples"), get("tokens")
    return {"examples": examples, "tokens": tokens,
            "padding_share": round(1 - tokens / (examples * max_seq_length), 6) if examples else 0.0,
            "truncated_sentences": get("truncated_sentences"), "documents": get("documents"),
            "documents_used": get("documents_used"), "sentences": get("sentences"),
            "single_segment_examples": get("single_segment_examples"), "shards": shards,
            "bad_documents": get("bad_documents")}
