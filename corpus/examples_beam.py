"""The examples stage's Beam graph (see :mod:`corpus.examples` for the stage and its checks).

Recipe, one labelled step a line in :func:`recipe`:
corpus shard paths -> read each shard into batches of ``batch_documents`` raw lines -> spread
the batches over the workers -> parse them (line number, id, sentence strings; unreadable lines
become ``bad`` reports naming file:line), tokenise each batch with one ``encode_batch_fast``
call (one fast tokenizer per worker, loaded in ``setup``) and cut every document into ELECTRA
sequences (per-document seeded RNG), kept as flat arrays -> group by corpus shard -> sort the
shard's sequences by (line, sequence), fill rows (:mod:`corpus.packing`: several isolated
sequences a row by default) and cut into Arrow shards of at most ``shard_size`` rows ->
``index.json``, ``stats.json`` and the dataset card (:mod:`corpus.examples_format`).

When every work item is a whole corpus shard (as many shards as workers or more: any corpus
of production size), the worker that made a shard's sequences writes the shard itself and
nothing but reports crosses between steps: no shuffle. The group-by-shard step is there only
when several workers share a shard. A shuffle's data sits in one process on Beam's local runner
(the launcher) and goes through the data channel to a worker a group at a time: the examples of a
34 GB corpus would have held about 24 GB in the launcher, and a worker a few groups ahead of the
one it writes (docs/scale.md).

With ``packing=stream`` the cutting moves to the grouped step, where a shard's documents are in
corpus order, so crossing document boundaries stays deterministic too.

Work items are large (thousands of documents): each element between two steps costs Beam a
fixed overhead (coding, bundling), and with few large ones the job runs close to a plain loop
over the same functions (``benchmarks/examples.py``). The reader only decompresses and splits
lines, so the parsing too runs on every worker.

Counts, bad lines and the written pieces travel as small reports, summed into one at the end
(exact on any runner, unlike best-effort Beam metrics; one collecting step rather than one
per kind keeps the graph, and its start-up, small).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import zlib
from collections import Counter
from typing import Any, Iterator

import apache_beam as beam
import numpy as np
import pyarrow as pa

from kolectra.core import storage
from kolectra.core.errors import UserInputError
from kolectra.corpus import compress, input_reads, shards
from kolectra.corpus.examples_config import ExamplesConfig
from kolectra.corpus.examples_format import arrow_file, dataset_card, index_document, shard_name
from kolectra.corpus.outputs import (
    REPORT_FILE,  # the written files' entries, for the launcher
    keep_smallest,
)
from kolectra.corpus.packing import (
    PAD,
    SPECIAL_IDS,
    Cuts,
    Documents,
    Placement,
    Sequences,
    doc_rng,
    encode_pieces,
    fill_rows,
    make_stats,
    one_per_row,
    pack_document,
)

REPORT = "report"  # side output: ("tally", counter, n), ("bad", message) or ("piece", (shard, piece), entry)

BAD_FILE = "bad_documents.json"  # written only when there are any; the stage then fails
BAD_NAMED = 100  # bad documents named in BAD_FILE, the first by message (all of them are counted)
READ_BYTES = 8 << 20  # decompressed bytes read at a time; lines are split from these blocks


@dataclasses.dataclass(frozen=True)
class Job:
    """What every step needs; small and picklable (workers get a copy)."""

    cfg: ExamplesConfig
    tokenizer_path: str
    dtype: str
    vocab_size: int
    out_dir: str
    # The tokenizer's threads in each worker (corpus/examples.py: tokenizer_threads). Left alone,
    # the tokenizer starts one per core in every worker process, contending with the other
    # workers for the same cores; worker processes set theirs in TokenizeAndPack.setup, an
    # in-process worker through in_process_tokenizer (the launcher's setting comes back after).
    worker_processes: bool = False
    tokenizer_threads: int = 1


# ---------------------------------------------------------------- steps


def _open(path: str):
    """A corpus file (local, or on a store: read in place, through :mod:`kolectra.core.storage`),
    decompressed by its extension."""
    raw = input_reads.open_input(path)  # a local path only while it is a regular file: a FIFO would hang
    return compress.Gzip(raw) if path.endswith(".gz") else raw  # closed, it closes raw (GzipFile left it open)


def read_lines(path: str, batch: int, part: int = 0, parts: int = 1, batch_bytes: int | None = None):
    """Batches of raw lines of a corpus shard: ``(first line number, [line, ...])``, each of
    ``batch`` lines or, where they come first, of ``batch_bytes`` bytes or more (a batch is held
    tokenised, so its size in bytes is what a worker holds: long documents made a batch of
    ``batch`` lines gigabytes); only every ``parts``-th batch from the ``part``-th on. Whole
    decompressed blocks are split into lines (no Python ``readline`` per line); skipped batches
    cost only their decompression. A block's batches are taken at an index and the rest kept once
    a block: cutting the front off the list at each batch copied the rest each time, quadratic in a
    block's lines. A line longer than a block is gathered in parts and joined once."""
    b, first, lines, tail = 0, 1, [], []
    with _open(path) as f:
        while True:
            block = _read_block(f, path)
            if not block:
                break
            if b"\n" not in block:
                tail.append(block)
                continue
            pieces = (b"".join((*tail, block)) if tail else block).split(b"\n")
            tail = [pieces.pop()]
            lines += pieces
            at = 0
            while True:
                end = _batch_end(lines, at, batch, batch_bytes)
                if end is None:
                    break
                if b % parts == part:
                    yield first, lines[at:end]
                b, first, at = b + 1, first + end - at, end
            del lines[:at]
    if tail := b"".join(tail):
        lines.append(tail)
    while lines:
        end = _batch_end(lines, 0, batch, batch_bytes) or len(lines)
        if b % parts == part:
            yield first, lines[:end]
        b, first, lines = b + 1, first + end, lines[end:]


def _batch_end(lines: list[bytes], at: int, batch: int, batch_bytes: int | None) -> int | None:
    """Where the batch that starts at ``lines[at]`` ends: after ``batch`` lines, or after the line
    that brings it to ``batch_bytes`` (a line's newline counted); None while ``lines`` has neither."""
    end = min(at + batch, len(lines))
    if batch_bytes is not None:
        size = 0
        for i in range(at, end):
            size += len(lines[i]) + 1
            if size >= batch_bytes:
                return i + 1
    return end if end - at == batch else None


def _read_block(f, path: str) -> bytes:
    """The next decompressed block of a corpus file; a damaged one (cut off, not gzip, a bad CRC)
    is refused naming the file, where the decompressor's error named nothing (``EOFError:
    Compressed file ended before the end-of-stream marker was reached [while running ...]``)."""
    try:
        return f.read(READ_BYTES)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise UserInputError(f"{path}: damaged corpus shard, it cannot be read to its end ({type(e).__name__}: {e}): "
                             "`kolectra artifacts verify` the corpus, or rebuild it") from None


def _text_sentences(doc: dict) -> list[str]:
    """:func:`shards.sentences` of a document whose ``text`` is a string the tokenizer can take: a
    list would be read as a pair of texts (or fail the whole batch), a lone surrogate (valid JSON,
    no UTF-8 spelling; the corpus stage never writes one) failed the whole batch's encoding."""
    sents = shards.sentences(doc)
    if not isinstance(doc["text"], str):
        raise TypeError(f"'text' is {type(doc['text']).__name__}, not a string")
    try:
        doc["text"].encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"'text' has a lone surrogate at character {e.start} (no UTF-8 spelling)") from None
    return sents


def parse_documents(path: str, first: int, lines: list[bytes]):
    """Raw lines -> ``[(line, id, [sentence, ...]), ...]`` and ``("bad", "file:line: why")`` reports."""
    docs, bad = [], []
    for line_no, raw in enumerate(lines, start=first):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
            docs.append((line_no, str(doc["id"]), _text_sentences(doc)))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as e:
            bad.append(("bad", f"{path}:{line_no}: no usable 'id'/'text'/'sentences' ({e!r})"))
    return docs, bad


def read_holdout(path: str) -> frozenset[str]:
    """The document ids of ``ExamplesConfig.holdout_ids`` (empty without a file)."""
    if not path:
        return frozenset()
    with _open(path) as f:
        return frozenset(line.strip() for line in f.read().decode("utf-8").splitlines() if line.strip())


def _tally(name: str, n: int):
    return beam.pvalue.TaggedOutput(REPORT, ("tally", name, n))


@contextlib.contextmanager
def in_process_tokenizer(job: Job) -> Iterator[None]:
    """Around a job whose worker is this process: hold the tokenizer to one thread while it runs
    when ``job.tokenizer_threads`` is 1 (``TOKENIZERS_PARALLELISM`` is read at each batch call),
    then give the process its own setting back. Worker processes set theirs in ``setup``."""
    if job.worker_processes or job.tokenizer_threads > 1:
        yield
        return
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


class TokenizeAndPack(beam.DoFn):
    """(index, [(shard, path, part, parts)]) -> (shard, block) per batch of the work item's lines;
    one tokenizer per worker process, built in ``setup``. With ``write`` (each work item a whole
    shard) the shard's blocks stay here and the shard is written at the item's end
    (:func:`write_shard`): only its reports go out.

    A block is ``("sequences", Sequences)``: every document cut into ELECTRA sequences with its own
    seeded RNG, as flat arrays (no padding travels between the steps). With ``packing=stream``
    it is ``("documents", Documents)``: the cutting needs the whole shard (:func:`stream_block`)."""

    def __init__(self, job: Job, write: bool = False):
        self.job, self.write = job, write

    def setup(self):
        if self.job.worker_processes and self.job.tokenizer_threads <= 1:
            os.environ["TOKENIZERS_PARALLELISM"] = "false"  # read by tokenizers at each batch call
        elif self.job.worker_processes:  # read when the tokenizer's thread pool starts, at its first batch
            os.environ["RAYON_NUM_THREADS"] = str(self.job.tokenizer_threads)
        from tokenizers import Tokenizer  # noqa: PLC0415 - in the Beam worker, not at pickling time

        self.tok = Tokenizer.from_str(storage.read_bytes(self.job.tokenizer_path).decode("utf-8"))
        self.tok.encode_special_tokens = True  # "[MASK]" in text is text (not saved in tokenizer.json)
        self.unk = self.tok.token_to_id("[UNK]")  # counted: a vocab of other text can leave most of it unknown
        self.holdout = read_holdout(self.job.cfg.holdout_ids)

    def process(self, keyed):
        _, items = keyed  # (index, [work item]): the GroupByKey that spread the work over the workers
        for shard, path, part, parts in items:
            # A work item's reports go out once, at its end: its tallies summed, and of its bad
            # lines the count and the BAD_NAMED first by message (the job's first BAD_NAMED are
            # among them), so it sends a few, never one per batch or per bad line (a corpus
            # without 'sentences' has nothing but bad lines); CollectReports sums them as they come.
            # Every work item reports, even an empty shard: CollectReports has no default for an empty job.
            if self.write and parts != 1:  # a programming error: recipe() writes in place only whole shards
                raise ValueError(f"shard {shard}: a work item writes its shard only when it has all of it, "
                                 f"not part {part} of {parts}")
            tally, bad, blocks = Counter(documents=0), [], []
            for first, lines in read_lines(path, self.job.cfg.batch_documents, part, parts, self.job.cfg.batch_bytes):
                for shard_block in self._batch(shard, path, first, lines, tally, bad):
                    if self.write:
                        blocks.append(shard_block[1])
                    else:
                        yield shard_block
            for name, n in sorted(tally.items()):
                yield _tally(name, n)
            for message in bad:
                yield beam.pvalue.TaggedOutput(REPORT, ("bad", message))
            if self.write:
                for report in write_shard((shard, blocks), self.job):
                    yield beam.pvalue.TaggedOutput(REPORT, report)

    def _batch(self, shard: int, path: str, first: int, lines: list[bytes], tally: Counter, named: list):
        cfg = self.job.cfg
        docs, bad = parse_documents(path, first, lines)
        if bad:
            tally["bad_documents"] += len(bad)
            for _, message in bad:
                keep_smallest(named, message, BAD_NAMED)
        if self.holdout:
            kept = [d for d in docs if d[1] not in self.holdout]
            tally["held_out_documents"] += len(docs) - len(kept)
            docs = kept
        flat = [s for _, _, sents in docs for s in sents]
        encs = self.tok.encode_batch_fast(flat, add_special_tokens=False) if flat else []
        per_doc, i = [], 0
        for line, doc_id, sents in docs:
            per_doc.append((line, doc_id, [e.ids for e in encs[i:i + len(sents)]]))
            i += len(sents)
        tally["documents"] += len(docs)
        tally["sentences"] += len(flat)
        tally["text_tokens"] += sum(len(e.ids) for e in encs)
        tally["unk_tokens"] += sum(e.ids.count(self.unk) for e in encs) if self.unk is not None else 0
        tally["documents_used"] += sum(any(s) for _, _, s in per_doc)
        if cfg.packing == "stream":
            yield shard, ("documents", stream_block([(line, sent_ids) for line, _, sent_ids in per_doc],
                                                    np.dtype(self.job.dtype)))
            return
        line_U, ks, pairs, truncated, lost = [], [], [], 0, 0
        for line, doc_id, sent_ids in per_doc:
            doc_pairs, cut = pack_document(sent_ids, cfg, doc_rng(cfg.seed, doc_id))
            truncated += cut.sentences
            lost += cut.tokens
            pairs += doc_pairs
            line_U += [line] * len(doc_pairs)
            ks += range(len(doc_pairs))
        tally["truncated_sentences"] += truncated
        tally["truncated_tokens"] += lost
        yield shard, ("sequences", Sequences.from_pairs(pairs, line_U, ks, np.dtype(self.job.dtype)))


def stream_block(docs: list[tuple[int, list[list[int]]]], dtype: np.dtype) -> Documents:
    """``packing=stream``'s block: a batch's documents as columns, since its shard's step holds every
    block of the shard at once (about 6 bytes a token in all, 58 as lists of Python ints:
    ``benchmarks/stream_packing.py``)."""
    return Documents.from_lists(docs, dtype)


def shard_rows(shard: int, blocks, job: Job) -> tuple[Sequences, Placement, Cuts]:
    """A corpus shard's blocks -> its sequences in corpus order, where each goes in the rows, and
    the truncations made here (``packing=stream``'s; the other packings cut each batch as it is
    tokenised, and count there).

    Sequences are put in corpus order first, and the rows are a pure function of that order, so
    the bytes do not depend on how Beam bundled the documents."""
    cfg = job.cfg
    truncated = Cuts()
    if cfg.packing == "stream":
        stream = Documents.concat([batch for _, batch in blocks]).sentences_by_line()
        # one RNG for the whole shard: its documents form one stream (see examples_config)
        seqs, truncated = Sequences.from_stream(stream, cfg, doc_rng(cfg.seed, f"{cfg.split}-shard-{shard}"),
                                                np.dtype(job.dtype))
    else:
        seqs = Sequences.concat([b for _, b in blocks]).in_corpus_order()
    lengths = seqs.lengths()
    place = fill_rows(lengths, cfg.max_seq_length) if cfg.packing == "isolated" else one_per_row(lengths)
    return seqs, place, truncated


def _write_bytes(out_dir: str, rel: str, data: bytes | pa.Buffer) -> dict:
    """One file of the artifact; its entry (path, bytes, sha256) computed here, where it is written.
    An Arrow buffer is written as it is to a local file; a store's client takes ``bytes`` only."""
    path = storage.join(out_dir, rel)
    if isinstance(data, pa.Buffer) and storage.is_url(path):
        data = data.to_pybytes()
    try:
        return {"path": rel, **storage.write_bytes(path, data)}
    except OSError as e:  # a full disk: name the file (the library's report of the failure would not)
        raise OSError(e.errno, e.strerror, path) from e


def write_shard(item, job: Job):
    """(corpus shard, blocks) -> ``data/shard-CCCCC-PPPP.arrow`` pieces of at most ``shard_size``
    rows; yields the shard's reports: tallies and the pieces' index entries. The rows are made a
    piece at a time (:func:`corpus.packing.encode_pieces`): the memory is the shard's sequences
    (a few bytes a token) and one piece, never the whole shard's rows."""
    shard, blocks = item
    seqs, place, truncated = shard_rows(shard, list(blocks), job)
    yield "tally", "truncated_sentences", truncated.sentences
    yield "tally", "truncated_tokens", truncated.tokens
    yield "tally", "examples", place.rows
    yield "tally", "sequences", len(seqs)
    yield "tally", "sequence_text_tokens", seqs.text_tokens()
    yield "tally", "single_segment_sequences", int((seqs.b_U == 0).sum())
    size, tokens = job.cfg.shard_size, 0
    pieces = encode_pieces(seqs, place, job.cfg.max_seq_length, np.dtype(job.dtype), size) if place.rows else ()
    for piece, (ids_NL, types_NL, docs_NL) in enumerate(pieces):
        tokens += int((ids_NL != PAD).sum())
        entry = {"path": shard_name(shard, piece), "examples": len(ids_NL)}
        written = _write_bytes(job.out_dir, entry["path"], arrow_file(ids_NL, types_NL, docs_NL))
        yield "piece", (shard, piece), entry
        yield "file", written
    yield "tally", "tokens", tokens


def _write_json(out_dir: str, rel: str, obj) -> dict:
    return _write_bytes(out_dir, rel, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))


class CollectReports(beam.CombineFn):
    """Every report of the job -> ``(tallies, bad, pieces, files)``, summed as they come: the tallies
    added up, the ``BAD_NAMED`` first bad messages by text, each piece's index entry and each written
    file's entry. What the worker that writes the index holds is a few tallies, ``BAD_NAMED``
    messages and two entries a piece (the index itself), whatever the number of work items; a list of
    every report held each work item's tallies and up to ``BAD_NAMED`` messages of its own."""

    def create_accumulator(self):
        return {}, [], [], []

    def add_input(self, acc, report):
        tally, bad, pieces, files = acc
        kind = report[0]
        if kind == "tally":
            tally[report[1]] = tally.get(report[1], 0) + report[2]
        elif kind == "bad":
            keep_smallest(bad, report[1], BAD_NAMED)
        elif kind == "piece":
            pieces.append(report[1:])
        elif kind == "file":
            files.append(report[1])
        else:  # a programming error: a report this step does not know would be lost
            raise ValueError(f"unknown report {kind!r}")
        return acc

    def merge_accumulators(self, accs):
        tally, bad, pieces, files = self.create_accumulator()
        for t, b, p, f in accs:
            for name, n in t.items():
                tally[name] = tally.get(name, 0) + n
            bad = sorted(bad + list(b))[:BAD_NAMED]
            pieces += p
            files += f
        return tally, bad, pieces, files

    def extract_output(self, acc):
        return acc


def write_index_and_stats(reports: tuple, job: Job) -> None:
    """The job's reports, as :class:`CollectReports` sums them -> ``index.json``, ``stats.json``, ``README.md``."""
    tally, bad, pieces, files = reports
    bad = sorted(bad)[:BAD_NAMED]  # the count is the bad_documents tally
    written = list(files)
    if bad:
        written.append(_write_json(job.out_dir, BAD_FILE, bad))
    cfg = job.cfg
    index = index_document(cfg.max_seq_length, job.dtype, job.vocab_size, cfg.packing, SPECIAL_IDS,
                           [entry for _, entry in sorted(pieces, key=lambda p: p[0])])
    stats = make_stats(tally, cfg.max_seq_length, len(index["shards"]))
    written.append(_write_json(job.out_dir, "index.json", index))
    written.append(_write_json(job.out_dir, "stats.json", stats))
    written.append(_write_bytes(job.out_dir, "README.md", dataset_card(cfg.split, index, stats).encode("utf-8")))
    # every written file's entry, for the launcher (which reads and removes it; never in the artifact)
    _write_bytes(job.out_dir, REPORT_FILE, json.dumps(sorted(written, key=lambda e: e["path"])).encode("utf-8"))


# ---------------------------------------------------------------- graph


def recipe(p: beam.Pipeline, job: Job, shard_paths: list[str], parts_per_shard: int = 1) -> None:
    """``parts_per_shard``: how many workers share one corpus shard (each reads it whole and
    keeps every ``parts``-th batch): enough for all workers to have work when there are fewer
    shards than workers, and nothing but compact sequences crosses between worker processes. With
    one part a shard, each worker writes the shards it made: no shuffle (module docstring)."""
    work = [(shard, path, part, parts_per_shard) for shard, path in enumerate(shard_paths)
            for part in range(parts_per_shard)]
    whole = parts_per_shard == 1
    # Beam's graph is the job's fixed cost (most of the gap to a plain loop on small inputs): a
    # GroupByKey on each item's index spreads the work as Reshuffle would, and ToList without its
    # empty-input default skips the side input that adds, at about 40 ms less each (docs/benchmarks.md)
    packed = (
        p
        | "ListWork" >> beam.Create(list(enumerate(work)))
        | "SpreadWork" >> beam.GroupByKey()  # a (shard, part) per worker at a time
        | ("TokenizePackAndWrite" if whole else "TokenizeAndPack")
        >> beam.ParDo(TokenizeAndPack(job, write=whole)).with_output_types(tuple[int, Any]).with_outputs(REPORT, main="blocks")
    )
    written = () if whole else (
        packed.blocks
        | "GroupByCorpusShard" >> beam.GroupByKey()
        | "WriteShards" >> beam.FlatMap(write_shard, job).with_output_types(tuple),
    )
    _ = (
        (packed[REPORT], *written)
        | "AllReports" >> beam.Flatten()
        | "CollectReports" >> beam.CombineGlobally(CollectReports()).without_defaults()  # summed as they come
        | "WriteIndexAndStats" >> beam.Map(write_index_and_stats, job)
    )
