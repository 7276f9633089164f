"""The examples stage: corpus + vocab -> fixed-length ``[CLS] A [SEP] B [SEP]`` id arrays.

Chain: corpus -> vocab -> **examples** -> pretrain. :func:`build` checks its inputs (the vocab
belongs to this corpus, the sequence length fits the tokenizer, the special tokens sit at their
fixed ids), then runs the Beam job of :mod:`corpus.examples_beam` with the same runner options
as the corpus stage: read the corpus shards in batches of documents -> tokenise each batch with
the vocab's fast tokenizer and pack each document's sentences into sequences
(:func:`pack_document`, ELECTRA's recipe, see :mod:`corpus.examples_config`) -> group by corpus
shard, sort by (line, example) -> ``.npy`` shards, ``index.json`` and ``stats.json`` in the
format of ``CONTRACT.md``.

Randomness is drawn per document from a generator seeded by (seed, document id), and every
output shard is sorted by a key of the corpus (line within the corpus shard, example within the
document), so the bytes do not depend on batching, bundling or the number of workers. Examples
come out in corpus order; the pretraining loader shuffles.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from corpus.examples_config import MIN_SEQ_LENGTH, MIN_TARGET, ExamplesConfig, default_config  # noqa: F401
from pipeline.stage import StageOutput, progress

# 2: Beam job; shards are named after the corpus shard they come from (shard-CCCCC-PPPP).
STAGE_VERSION = 2
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


# ---- input checks ---------------------------------------------------------------------------
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


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as e:
        raise ValueError(f"examples: {path} is not valid JSON: {e}") from None


def check_vocab_lineage(corpus_dir: Path, tokenizer_dir: Path, allow_other: bool) -> None:
    """Refuse a vocab artifact whose manifest does not list this corpus among its parents.

    Only artifact directories carry manifests; plain directories (tests, hand-made tokenizers)
    have no lineage to check."""
    corpus_m = _read_json(Path(corpus_dir) / "manifest.json")
    vocab_m = _read_json(Path(tokenizer_dir) / "manifest.json")
    if not corpus_m or not vocab_m or "id" not in corpus_m or "parents" not in vocab_m:
        return
    if corpus_m["id"] in vocab_m["parents"] or allow_other:
        return
    raise ValueError(
        f"examples: the vocab {tokenizer_dir} was learned from corpus {', '.join(vocab_m['parents']) or '(none)'}, "
        f"not from {corpus_dir} (id {corpus_m['id']}); its word pieces may not fit this text. Use the vocab built "
        f"from this corpus, or pass --set allow_other_corpus_vocab=true to use it anyway")


def check_length(cfg: ExamplesConfig, tokenizer_dir: Path) -> None:
    """Refuse a ``max_seq_length`` the tokenizer (and so the model's position table) cannot take."""
    if cfg.max_seq_length < MIN_SEQ_LENGTH:  # the config refuses it too; a hand-built one may not
        raise ValueError(f"examples: max_seq_length must be at least {MIN_SEQ_LENGTH}, got {cfg.max_seq_length}")
    path = Path(tokenizer_dir) / "tokenizer_config.json"
    limit = (_read_json(path) or {}).get("model_max_length")
    # transformers writes a huge sentinel (1e30) when there is no limit
    if isinstance(limit, (int, float)) and limit < 1e9 and cfg.max_seq_length > limit:
        raise ValueError(f"examples: max_seq_length={cfg.max_seq_length} exceeds model_max_length={int(limit)} of "
                         f"{path} (the position embeddings the vocab was made for); use --max-seq-length "
                         f"{int(limit)} or less")


def corpus_shards(corpus_dir: Path, split: str) -> list[Path]:
    from corpus import store

    paths = store.shard_paths(corpus_dir, split)
    if not paths:
        raise ValueError(f"examples: no {split} shards under {Path(corpus_dir) / store.DATA_DIR} "
                         f"(expected {split}-NNNNN-of-MMMMM.jsonl.gz; is {corpus_dir} a corpus artifact?)")
    return paths


# ---- shell ----------------------------------------------------------------------------------
def build(cfg: ExamplesConfig, corpus_dir: Path, tokenizer_dir: Path, out_dir: Path,
          beam_args: list[str] = ()) -> StageOutput:
    """Run the examples job over the corpus artifact ``corpus_dir`` with the vocab artifact
    ``tokenizer_dir`` into ``out_dir``; ``beam_args`` are Beam pipeline options (``--runner``,
    ``--direct_num_workers``...) read as the corpus stage reads them."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

    from corpus import examples_beam
    from corpus.pipeline import input_bytes, pipeline_options

    corpus_dir, tokenizer_dir, out_dir = Path(corpus_dir), Path(tokenizer_dir), Path(out_dir)
    check_length(cfg, tokenizer_dir)
    tok = load_tokenizer(tokenizer_dir)
    check_vocab_lineage(corpus_dir, tokenizer_dir, cfg.allow_other_corpus_vocab)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    dtype = ids_dtype(vocab_size)
    shards = [str(p) for p in corpus_shards(corpus_dir, cfg.split)]

    options = pipeline_options(list(beam_args), input_bytes(shards))
    runner = options.view_as(StandardOptions).runner
    direct = options.view_as(DirectOptions)
    workers = f", {direct.direct_num_workers} worker(s)" if direct.direct_num_workers else ""
    mode = "packing across documents" if cfg.pack_documents else "one document at a time"
    progress(f"examples: {len(shards)} {cfg.split} shard(s) of {corpus_dir} -> sequences of {cfg.max_seq_length} "
             f"({mode}), runner {runner}{workers}")
    job = examples_beam.Job(cfg=cfg, tokenizer_path=str(tokenizer_dir / "tokenizer.json"), dtype=dtype.name,
                            vocab_size=vocab_size, out_dir=str(out_dir))
    with beam.Pipeline(options=options) as p:
        examples_beam.recipe(p, job, shards)

    stats = json.loads((out_dir / "stats.json").read_text(encoding="utf-8"))
    if stats["bad_documents"]:
        bad = json.loads((out_dir / examples_beam.BAD_FILE).read_text(encoding="utf-8"))
        raise ValueError(f"examples: {stats['bad_documents']} unreadable document(s) in {corpus_dir}, e.g. "
                         + "; ".join(bad[:3]))
    if stats["examples"] == 0:
        raise ValueError(f"examples: the {cfg.split} split of {corpus_dir} yields no tokens")
    progress("examples: " + ", ".join(f"{k}={v}" for k, v in stats.items()))
    return StageOutput(stats=stats)
