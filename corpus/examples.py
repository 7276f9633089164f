"""The examples stage: corpus + vocab -> fixed-length ``[CLS] A [SEP] B [SEP]`` id arrays.

Chain: corpus -> vocab -> **examples** -> pretrain. ``build`` streams the corpus split, tokenises
the stored sentences with the vocab artifact's fast tokenizer in batches (``encode_batch``, no
special tokens), packs each document's sentences into sequences (:func:`pack_document`, ELECTRA's
recipe, see :mod:`corpus.examples_config`) and writes ``.npy`` shards plus ``index.json`` and
``stats.json`` in the format of ``CONTRACT.md``.

Randomness is drawn per document from a generator seeded by (seed, document id), so a
document's examples do not depend on which other documents share its batch, shard or worker —
the property a later Beam version needs to give the same examples whatever the worker count.
Examples come out in corpus order; the pretraining loader shuffles.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from tokenizers import Tokenizer

from corpus import store
from corpus.examples_config import MIN_SEQ_LENGTH, MIN_TARGET, ExamplesConfig, default_config  # noqa: F401
from pipeline.stage import StageOutput, progress

STAGE_VERSION = 1
FORMAT = 1
SPECIAL_IDS = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
PAD, CLS, SEP = 0, 2, 3


# ---- pure core ------------------------------------------------------------------------------
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
        if not sent:
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


# ---- tokenizer ------------------------------------------------------------------------------
def load_tokenizer(tokenizer_dir: Path) -> Tokenizer:
    path = Path(tokenizer_dir) / "tokenizer.json"
    if not path.is_file():
        raise ValueError(f"examples: {path} not found; expected a vocab artifact (HF tokenizer directory)")
    tok = Tokenizer.from_file(str(path))
    wrong = {t: tok.token_to_id(t) for t, i in SPECIAL_IDS.items() if tok.token_to_id(t) != i}
    if wrong:
        raise ValueError(f"examples: {path} lacks the special tokens at their fixed ids "
                         f"(want {SPECIAL_IDS}, got {wrong})")
    return tok


def _sentences(doc: dict) -> list[str]:
    try:
        return store.sentences(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"examples: document {doc.get('id', '?')!r} has no usable 'text'/'sentences' ({e!r})") from None


def tokenized_documents(docs: Iterable[dict], tok: Tokenizer, batch: int) -> Iterator[tuple[str, list[list[int]]]]:
    """(doc id, per-sentence ids) for each document, tokenised ``batch`` documents at a time."""
    buf: list[dict] = []

    def flush() -> Iterator[tuple[str, list[list[int]]]]:
        sents = [_sentences(d) for d in buf]
        flat = [s for ss in sents for s in ss]
        encs = tok.encode_batch(flat, add_special_tokens=False) if flat else []
        i = 0
        for d, ss in zip(buf, sents):
            yield str(d.get("id", "")), [e.ids for e in encs[i:i + len(ss)]]
            i += len(ss)
        buf.clear()

    for doc in docs:
        buf.append(doc)
        if len(buf) >= batch:
            yield from flush()
    if buf:
        yield from flush()


# ---- shell ----------------------------------------------------------------------------------
class _ShardWriter:
    def __init__(self, out_dir: Path, cfg: ExamplesConfig, dtype: np.dtype) -> None:
        self.dir = out_dir / "data"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cfg, self.dtype = cfg, dtype
        self.shards: list[dict] = []
        self._new()

    def _new(self) -> None:
        self.ids = np.zeros((self.cfg.shard_size, self.cfg.max_seq_length), dtype=self.dtype)
        self.types = np.zeros((self.cfg.shard_size, self.cfg.max_seq_length), dtype=np.uint8)
        self.n = 0

    def add(self, a: list[int], b: list[int]) -> int:
        n = encode_example(a, b, self.cfg.max_seq_length, self.ids[self.n], self.types[self.n])
        self.n += 1
        if self.n == self.cfg.shard_size:
            self.flush()
        return n

    def flush(self) -> None:
        if self.n == 0:
            return
        stem = f"data/shard-{len(self.shards):05d}"
        np.save(self.dir.parent / f"{stem}.input_ids.npy", self.ids[:self.n])
        np.save(self.dir.parent / f"{stem}.token_type_ids.npy", self.types[:self.n])
        self.shards.append({"input_ids": f"{stem}.input_ids.npy", "token_type_ids": f"{stem}.token_type_ids.npy",
                            "examples": self.n})
        self._new()


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def build(cfg: ExamplesConfig, corpus_dir: Path, tokenizer_dir: Path, out_dir: Path) -> StageOutput:
    if cfg.max_seq_length < MIN_SEQ_LENGTH:  # the config refuses it too; a hand-built one may not
        raise ValueError(f"examples: max_seq_length must be at least {MIN_SEQ_LENGTH}, got {cfg.max_seq_length}")
    corpus_dir, out_dir = Path(corpus_dir), Path(out_dir)
    tok = load_tokenizer(Path(tokenizer_dir))
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    dtype = np.dtype(np.uint16 if vocab_size <= 65535 else np.int32)
    writer = _ShardWriter(out_dir, cfg, dtype)
    progress(f"examples: packing {cfg.split} documents of {corpus_dir} into sequences of {cfg.max_seq_length}")

    documents = used = sentences = truncated = examples = tokens = single = 0
    docs = store.iter_documents(corpus_dir, cfg.split)
    for doc_id, sent_ids in tokenized_documents(docs, tok, cfg.batch_documents):
        documents += 1
        sentences += len(sent_ids)
        pairs, cut = pack_document(sent_ids, cfg, doc_rng(cfg.seed, doc_id))
        truncated += cut
        used += bool(pairs)
        for a, b in pairs:
            tokens += writer.add(a, b)
            single += not b
            examples += 1
        if documents % 100_000 == 0:
            progress(f"examples: {documents} documents, {examples} examples")
    writer.flush()
    if examples == 0:
        raise ValueError(f"examples: the {cfg.split} split of {corpus_dir} yields no tokens")

    index = {"format": FORMAT, "max_seq_length": cfg.max_seq_length, "dtype": dtype.name, "vocab_size": vocab_size,
             "pad_id": PAD, "cls_id": CLS, "sep_id": SEP, "mask_id": SPECIAL_IDS["[MASK]"], "examples": examples,
             "shards": writer.shards}
    _write_json(out_dir / "index.json", index)
    stats = {"examples": examples, "tokens": tokens,
             "padding_share": round(1 - tokens / (examples * cfg.max_seq_length), 6),
             "truncated_sentences": truncated, "documents": documents, "documents_used": used,
             "sentences": sentences, "single_segment_examples": single, "shards": len(writer.shards)}
    _write_json(out_dir / "stats.json", stats)
    progress("examples: " + ", ".join(f"{k}={v}" for k, v in stats.items()))
    return StageOutput(stats=stats)
