"""The examples stage's packing functions (``corpus/packing.py``) on their own: how a document's
sentences become sequences, the per-document random streams, where rows are filled and how the
sequences are written into them. The job around them: ``tests/test_examples.py``."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from kolectra.core.config import override
from kolectra.corpus import packing
from kolectra.corpus.examples_config import ExamplesConfig
from kolectra.corpus.packing import Documents, Placement, Sequences, doc_rng, encode_rows, fill_rows, pack_document


def test_pack_document_rules():
    cfg = ExamplesConfig(max_seq_length=16, short_seq_prob=0.0, single_segment_prob=0.0)
    sents = [[10] * 4, [11] * 4, [12] * 4, [13] * 4, [14] * 20]
    pairs, truncated = pack_document(sents, cfg, random.Random(0))
    # 4+4+4 = 12 <= 16-3; the fourth sentence starts a new example; the 20-token one is cut to 13
    assert truncated == (1, 7)  # one sentence, its 7 tokens past 13
    assert [len(a) + len(b) for a, b in pairs] == [12, 4, 13]
    a, b = pairs[0]
    assert len(a) in (4, 8) and a + b == [10] * 4 + [11] * 4 + [12] * 4  # split at a sentence boundary
    assert pairs[1] == ([13] * 4, []) and pairs[2] == ([14] * 13, [])  # one sentence: one segment
    singles, _ = pack_document(sents, override(cfg, ["single_segment_prob=1"]), random.Random(0))
    assert all(not b for _, b in singles)
    assert pack_document([[], []], cfg, random.Random(0)) == ([], (0, 0))


def test_document_rng_is_seeded_per_document_and_uniform():
    a, b = doc_rng(0, "doc-1"), doc_rng(0, "doc-1")
    assert [a.randint(1, 6) for _ in range(20)] == [b.randint(1, 6) for _ in range(20)]  # past the first digest
    assert [doc_rng(0, "doc-1").random() for _ in range(3)] != [doc_rng(1, "doc-1").random() for _ in range(3)]
    draws = np.array([doc_rng(0, str(i)).randint(5, 8) for i in range(20_000)])
    assert set(draws.tolist()) == {5, 6, 7, 8} and np.abs(np.bincount(draws)[5:] / 20_000 - 0.25).max() < 0.012
    u = np.array([doc_rng(3, str(i)).random() for i in range(20_000)])
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01 and abs((u < 0.1).mean() - 0.1) < 0.01


def test_encode_rows_writes_each_sequence_where_placed():
    seqs = Sequences.from_pairs([([7, 8], [9]), ([10], []), ([11, 12, 13], [14, 15])], [1, 1, 2], [0, 1, 0])
    assert seqs.lengths().tolist() == [6, 3, 8]
    place = Placement(np.array([0, 1, 0]), np.array([0, 0, 6]), np.array([1, 1, 2]), 2)
    ids, tt, docs = encode_rows(seqs, place, 16, np.dtype(np.uint16))
    assert ids.tolist() == [[2, 7, 8, 3, 9, 3, 2, 11, 12, 13, 3, 14, 15, 3, 0, 0], [2, 10, 3] + [0] * 13]
    assert tt.tolist() == [[0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0] * 16]
    assert docs.tolist() == [[1] * 6 + [2] * 8 + [0, 0], [1] * 3 + [0] * 13]
    with pytest.raises(ValueError, match="sequence of 8 tokens at column 10 exceeds max_seq_length=16"):
        encode_rows(seqs, Placement(np.array([0, 1, 0]), np.array([0, 0, 10]), np.array([1, 1, 2]), 2), 16,
                    np.dtype(np.uint16))
    shuffled = Sequences(*(getattr(seqs, k)[[2, 0, 1]] if k != "tokens_T" else
                           np.array([11, 12, 13, 14, 15, 7, 8, 9, 10], np.int32) for k in
                           ("line_U", "k_U", "a_U", "b_U", "tokens_T")))
    back = shuffled.in_corpus_order()
    assert all(np.array_equal(getattr(back, k), getattr(seqs, k)) for k in ("line_U", "k_U", "a_U", "b_U", "tokens_T"))


def test_fill_rows_is_tight_and_a_function_of_the_input_order():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 60, 3000)  # review-like: short against a row of 128
    place = fill_rows(lengths, 128)
    ends = place.offset_U + lengths
    assert ends.max() <= 128
    for r in rng.choice(place.rows, 50, replace=False):  # no overlaps, numbered left to right
        in_row = np.flatnonzero(place.row_U == r)
        by_offset = in_row[np.argsort(place.offset_U[in_row])]
        assert (place.offset_U[by_offset][1:] == ends[by_offset][:-1]).all() and place.offset_U[by_offset][0] == 0
        assert place.doc_U[by_offset].tolist() == list(range(1, len(in_row) + 1))
    assert place.rows == -(-int(lengths.sum()) // 128)  # as few rows as the tokens need
    again = fill_rows(lengths, 128)
    assert all(np.array_equal(getattr(place, k), getattr(again, k)) for k in ("row_U", "offset_U", "doc_U"))
    full = fill_rows(np.array([128, 5, 128]), 128)
    assert full.rows == 3 and full.row_U.tolist() == [0, 2, 1]  # a full-length sequence has a row of its own


def _made_up(n: int, seed: int = 0) -> list[tuple[int, list[list[int]]]]:
    """``n`` documents (line, sentences' ids) in shuffled line order; some sentences and documents empty."""
    rng = random.Random(seed)
    lines = list(range(n))
    rng.shuffle(lines)
    return [(line, [[rng.randrange(5, 8000) for _ in range(rng.choice([0, 3, 17, 40, 200]))]
                    for _ in range(rng.randrange(0, 5))]) for line in lines]


def test_stream_documents_as_columns_give_the_shard_stream_in_line_order(monkeypatch):
    docs = _made_up(300)
    blocks = [Documents.from_lists(docs[i:i + 64], np.dtype(np.uint16)) for i in range(0, len(docs), 64)]
    monkeypatch.setattr(packing, "BLOCK_SEQUENCES", 7)  # documents turned into Python ints a few at a time
    monkeypatch.setattr(packing, "BLOCK_PAIRS", 5)  # and pairs made into arrays a few at a time
    stream = list(Documents.concat(blocks).sentences_by_line())
    assert stream == [s for _, sents in sorted(docs) for s in sents]  # empty sentences kept, as the lists had them
    assert Documents.concat([]).tokens_T.size == 0 and list(Documents.concat([]).sentences_by_line()) == []
    # the pairs made as a stream, a few at a time, are the ones a list of the whole stream gives
    cfg = override(ExamplesConfig(), ["max_seq_length=64"])
    pairs, truncated = pack_document(stream, cfg, doc_rng(0, "train-shard-0"))
    seqs, cut = Sequences.from_stream(iter(stream), cfg, doc_rng(0, "train-shard-0"), np.dtype(np.uint16))
    whole = Sequences.from_pairs(pairs, range(len(pairs)), [0] * len(pairs), np.dtype(np.uint16))
    assert cut == truncated and cut.sentences > 0 and len(seqs) == len(pairs) > 7
    assert all(np.array_equal(getattr(seqs, f), getattr(whole, f)) for f in ("line_U", "k_U", "a_U", "b_U", "tokens_T"))


def test_a_stream_shard_holds_a_few_bytes_a_token(monkeypatch):
    """``packing=stream`` gives one step a whole corpus shard (about ``shard_bytes`` of JSON). Its
    documents came as lists of Python ints, about 58 bytes a token (``benchmarks/stream_packing.py``);
    as columns, and cut a block at a time, a few bytes a token beside one block's lists."""
    import tracemalloc

    from kolectra.corpus import examples_beam

    monkeypatch.setattr(packing, "BLOCK_PAIRS", 256)
    job = examples_beam.Job(ExamplesConfig(packing="stream"), "", "uint16", 8000, "")
    rng = np.random.default_rng(0)
    tracemalloc.start()
    try:
        blocks = []
        for first in range(0, 6144, 256):  # documents sent as the tokenising step sends them, a batch at a time
            batch = [(first + i, [rng.integers(5, 8000, 25).tolist() for _ in range(4)]) for i in range(256)]
            blocks.append(("documents", examples_beam.stream_block(batch, np.dtype(np.uint16))))
        seqs, place, _ = examples_beam.shard_rows(0, blocks, job)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seqs.tokens_T.size == 6144 * 100 and place.rows == len(seqs)
    assert peak / seqs.tokens_T.size < 16, f"{peak / seqs.tokens_T.size:.1f} bytes a token"


def test_a_documents_draws_are_its_hash_read_little_endian_on_any_host():
    """The draws are defined by the bytes, not the host: SHA-256 of (seed, id), then of (digest,
    block), each read as four little-endian 64-bit words taken from the last; a big-endian host
    reading them natively would write other examples under the same artifact id."""
    rng = packing.DocRng(7, "doc-1")
    key = hashlib.sha256(b"7\x00doc-1").digest()
    block = hashlib.sha256(key + (1).to_bytes(8, "little")).digest()
    want = [int.from_bytes(d[i:i + 8], "little") for d in (key, block) for i in (24, 16, 8, 0)]
    assert [rng._next() for _ in range(8)] == want


def test_a_two_segment_pair_splits_at_every_inner_sentence_boundary_and_never_at_an_end():
    # BERT's A/B split: k uniform in 1 .. len(chunk) - 1, so neither segment is empty; one draw
    # (test_pack_document_rules) cannot tell k = len(chunk) (an empty B) from a good split
    cfg = ExamplesConfig(max_seq_length=32, short_seq_prob=0.0, single_segment_prob=0.0)
    sents = [[10 + i] * 3 for i in range(4)]  # 12 tokens: one chunk of four sentences
    splits = set()
    for seed in range(60):
        (pair,), _ = pack_document(sents, cfg, random.Random(seed))
        a, b = pair
        assert a and b and a + b == [t for s in sents for t in s]
        splits.add(len(a) // 3)
    assert splits == {1, 2, 3}
