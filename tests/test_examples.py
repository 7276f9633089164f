"""The examples stage: Arrow format (and ``datasets`` reading it), [CLS]/[SEP] layout, segments,
document boundaries, packing several isolated sequences a row, truncation counts, determinism
and workers — on a real Korean corpus with a real vocab (the ``inputs`` fixture). Refusals and bad
input: ``tests/test_examples_refusals.py``."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import random
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pytest
from tokenizers import Tokenizer, models

from kolectra.core.config import override
from kolectra.corpus import examples_beam, shards
from kolectra.corpus.examples import build, truncation_warning
from kolectra.corpus.examples_config import ExamplesConfig
from kolectra.vocab.build import build as build_vocab
from kolectra.vocab.config import VocabConfig
from tests.test_vocab_corpus import documents, korean_sentences, write_corpus

CFG = ExamplesConfig(max_seq_length=40, shard_size=16, seed=3)
NONE = override(CFG, ["packing=none"])  # one sequence a row: the layout tests walk rows in corpus order


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("examples")
    # documents of 1-7 sentences: several examples each at length 40
    docs = documents(korean_sentences(150, seed=1), random.Random(1), 7)
    corpus = write_corpus(root / "corpus", {"train": docs, "valid": docs[:3]})
    vocab = root / "vocab"
    vocab.mkdir()
    build_vocab(VocabConfig(vocab_size=1000, num_unused=0, report_baseline=False), corpus, vocab)
    return {"root": root, "corpus": corpus, "vocab": vocab}


def _build(cfg: ExamplesConfig, inputs: dict, name: str, corpus: Path | None = None,
           beam_args: list[str] = ()) -> tuple[Path, dict]:
    out = inputs["root"] / name
    out.mkdir()
    return out, build(cfg, corpus or inputs["corpus"], inputs["vocab"], out, list(beam_args)).stats


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _resharded(inputs: dict, shards: int) -> Path:
    """The same train documents spread over ``shards`` corpus shard files (round robin)."""
    root = inputs["root"] / f"corpus{shards}"
    if root.exists():
        return root
    (root / "data").mkdir(parents=True)
    with gzip.open(inputs["corpus"] / "data" / "train-00000-of-00001.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = f.readlines()
    for i in range(shards):
        with gzip.open(root / "data" / f"train-{i:05d}-of-{shards:05d}.jsonl.gz", "wt", encoding="utf-8") as f:
            f.writelines(lines[i::shards])
    return root


def _load(out: Path, with_docs: bool = False):
    """(index, input_ids, token_type_ids[, doc_ids]) of an artifact, read with pyarrow alone."""
    index = json.loads((out / "index.json").read_text())
    cols = {k: [] for k in ("input_ids", "token_type_ids", "doc_ids")}
    for s in index["shards"]:
        table = pa.ipc.open_file(pa.memory_map(str(out / s["path"]))).read_all()
        for k in cols:
            col = table.column(k).combine_chunks()
            assert col.type.list_size == index["max_seq_length"] and len(col) == s["examples"]
            cols[k].append(col.values.to_numpy().reshape(len(col), -1))
    ids, types, docs = (np.concatenate(cols[k]) for k in cols)
    return (index, ids, types, docs) if with_docs else (index, ids, types)


def _sequences(ids: np.ndarray, types: np.ndarray, docs: np.ndarray) -> list[tuple[tuple, tuple]]:
    """Every sequence of every row, as (token ids, segment ids), cut where ``doc_ids`` says."""
    out = []
    for row, tt, dd in zip(ids.tolist(), types.tolist(), docs.tolist()):
        for d in range(1, max(dd) + 1):
            cols = [j for j, x in enumerate(dd) if x == d]
            assert cols == list(range(cols[0], cols[-1] + 1))  # contiguous
            out.append((tuple(row[cols[0]:cols[-1] + 1]), tuple(tt[cols[0]:cols[-1] + 1])))
    return out


def _doc_sentence_ids(inputs: dict) -> list[list[list[int]]]:
    tok = Tokenizer.from_file(str(inputs["vocab"] / "tokenizer.json"))
    return [[e.ids for e in tok.encode_batch(shards.sentences(d), add_special_tokens=False)]
            for d in shards.iter_documents(inputs["corpus"], "train")]


def test_format_shapes_and_stats(inputs):
    out, stats = _build(CFG, inputs, "fmt")
    index, ids, types, docs = _load(out, with_docs=True)
    assert {k: index[k] for k in ("format", "max_seq_length", "dtype", "pad_id", "cls_id", "sep_id", "mask_id",
                                  "packing", "columns")} == {
        "format": 2, "max_seq_length": 40, "dtype": "uint16", "pad_id": 0, "cls_id": 2, "sep_id": 3, "mask_id": 4,
        "packing": "isolated", "columns": ["input_ids", "token_type_ids", "doc_ids"]}
    assert index["vocab_size"] == Tokenizer.from_file(str(inputs["vocab"] / "tokenizer.json")).get_vocab_size()
    assert ids.dtype == np.uint16 and types.dtype == docs.dtype == np.uint8
    assert len(index["shards"]) > 1 and all(s["examples"] <= CFG.shard_size for s in index["shards"])
    # pieces of at most shard_size rows, named after the corpus shard they come from
    assert [s["path"] for s in index["shards"]][:2] == ["data/shard-00000-0000.arrow", "data/shard-00000-0001.arrow"]
    assert index["examples"] == stats["examples"] == len(ids)
    assert stats["tokens"] == int((ids != 0).sum()) == int((docs != 0).sum())
    assert stats["padding_share"] == pytest.approx(1 - stats["tokens"] / ids.size, abs=1e-6)
    assert stats["sequences"] == len(_sequences(ids, types, docs)) == int((ids == 2).sum()) > stats["examples"]
    assert stats["documents"] == len(list(shards.iter_documents(inputs["corpus"], "train")))
    assert json.loads((out / "stats.json").read_text()) == stats
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "data", "index.json", "stats.json"]


def test_datasets_loads_the_artifact_directory(inputs, tmp_path, monkeypatch):
    """``datasets.load_dataset(<artifact dir>)`` reads the rows through the dataset card, the same
    rows the pretraining loader reads (docs/examples.md)."""
    import datasets

    from kolectra.model.data import ExampleLoader

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    out, stats = _build(CFG, inputs, "hfds")
    ds = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    assert list(ds) == ["train"] and ds["train"].num_rows == stats["examples"]
    assert ds["train"].column_names == ["input_ids", "token_type_ids", "doc_ids"]
    rows = ds["train"].with_format("numpy")
    _, ids, types, docs = _load(out, with_docs=True)
    assert np.array_equal(rows["input_ids"], ids) and np.array_equal(rows["doc_ids"], docs)
    assert np.array_equal(rows["token_type_ids"], types)
    batch = next(ExampleLoader(out, batch_size=stats["examples"], seed=0, prefetch=0))
    order = np.lexsort(batch["input_ids"].T[::-1])  # the loader shuffles: compare as sets of rows
    assert np.array_equal(batch["input_ids"][order], ids[np.lexsort(ids.T[::-1])])


def _check_layout(seqs: list[tuple[tuple, tuple]]) -> int:
    """Each sequence is [CLS] A [SEP] (B [SEP]) with segment ids 0 then 1; returns the singles."""
    singles = 0
    for row, tt in seqs:
        n = len(row)
        assert row[0] == 2 and row[-1] == 3 and 2 not in row[1:] and 0 not in row and 4 not in row
        seps = [k for k in range(n) if row[k] == 3]
        assert len(seps) in (1, 2) and seps[0] > 1  # segment A is never empty
        if len(seps) == 1:
            singles += 1
            assert tt == (0,) * n
        else:
            assert seps[1] == n - 1 and seps[1] > seps[0] + 1  # B non-empty
            assert tt == (0,) * (seps[0] + 1) + (1,) * (n - seps[0] - 1)
    return singles


def test_packed_rows_hold_whole_isolated_sequences(inputs):
    out, stats = _build(CFG, inputs, "iso")
    _, ids, types, docs = _load(out, with_docs=True)
    seqs = _sequences(ids, types, docs)
    assert _check_layout(seqs) == stats["single_segment_sequences"] > 0
    for row, dd in zip(ids, docs):  # sequences 1, 2, ... left to right, then padding only
        n = int((dd > 0).sum())
        assert (dd[:n] == np.maximum.accumulate(dd[:n])).all() and not row[n:].any() and (row[:n] != 0).all()
        assert ((np.diff(dd[:n]) == 1) == (row[1:n] == 2)).all()  # a new sequence starts exactly at a [CLS]
    # the same sequences as one a row, only placed otherwise: fewer rows, less padding
    plain, plain_stats = _build(NONE, inputs, "iso_none")
    _, p_ids, p_types, p_docs = _load(plain, with_docs=True)
    assert sorted(seqs) == sorted(_sequences(p_ids, p_types, p_docs))
    assert stats["examples"] < plain_stats["examples"] and stats["padding_share"] < plain_stats["padding_share"]
    assert stats["sequences"] == plain_stats["sequences"] == plain_stats["examples"]


def test_cls_sep_layout_and_token_types(inputs):
    out, stats = _build(NONE, inputs, "layout")
    _, ids, types = _load(out)
    singles = 0
    for row, tt in zip(ids.tolist(), types.tolist()):
        n = row.index(0) if 0 in row else len(row)
        assert row[0] == 2 and row[n - 1] == 3 and all(t == 0 for t in row[n:])  # padding only at the end
        seps = [k for k in range(n) if row[k] == 3]
        assert len(seps) in (1, 2) and 2 not in row[1:] and 0 not in row[:n] and 4 not in row
        assert seps[0] > 1  # segment A is never empty
        if len(seps) == 1:
            singles += 1
            assert tt == [0] * len(tt)
        else:
            assert seps[1] == n - 1 and seps[1] > seps[0] + 1  # B non-empty
            assert tt == [0] * (seps[0] + 1) + [1] * (n - seps[0] - 1) + [0] * (len(tt) - n)
    assert singles == stats["single_segment_sequences"] and 0 < singles < len(ids)


def test_examples_never_cross_documents_and_keep_sentence_order(inputs):
    cfg = override(NONE, ["short_seq_prob=0.3", "max_seq_length=14"])  # some sentences are longer than 11
    out, stats = _build(cfg, inputs, "docs")
    _, ids, _ = _load(out)
    limit = cfg.max_seq_length - 3
    docs = [[s[:limit] for s in doc if s] for doc in _doc_sentence_ids(inputs)]
    # walk the examples in order: each is the next run of whole (possibly truncated) sentences of
    # the current document, split into A and B at a sentence boundary
    d = k = 0
    for row in ids.tolist():
        n = row.index(0) if 0 in row else len(row)
        seps = [j for j in range(n) if row[j] == 3]
        a = row[1:seps[0]]
        b = row[seps[0] + 1:seps[1]] if len(seps) == 2 else []
        while k == len(docs[d]):
            d, k = d + 1, 0
        segments = []
        for seg in (a, b):
            if not seg:
                continue
            got = []
            while len(got) < len(seg):
                assert k < len(docs[d]), "an example ran past the end of its document"
                got += docs[d][k]
                k += 1
            assert got == seg  # segment = whole consecutive sentences of one document
            segments.append(seg)
        assert segments
    assert d == len(docs) - 1 and k == len(docs[d])  # every sentence used, in order
    want_truncated = sum(len(s) > limit for doc in _doc_sentence_ids(inputs) for s in doc)
    assert stats["truncated_sentences"] == want_truncated > 0


def test_same_seed_same_bytes_other_seed_other_examples(inputs):
    a, _ = _build(CFG, inputs, "seed_a")
    b, _ = _build(CFG, inputs, "seed_b")
    c, _ = _build(override(CFG, ["seed=4"]), inputs, "seed_c")
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    (_, ids_a, types_a), (_, ids_c, types_c) = _load(a), _load(c)
    assert ids_a.shape != ids_c.shape or not np.array_equal(types_a, types_c)  # other A/B splits


def test_large_vocab_gets_int32(inputs, tmp_path):
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])}
    base = Tokenizer.from_file(str(inputs["vocab"] / "tokenizer.json"))
    for t in base.get_vocab():
        vocab.setdefault(t, len(vocab))
    for i in range(70_000 - len(vocab)):
        vocab[f"[extra{i}]"] = len(vocab)
    big = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    big.normalizer, big.pre_tokenizer = base.normalizer, base.pre_tokenizer
    d = tmp_path / "bigvocab"
    d.mkdir()
    big.save(str(d / "tokenizer.json"))
    out = tmp_path / "out"
    out.mkdir()
    build(CFG, inputs["corpus"], d, out)
    index, ids, _ = _load(out)
    assert index["dtype"] == "int32" and ids.dtype == np.int32 and index["vocab_size"] == 70_000


def test_same_bytes_whatever_the_workers_and_batching(inputs):
    corpus = _resharded(inputs, 3)
    one, stats = _build(CFG, inputs, "w1", corpus, ["--direct_num_workers=1"])
    many, _ = _build(override(CFG, ["batch_documents=4", "batch_bytes=700"]), inputs, "w3", corpus,
                     ["--direct_num_workers=3", "--direct_running_mode=multi_threading"])
    assert _files(one) == _files(many)
    index, ids, _ = _load(one)
    firsts = [s["path"] for s in index["shards"] if s["path"].endswith("-0000.arrow")]
    assert firsts == [f"data/shard-{i:05d}-0000.arrow" for i in range(3)]
    # the same sequences as the one-shard corpus, in other rows (shards are corpus shards)
    single, _ = _build(CFG, inputs, "w_single")
    _, ids_single, types_single, docs_single = _load(single, with_docs=True)
    # three workers on one corpus shard: each reads it and keeps every third batch; same bytes
    parts, _ = _build(override(CFG, ["batch_documents=5"]), inputs, "w_parts", None,
                      ["--direct_num_workers=3", "--direct_running_mode=multi_threading"])
    assert _files(parts) == _files(single)
    assert sorted(_sequences(*_load(one, with_docs=True)[1:])) == sorted(_sequences(ids_single, types_single,
                                                                                    docs_single))
    assert stats["documents"] == 36


def test_a_worker_writes_the_shards_it_made_and_only_a_shared_shard_is_shuffled(tmp_path):
    # One part a shard (as many shards as workers, or more: any corpus of production size): nothing
    # but reports leaves the tokenizing step, so no runner holds a shuffle of the corpus's
    # sequences. Several parts a shard: their blocks meet in the group-by-shard step. (That both
    # write the same bytes: test_same_bytes_whatever_the_workers_and_batching.)
    job = examples_beam.Job(cfg=CFG, tokenizer_path="tokenizer.json", dtype="uint16", vocab_size=100,
                            out_dir=str(tmp_path))
    for parts, steps in ((1, {"TokenizePackAndWrite"}), (2, {"TokenizeAndPack", "GroupByCorpusShard", "WriteShards"})):
        p = beam.Pipeline()
        examples_beam.recipe(p, job, ["a.jsonl.gz", "b.jsonl.gz"], parts)
        transforms = p.to_runner_api().components.transforms.values()
        labels = {t.unique_name for t in transforms}
        assert steps <= labels and not ({"TokenizeAndPack", "TokenizePackAndWrite", "WriteShards"} - steps) & labels
        # the steps that shuffle (a GroupByKey inside): spreading the work items and collecting the
        # reports are the job's own, small; the corpus shards' blocks only with shared shards
        shuffled = {t.unique_name.split("/")[0] for t in transforms if t.spec.urn == "beam:transform:group_by_key:v1"}
        assert shuffled - {"ListWork", "SpreadWork", "CollectReports"} == steps & {"GroupByCorpusShard"}


def test_stream_packing_fills_sequences_across_documents(inputs):
    cfg = override(CFG, ["packing=stream", "short_seq_prob=0", "single_segment_prob=0"])
    packed, stats = _build(cfg, inputs, "packed")
    plain, plain_stats = _build(override(NONE, ["short_seq_prob=0", "single_segment_prob=0"]), inputs, "unpacked")
    assert stats["examples"] < plain_stats["examples"] and stats["padding_share"] < plain_stats["padding_share"]
    _, ids, _ = _load(packed)
    _, plain_ids, _ = _load(plain)
    assert np.isin(ids, [0, 2, 3], invert=True).sum() == np.isin(plain_ids, [0, 2, 3], invert=True).sum()
    # the text of all examples, in order, is every sentence of every document, in corpus order
    sents = [s[:cfg.max_seq_length - 3] for doc in _doc_sentence_ids(inputs) for s in doc]
    text = [t for row in ids.tolist() for t in row if t not in (0, 2, 3)]
    assert text == [t for s in sents for t in s]
    # a sequence ends only when the next sentence does not fit: its text + the next > L - 3
    sizes = (ids != 0).sum(axis=1)
    assert (sizes[:-1] - 2 > cfg.max_seq_length - 3 - max(map(len, sents))).all()
    again, _ = _build(cfg, inputs, "packed2")
    assert _files(packed) == _files(again)
    _, _, _, docs = _load(packed, with_docs=True)
    assert np.array_equal(docs, (ids != 0).astype(np.uint8))  # one "document" a row: attention crosses them


def test_holdout_ids_keep_documents_out_of_the_examples(inputs, tmp_path):
    docs = list(shards.iter_documents(inputs["corpus"], "train"))
    held = [str(d["id"]) for d in docs[::3]]
    (tmp_path / "held.txt").write_text("".join(f"{i}\n" for i in held) + "no-such-id\n")
    out, stats = _build(override(CFG, [f"holdout_ids={tmp_path / 'held.txt'}"]), inputs, "held")
    _, base = _build(CFG, inputs, "unheld")
    assert stats["held_out_documents"] == len(held) and base["held_out_documents"] == 0
    assert stats["documents"] + stats["held_out_documents"] == base["documents"] == len(docs)
    assert stats["sequences"] < base["sequences"]
    # each document is cut by its own seeded RNG: the rows hold exactly the other documents' sequences
    from collections import Counter
    held_seqs = Counter(_sequences(*_load(out, with_docs=True)[1:]))
    base_seqs = Counter(_sequences(*_load(inputs["root"] / "unheld", with_docs=True)[1:]))
    assert held_seqs <= base_seqs and sum(held_seqs.values()) == stats["sequences"]


@pytest.mark.parametrize("threads, expected", [(1, {"TOKENIZERS_PARALLELISM": "false"}), (3, {"RAYON_NUM_THREADS": "3"})])
def test_a_worker_process_keeps_the_tokenizer_to_its_share_of_the_cores(inputs, monkeypatch, threads, expected):
    for name in ("TOKENIZERS_PARALLELISM", "RAYON_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)  # and restored after: setup writes this process's environment
    job = examples_beam.Job(cfg=CFG, tokenizer_path=str(inputs["vocab"] / "tokenizer.json"), dtype="uint16",
                            vocab_size=100, out_dir="unused", worker_processes=True, tokenizer_threads=threads)
    examples_beam.TokenizeAndPack(job).setup()
    assert {k: v for k in ("TOKENIZERS_PARALLELISM", "RAYON_NUM_THREADS") if (v := os.environ.get(k))} == expected


def test_the_in_process_worker_tokenizes_on_one_thread_below_the_multi_worker_size(inputs, monkeypatch):
    from kolectra.corpus.examples import tokenizer_threads
    from kolectra.corpus.runners import MULTI_WORKER_MIN_BYTES, pipeline_options

    local = pipeline_options(["--direct_num_workers=1"])
    assert tokenizer_threads(local, MULTI_WORKER_MIN_BYTES - 1, processes=False) == 1
    assert tokenizer_threads(local, MULTI_WORKER_MIN_BYTES, processes=False) == (os.cpu_count() or 1)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    job = examples_beam.Job(cfg=CFG, tokenizer_path="unused", dtype="uint16", vocab_size=100, out_dir="unused",
                            tokenizer_threads=1)
    with examples_beam.in_process_tokenizer(job):
        assert os.environ["TOKENIZERS_PARALLELISM"] == "false"  # this process is the worker
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"  # and the launcher's setting is back
    monkeypatch.delenv("TOKENIZERS_PARALLELISM")
    with examples_beam.in_process_tokenizer(dataclasses.replace(job, tokenizer_threads=2)):
        assert "TOKENIZERS_PARALLELISM" not in os.environ
    with examples_beam.in_process_tokenizer(job):
        pass
    assert "TOKENIZERS_PARALLELISM" not in os.environ


def test_many_sentences_cut_to_fit_a_sequence_are_warned():
    said = truncation_warning({"truncated_sentences": 2_200, "sentences": 10_000}, 16)
    assert said.startswith("examples: 22% of the sentences (2,200 of 10,000) were longer than a sequence of 16 tokens")
    assert truncation_warning({"truncated_sentences": 40, "sentences": 10_000}, 128) is None  # 0.4 %: counted only
    assert truncation_warning({"truncated_sentences": 0, "sentences": 0}, 128) is None
