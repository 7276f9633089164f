"""The examples stage's Beam graph (see :mod:`corpus.examples` for the stage and its checks).

Recipe, one labelled step a line in :func:`recipe`:
corpus shard paths -> read each shard into batches of ``batch_documents`` documents (line
number, id, sentence strings; unreadable lines become counted ``bad`` records naming file:line)
-> spread the batches over the workers -> tokenise each batch with one ``encode_batch`` call
(one fast tokenizer per worker, loaded in ``setup``) and pack every document into examples
(per-document seeded RNG) -> group by corpus shard -> sort by (line, example) and cut into
``.npy`` shards of at most ``shard_size`` rows -> ``index.json`` and ``stats.json``.

With ``pack_documents`` the packing moves to the grouped step, where a shard's documents are
in corpus order, so crossing document boundaries stays deterministic too.

Counts travel as ``(counter, n)`` side outputs summed in the pipeline (exact on any runner,
unlike best-effort Beam metrics).
"""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from kolectra.corpus import shards
from kolectra.corpus.packing import FORMAT, PAD, SPECIAL_IDS, doc_rng, encode_pairs, make_stats, pack_document
from kolectra.corpus.examples_config import ExamplesConfig

TALLY = "tally"
BAD = "bad"
BAD_FILE = "bad_documents.json"  # written only when there are any; the stage then fails


@dataclasses.dataclass(frozen=True)
class Job:
    """What every step needs; small and picklable (workers get a copy)."""

    cfg: ExamplesConfig
    tokenizer_path: str
    dtype: str
    vocab_size: int
    out_dir: str


# ---------------------------------------------------------------- steps


def read_documents(item: tuple[int, str], batch: int):
    """(shard index, path) -> (shard index, [(line, id, [sentence, ...]), ...]) batches."""
    shard, path = item
    buf: list[tuple[int, str, list[str]]] = []
    with FileSystems.open(path) as f:  # compression from the extension
        line_no = 0
        while True:
            raw = f.readline()
            if not raw:
                break
            line_no += 1
            if not raw.strip():
                continue
            try:
                doc = json.loads(raw)
                sents = shards.sentences(doc)
                doc_id = str(doc["id"])
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as e:
                yield beam.pvalue.TaggedOutput(BAD, f"{path}:{line_no}: no usable 'id'/'text'/'sentences' ({e!r})")
                continue
            buf.append((line_no, doc_id, sents))
            if len(buf) >= batch:
                yield shard, buf
                buf = []
    if buf:
        yield shard, buf


class TokenizeAndPack(beam.DoFn):
    """(shard, documents) -> (shard, block); one tokenizer per worker process, built in ``setup``.

    A block is ``("examples", lines_N, k_N, ids_NL, types_NL)`` (example ``k`` of the document on
    ``line``), or with ``pack_documents`` ``("documents", [(line, [sentence ids]), ...])``."""

    def __init__(self, job: Job):
        self.job = job

    def setup(self):
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(self.job.tokenizer_path)

    def process(self, item):
        shard, docs = item
        cfg = self.job.cfg
        flat = [s for _, _, sents in docs for s in sents]
        encs = self.tok.encode_batch(flat, add_special_tokens=False) if flat else []
        per_doc, i = [], 0
        for line, doc_id, sents in docs:
            per_doc.append((line, doc_id, [e.ids for e in encs[i:i + len(sents)]]))
            i += len(sents)
        yield beam.pvalue.TaggedOutput(TALLY, ("documents", len(docs)))
        yield beam.pvalue.TaggedOutput(TALLY, ("sentences", len(flat)))
        yield beam.pvalue.TaggedOutput(TALLY, ("documents_used", sum(any(s) for _, _, s in per_doc)))
        if cfg.pack_documents:
            yield shard, ("documents", [(line, sent_ids) for line, _, sent_ids in per_doc])
            return
        lines, ks, pairs, truncated = [], [], [], 0
        for line, doc_id, sent_ids in per_doc:
            doc_pairs, cut = pack_document(sent_ids, cfg, doc_rng(cfg.seed, doc_id))
            truncated += cut
            pairs += doc_pairs
            lines += [line] * len(doc_pairs)
            ks += range(len(doc_pairs))
        yield beam.pvalue.TaggedOutput(TALLY, ("truncated_sentences", truncated))
        ids_NL, types_NL = encode_pairs(pairs, cfg.max_seq_length, np.dtype(self.job.dtype))
        yield shard, ("examples", np.asarray(lines, np.int64), np.asarray(ks, np.int64), ids_NL, types_NL)


def shard_examples(shard: int, blocks, job: Job) -> tuple[np.ndarray, np.ndarray, int]:
    """A corpus shard's blocks -> its examples in corpus order (ids, types, truncated sentences)."""
    cfg, dtype = job.cfg, np.dtype(job.dtype)
    if cfg.pack_documents:
        docs = sorted((line, sents) for _, batch in blocks for line, sents in batch)
        stream = [s for _, sents in docs for s in sents]
        # one RNG for the whole shard: its documents form one stream (see examples_config)
        pairs, truncated = pack_document(stream, cfg, doc_rng(cfg.seed, f"{cfg.split}-shard-{shard}"))
        ids_NL, types_NL = encode_pairs(pairs, cfg.max_seq_length, dtype)
        return ids_NL, types_NL, truncated
    blocks = [b for b in blocks if len(b[1])]
    if not blocks:
        empty = np.zeros((0, cfg.max_seq_length), dtype)
        return empty, empty.astype(np.uint8), 0
    lines = np.concatenate([b[1] for b in blocks])
    ks = np.concatenate([b[2] for b in blocks])
    order = np.lexsort((ks, lines))  # (line, k): a stable key, whatever the bundling
    return np.concatenate([b[3] for b in blocks])[order], np.concatenate([b[4] for b in blocks])[order], 0


def _save(path: str, arr: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, arr)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(buf.getvalue())


def write_shard(item, job: Job):
    """(corpus shard, blocks) -> ``data/shard-CCCCC-PPPP.{input_ids,token_type_ids}.npy`` pieces of
    at most ``shard_size`` rows; yields their index entries and the shard's tallies."""
    shard, blocks = item
    ids_NL, types_NL, truncated = shard_examples(shard, list(blocks), job)
    if truncated:
        yield beam.pvalue.TaggedOutput(TALLY, ("truncated_sentences", truncated))
    yield beam.pvalue.TaggedOutput(TALLY, ("examples", len(ids_NL)))
    yield beam.pvalue.TaggedOutput(TALLY, ("tokens", int((ids_NL != PAD).sum())))
    # a two-segment example always has a non-empty B with type 1
    yield beam.pvalue.TaggedOutput(TALLY, ("single_segment_examples", int((~types_NL.any(axis=1)).sum())))
    size = job.cfg.shard_size
    for piece, start in enumerate(range(0, len(ids_NL), size)):
        stem = f"{shards.DATA_DIR}/shard-{shard:05d}-{piece:04d}"
        entry = {"input_ids": f"{stem}.input_ids.npy", "token_type_ids": f"{stem}.token_type_ids.npy",
                 "examples": int(min(size, len(ids_NL) - start))}
        _save(FileSystems.join(job.out_dir, entry["input_ids"]), ids_NL[start:start + size])
        _save(FileSystems.join(job.out_dir, entry["token_type_ids"]), types_NL[start:start + size])
        yield (shard, piece), entry


def _write_json(path: str, obj) -> None:
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write((json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))


def write_index_and_stats(pieces: list, tallies: list, bad: list, job: Job) -> None:
    shards = [entry for _, entry in sorted(pieces, key=lambda p: p[0])]
    tally = dict(tallies)
    tally["bad_documents"] = len(bad)
    if bad:
        _write_json(FileSystems.join(job.out_dir, BAD_FILE), sorted(bad))
    index = {"format": FORMAT, "max_seq_length": job.cfg.max_seq_length, "dtype": job.dtype,
             "vocab_size": job.vocab_size, "pad_id": PAD, "cls_id": SPECIAL_IDS["[CLS]"],
             "sep_id": SPECIAL_IDS["[SEP]"], "mask_id": SPECIAL_IDS["[MASK]"],
             "examples": sum(e["examples"] for e in shards), "shards": shards}
    _write_json(FileSystems.join(job.out_dir, "index.json"), index)
    _write_json(FileSystems.join(job.out_dir, "stats.json"), make_stats(tally, job.cfg.max_seq_length, len(shards)))


# ---------------------------------------------------------------- graph


def recipe(p: beam.Pipeline, job: Job, shard_paths: list[str]) -> None:
    read = (
        p
        | "ListShards" >> beam.Create(list(enumerate(shard_paths)))
        | "SpreadShards" >> beam.Reshuffle()  # one corpus shard per worker at a time
        | "ReadDocuments" >> beam.FlatMap(read_documents, job.cfg.batch_documents).with_output_types(tuple[int, Any]).with_outputs(BAD, main="batches")
    )
    packed = (
        read.batches
        | "SpreadBatches" >> beam.Reshuffle()  # a shard's batches over all workers
        | "TokenizeAndPack" >> beam.ParDo(TokenizeAndPack(job)).with_output_types(tuple[int, Any]).with_outputs(TALLY, main="blocks")
    )
    written = (
        packed.blocks
        | "GroupByCorpusShard" >> beam.GroupByKey()
        | "WriteShards" >> beam.FlatMap(write_shard, job).with_output_types(tuple[Any, Any]).with_outputs(TALLY, main="pieces")
    )
    tallies = (
        (packed[TALLY], written[TALLY])
        | "AllTallies" >> beam.Flatten()
        | "SumTallies" >> beam.CombinePerKey(sum)
        | "CollectTallies" >> beam.combiners.ToList()
    )
    bad = read[BAD] | "CollectBad" >> beam.combiners.ToList()
    _ = (
        written.pieces
        | "CollectPieces" >> beam.combiners.ToList()
        | "WriteIndexAndStats" >> beam.Map(write_index_and_stats, beam.pvalue.AsSingleton(tallies),
                                           beam.pvalue.AsSingleton(bad), job)
    )
