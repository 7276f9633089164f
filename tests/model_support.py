"""Small real inputs for the pretrain tests: a WordPiece tokenizer and an examples artifact.

The tokenizer is trained with HF ``tokenizers`` on a few templated sentences (specials [PAD]=0
[UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4) and saved as a ``BertTokenizerFast`` directory; the examples
follow the examples-artifact format (index.json + Arrow shards written by the stage's own
writer, rows of one or more ``[CLS] A [SEP] B [SEP]`` sequences + padding, ``doc_ids``).
The sentences come from a tiny grammar, so a model can learn something in a few dozen steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from kolectra.core import tokens as core_tokens

SPECIALS = list(core_tokens.SPECIALS)
SUBJECTS = ["나는", "그는", "우리는", "영화는", "배우가", "감독이", "친구가", "관객은"]
OBJECTS = ["영화를", "음악을", "장면을", "결말을", "연기를", "대사를", "이야기를"]
VERBS = ["봤다", "좋아한다", "싫어한다", "기억한다", "칭찬했다", "비판했다"]
ADVERBS = ["정말", "너무", "조금", "다시", "오늘", "어제"]


def sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append(" ".join([SUBJECTS[rng.integers(len(SUBJECTS))], ADVERBS[rng.integers(len(ADVERBS))],
                             OBJECTS[rng.integers(len(OBJECTS))], VERBS[rng.integers(len(VERBS))]]) + ".")
    return out


def build_tokenizer(dest: Path, unused: int = 0) -> Path:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False, clean_text=True,
                                                handle_chinese_chars=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    reserved = [f"[unused{i}]" for i in range(unused)]
    trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=SPECIALS + reserved, min_frequency=1)
    tok.train_from_iterator(sentences(400, seed=0), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = BertTokenizerFast(tokenizer_object=tok, do_lower_case=False, strip_accents=False,
                             unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                             mask_token="[MASK]")
    dest.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(dest))
    return dest


def small_examples(root: Path) -> tuple[Path, Path]:
    """(examples, tokenizer): 64 rows of 32 tokens from :func:`build_tokenizer`'s vocabulary, under ``root``."""
    tok = build_tokenizer(root / "tok")
    return build_examples(root / "examples", tok, n=64, seq_len=32), tok


def build_examples(dest: Path, tokenizer_dir: Path, n: int, seq_len: int, seed: int = 0,
                   shard_size: int = 50, short_every: int = 5, packed: bool = True) -> Path:
    """``n`` rows of ``seq_len``: sequences of A = 1-3 sentences and B = 1-3 more, every
    ``short_every``-th short. ``packed``: a row takes further sequences while they fit (as the
    examples stage's default packing does), else one sequence a row."""
    from transformers import AutoTokenizer

    from kolectra.corpus.packing import Placement, Sequences, encode_rows

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    rng = np.random.default_rng(seed)
    pool = sentences(4 * n + 10, seed=seed + 1)
    pairs, rows, offsets, docs = [], [], [], []
    row, used, in_row, i = 0, 0, 0, 0
    while row < n:
        k = 1 if i % short_every == 0 else 3
        i += 1
        a = " ".join(pool[rng.integers(len(pool))] for _ in range(rng.integers(1, k + 1)))
        b = " ".join(pool[rng.integers(len(pool))] for _ in range(rng.integers(1, k + 1)))
        enc = tok(a, b, truncation="longest_first", max_length=seq_len)
        types = enc["token_type_ids"]
        m = len(enc["input_ids"])
        if used and (not packed or used + m > seq_len):
            row, used, in_row = row + 1, 0, 0
            if row == n:
                break
        n_a = types.index(1) - 2 if 1 in types else m - 2
        pairs.append((enc["input_ids"][1:n_a + 1], enc["input_ids"][n_a + 2:m - 1]))
        in_row += 1
        docs.append(in_row)
        rows.append(row)
        offsets.append(used)
        used += m
    seqs = Sequences.from_pairs(pairs, list(range(len(pairs))), [0] * len(pairs))
    place = Placement(np.array(rows), np.array(offsets), np.array(docs), n)
    ids, types, doc_ids = encode_rows(seqs, place, seq_len, np.dtype(np.uint16))
    write_examples(dest, ids, types, len(tok), shard_size, doc_ids)
    (dest / "stats.json").write_text(json.dumps({"examples": n, "tokens": int((ids != 0).sum())}))
    return dest


def write_examples(dest: Path, ids: np.ndarray, types: np.ndarray, vocab_size: int, shard_size: int,
                   doc_ids: np.ndarray | None = None, legacy_npy: bool = False) -> Path:
    """An examples artifact's shards and ``index.json`` (the format of docs/examples.md) for given rows,
    with the stage's own writer; ``doc_ids`` default to one sequence a row. ``legacy_npy``: the
    ``.npy`` files of index format 1 (no doc ids), as artifacts were written before packing."""
    from kolectra.corpus.examples_format import arrow_bytes, index_document
    from kolectra.corpus.packing import SPECIAL_IDS, doc_ids_dtype

    n, seq_len = ids.shape
    if doc_ids is None:
        doc_ids = (ids != 0).astype(doc_ids_dtype(seq_len))
    (dest / "data").mkdir(parents=True, exist_ok=True)
    shards = []
    for s, start in enumerate(range(0, n, shard_size)):
        rows = slice(start, min(n, start + shard_size))
        if legacy_npy:
            names = {key: f"data/shard-{s:05d}.{key}.npy" for key in ("input_ids", "token_type_ids")}
            np.save(dest / names["input_ids"], ids[rows])
            np.save(dest / names["token_type_ids"], types[rows])
        else:
            names = {"path": f"data/shard-{s:05d}.arrow"}
            (dest / names["path"]).write_bytes(arrow_bytes(ids[rows], types[rows], doc_ids[rows]))
        shards.append({**names, "examples": rows.stop - start})
    index = index_document(seq_len, "uint16", vocab_size, "isolated", SPECIAL_IDS, shards)
    if legacy_npy:
        index = {k: v for k, v in index.items() if k not in ("packing", "columns")} | {"format": 1}
    (dest / "index.json").write_text(json.dumps(index, indent=1))
    return dest


def small_chain(store, n: int = 64, seq_len: int = 32, shard_size: int = 50):
    """corpus -> vocab -> examples through ``store.build`` (any root: a local directory or a bucket):
    a small real tokenizer and examples (shards of ``shard_size`` rows), no Beam. Returns the three artifacts."""
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store.request import Request

    def writes(fn):
        def produce(out: Path) -> StageOutput:
            fn(out)
            return StageOutput(stats={})
        return produce

    corpus = store.build(Request(kind="corpus", name="c", stage_version=1, config={}),
                         writes(lambda out: (out / "stats.json").write_text("{}")))
    vocab = store.build(Request(kind="vocab", name="v", stage_version=1, config={}, parents=(corpus,)),
                        writes(build_tokenizer))
    examples = store.build(Request(kind="examples", name="e", stage_version=1, config={}, parents=(corpus, vocab)),
                           writes(lambda out: build_examples(out, store.local(vocab), n=n, seq_len=seq_len,
                                                             shard_size=shard_size)))
    return corpus, vocab, examples


def stop_in_step(monkeypatch, n: int, error: BaseException, objective: str = "electra") -> Callable[[], None]:
    """The objective's step raises ``error`` on its ``n``-th call, as a run killed inside step ``n``
    (micro-steps count one each); returns what puts the real step back, for the resume."""
    from kolectra.model import objectives  # noqa: PLC0415 - as the tests that stop a run import it

    real, calls = objectives.STEPS[objective], []

    def stopping(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setitem(objectives.STEPS, objective, stopping)
    return lambda: monkeypatch.setitem(objectives.STEPS, objective, real)


@pytest.fixture(autouse=True)
def judged_on_any_token(monkeypatch):
    """For a test module that imports it (autouse there): real runs of 2 to 8 rows of 32 tokens, a line every
    2-3 steps, score a token or two of one class a window, which the health check leaves unjudged
    (model.health.MIN_CLASS_TOKENS); at 1 it judges every window with an AUC, as before the threshold, so that
    what stands and what withdraws a warning is still tested on real runs (the threshold's own run:
    test_model_health_counts)."""
    from kolectra.model import health

    monkeypatch.setattr(health, "MIN_CLASS_TOKENS", 1)
