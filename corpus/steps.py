"""The corpus job's Beam steps (``corpus/build.py`` wires them into the graph): reading and
cleaning a file, exact dedup inside a bucket, ids shared by different texts, Kiwi analysis and
placement into shards.

Elements are large on purpose: a file's survivors travel to the dedup shuffle in chunks of up to
:data:`ReadAndClean.CHUNK` documents per bucket, and a bucket's unique documents go to Kiwi in
lists, because Beam's per-element cost (coding, gRPC, the runner's grouping) was a tenth of the
stage when every document was its own element (``benchmarks/corpus.py``). The chunks cross both
shuffles compressed (:func:`outputs.pack_chunk`). Chunks wait per key only up to a budget for the
step (:class:`corpus.chunks.KeyedChunks`, 64 MB), since the keys grow with the corpus. Counts and samples
are kept per file or bucket on the worker and emitted once. Every step adds its progress to a
:class:`corpus.progress.WorkerCounts`.
"""

from __future__ import annotations

import json
import sys
import zlib

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from kolectra.corpus import filters, input_reads, inputs, neardup, outputs, piece_reader, pieces, reader, webtext
from kolectra.corpus import text as text_rules
from kolectra.corpus.chunks import KeyedChunks, value_size
from kolectra.corpus.config import CorpusConfig
from kolectra.corpus.drops import DROPS, DropChunks
from kolectra.corpus.outputs import ANALYSER_PROBE, SAMPLES_KEPT, SAMPLES_PER_REASON, SPLIT_COUNTS
from kolectra.corpus.progress import WorkerCounts
from kolectra.corpus.read_failures import note as note_failed_read
from kolectra.corpus.record_rules import error_text
from kolectra.corpus.runners import tune_gc
from kolectra.corpus.segment import make_segmenter, segment_each
from kolectra.corpus.shards import value_kind

TALLY = neardup.TALLY  # the tag of (counter, n) side outputs
SAMPLES = neardup.SAMPLES  # the tag of (reason, (rank, JSON row)) side outputs
REJECTED = "rejected"
ANALYSIS_FAILED = "analysis_failed"  # the reject of a document the analyser (Kiwi) raised an error on
FILES = "files"  # the tag of (source, {records_in, rejected, bytes, sha256, damaged?, changed?}) per input file
DROPPED = "dropped"
SHARED_ID = ("ids", "duplicate_id_different_text")  # the tally of kept documents whose id is not unique
MISSING_FIELD = outputs.MISSING_FIELD  # the tally of written documents without one kept field
FIELD_KIND = outputs.FIELD_KIND  # the tally of a kept field's non-null values by JSON kind


def _count(tally: dict, key, n: int = 1) -> None:
    tally[key] = tally.get(key, 0) + n


def _offer(samples: dict, reason: str, doc: dict, seed: int, n: int) -> None:
    """Keep ``doc`` among this worker's ``n`` (``samples_per_reason``) smallest-ranked samples of ``reason``."""
    rows = samples.setdefault(reason, [])
    rank = outputs.sample_rank(doc, seed)
    if len(rows) < n or rank < rows[-1][0]:
        outputs.keep_smallest(rows, outputs.sample_item(reason, doc, seed)[1], n)


# ---------------------------------------------------------------- Beam steps


class ReadAndClean(beam.DoFn):
    """An input file (or a piece of a large one: ``corpus/pieces.py``) and its source name ->
    (bucket, [(key, source, line, id, text), ...]) chunks of the records that survive cleaning and
    filtering (with ``keep_fields``, a sixth item: the fields' values), packed
    (:func:`outputs.pack_chunk`) for the dedup shuffle;
    rejects; and, once per file, its tallies, its dropped samples and what was read (bytes,
    sha256, damage, change since the listing; a piece's part of that row goes to
    ``pieces.PIECE_ROWS``). Each file comes with its name: a table of all of
    them in the step would make every worker hold one entry per input file (24 MB at 100,000)."""

    CHUNK = 2048

    def __init__(self, cfg: CorpusConfig, buckets: int, progress_dir: str | None):
        self.cfg = cfg
        self.buckets = buckets
        self.progress_dir = progress_dir

    def setup(self):
        self.counts = WorkerCounts(self.progress_dir)

    def process(self, keyed: tuple[int, list[tuple]]):
        # (index, [(file, source)]) or ((index, piece), [(file, source, Piece)]) of a large file
        # (corpus/pieces.py): the GroupByKey that spread the work
        for work in keyed[1]:
            yield from self._read(*work)

    def _read(self, listed: inputs.InputFile, source: str, piece: pieces.Piece | None = None):
        cfg = self.cfg
        rules = dict(strip_html=cfg.strip_html, mask_pii=cfg.mask_pii, max_repeat=cfg.max_repeat, language=cfg.language)
        tally: dict = {}
        samples: dict = {}
        chunks = KeyedChunks(self.CHUNK)  # waiting chunks: at most chunks.BUDGET, whatever the file or bucket count
        drops = DropChunks(cfg.num_shards) if cfg.write_dropped else None  # every drop (corpus/drops.py)
        digest: dict = {}
        damaged = None
        lines = kept = rejected = reported = sent_bytes = 0
        read = (reader.read_file(listed.where, source, cfg.format, cfg.text_field, cfg.id_field, cfg.max_line_bytes,
                                 digest, cfg.keep_fields) if piece is None else
                piece_reader.read_piece(listed.where, source, cfg.format, cfg.text_field, cfg.id_field, cfg.max_line_bytes,
                                  piece, digest, cfg.keep_fields))
        failed: list[str] = []  # why the server or store failed the read after the listing (read_failures)
        for rec in _until_failed(read, failed):
            lines += 1
            reason = rec.get("reason")
            if reason is not None:
                if reason == "damaged_file" and damaged is None:  # the first, as a file read as pieces names it
                    damaged = rec["detail"]
                _count(tally, ("rejected", reason))
                rejected += 1
                yield beam.pvalue.TaggedOutput(REJECTED, rec)
                continue
            if "repaired" in rec:
                _count(tally, ("repaired", rec["repaired"]))
            cleaned = text_rules.clean(rec["text"], **rules)
            text, reason = filters.judge(cleaned, cfg)
            if reason is not None:
                _count(tally, (DROPPED, reason))
                # cleaned text and the id a kept document's would be: never unmasked personal data
                # (corpus 18 and before showed an id that mask_pii drops in samples/dropped.jsonl)
                dropped = {**rec, "id": self._id(rec, source), "text": cleaned}
                _offer(samples, reason, dropped, cfg.seed, cfg.samples_per_reason)
                if drops:
                    for item in drops.add(reason, dropped):
                        yield beam.pvalue.TaggedOutput(DROPS, item)
                continue
            doc_id = self._id(rec, source)
            key = outputs.text_key(text)
            bucket = outputs.bucket_of(key, self.buckets)
            # the fields ride along only when asked for: without them the elements are as before
            item = ((key, source, rec["line"], doc_id, text, rec["fields"]) if cfg.keep_fields
                    else (key, source, rec["line"], doc_id, text))
            size = sys.getsizeof(text) + sys.getsizeof(doc_id) + (value_size(rec["fields"]) if cfg.keep_fields else 0)
            for out_bucket, chunk in chunks.add(bucket, item, size):
                yield out_bucket, outputs.pack_chunk(chunk)
            kept += 1
            if lines - reported >= 4096:  # progress: the raw bytes read so far, records, kept
                now = digest["raw"].bytes
                self.counts.add(read=lines - reported, kept=kept, bytes=now - sent_bytes)
                reported, kept, sent_bytes = lines, 0, now
        yield from ((bucket, outputs.pack_chunk(chunk)) for bucket, chunk in chunks.drain())
        yield from (beam.pvalue.TaggedOutput(DROPS, item) for item in (drops.drain() if drops else ()))
        self.counts.add(read=lines - reported, kept=kept, bytes=digest.get("bytes", 0) - sent_bytes)
        self.counts.flush()
        if failed:  # the job's outcome is known: the launcher stops it now, not after every other file's read
            note_failed_read(self.progress_dir, listed.path, failed[0])
        # totals only: the file's own counts ride in its row, so no tally key is per file
        tally[outputs.RECORDS_IN] = lines
        if piece is None:  # a piece's file is counted by its plan (pieces.PlanPieces)
            tally[outputs.INPUT_FILES] = 1
        for item in tally.items():
            yield beam.pvalue.TaggedOutput(TALLY, item)
        for reason, rows in samples.items():
            for row in rows:
                yield beam.pvalue.TaggedOutput(SAMPLES, (reason, row))
        if piece is None:
            row = {"records_in": lines, "rejected": rejected, **_file_record(listed, digest, damaged)}
            if failed:
                row[outputs.READ_FAILED] = failed[0]
            yield beam.pvalue.TaggedOutput(FILES, (source, row))
        else:  # the piece's part of its file's row, combined with the others' (pieces.CombineRows)
            row = {"at": piece.start, "records_in": lines, "rejected": rejected}
            if damaged:
                row["damaged"] = damaged
            changed = None if failed else pieces.piece_changed(listed, piece, digest.get("bytes", 0), digest.get("identity"))
            if changed:
                row["changed"] = changed
            if failed:
                row[outputs.READ_FAILED] = failed[0]
            yield beam.pvalue.TaggedOutput(pieces.PIECE_ROWS, (source, row))


    def _id(self, rec: dict, source: str) -> str:
        doc_id = rec["id"]
        if self.cfg.mask_pii and webtext.mask_pii(doc_id, self.cfg.language) != doc_id:
            doc_id = f"{source}:{rec['line']}"  # an id that is personal data is not kept either
        return doc_id


def _until_failed(records, failed: list[str]):
    """``records`` until a :class:`~kolectra.corpus.read_failures.ReadFailed` ends them, its ``why`` then
    put in ``failed``: the file's row carries it to the check after the job, which names the file (an
    exception would reach the launcher only as Beam's wrapped text: an internal error, with worker
    processes a traceback's first line)."""
    try:
        yield from records
    except reader.ReadFailed as e:
        failed.append(e.why)


def _file_record(listed: inputs.InputFile, digest: dict, damaged: str | None) -> dict:
    record = {"bytes": digest.get("bytes", 0), "sha256": digest.get("sha256")}
    if damaged:
        record["damaged"] = damaged
    changed = input_reads.changed_since(listed, record["bytes"], digest.get("identity")) if "sha256" in digest else None
    if changed:
        record["changed"] = changed
    return record


class KeepFirstCopies(beam.DoFn):
    """(bucket, chunks) -> lists of (key, document) with one copy of each text: the one with the
    smallest (source, line), whose kept fields (``keep_fields``) are the ones written; the other
    copies are tallied as ``duplicate`` and the runner-up of a few shown in the samples. The survivor depends on the data only, never on bundling or
    worker count. Memory: the bucket's unique documents. With ``parts`` (``write_dropped``: the
    drop files a reason, corpus/drops.py), every other copy goes to the ``DROPS`` output as it loses."""

    BATCH = 1024

    def __init__(self, seed: int, progress_dir: str | None, parts: int = 0, samples: int = SAMPLES_PER_REASON):
        self.seed = seed
        self.progress_dir = progress_dir
        self.parts = parts
        self.samples = samples  # samples_per_reason

    def setup(self):
        self.counts = WorkerCounts(self.progress_dir)

    def process(self, item):
        _, chunks = item
        best: dict = {}  # key -> [first, second, copies]
        drops = DropChunks(self.parts) if self.parts else None
        for chunk in map(outputs.unpack_chunk, chunks):
            for doc in chunk:
                entry = best.get(doc[0])
                if entry is None:
                    best[doc[0]] = [doc, None, 1]
                    continue
                entry[2] += 1
                if doc[1:3] < entry[0][1:3]:
                    entry[0], entry[1] = doc, entry[0]
                elif entry[1] is None or doc[1:3] < entry[1][1:3]:
                    entry[1] = doc
                if drops:  # the copy that lost: the new one, or the first until now
                    lost = entry[1] if entry[0] is doc else doc
                    yield from (beam.pvalue.TaggedOutput(DROPS, item) for item in drops.add("duplicate", _as_doc(lost)))
        if drops:
            yield from (beam.pvalue.TaggedOutput(DROPS, item) for item in drops.drain())
        duplicates = 0
        samples: dict = {}
        batch = []
        for key, (first, second, copies) in best.items():
            if copies > 1:
                duplicates += copies - 1
                _offer(samples, "duplicate", {**_as_doc(second), "kept": list(first[1:3])}, self.seed, self.samples)
            batch.append((key, _as_doc(first)))
            if len(batch) >= self.BATCH:
                yield batch
                batch = []
        if batch:
            yield batch
        self.counts.add(duplicates=duplicates)
        if duplicates:
            yield beam.pvalue.TaggedOutput(TALLY, ((DROPPED, "duplicate"), duplicates))
        for row in samples.get("duplicate", ()):
            yield beam.pvalue.TaggedOutput(SAMPLES, ("duplicate", row))


class IdBuckets(beam.DoFn):
    """Lists of (key, document) -> (bucket, [id, ...]): the ids of the documents that survived
    dedup, grouped by a stable hash of the id and emitted per bundle (in chunks, as the texts are),
    so that :func:`shared_ids` sees every copy of an id in one place."""

    CHUNK = 8192

    def __init__(self, buckets: int):
        self.buckets = buckets

    def start_bundle(self):
        self.chunks = KeyedChunks(self.CHUNK)

    def process(self, docs: list):
        for _, doc in docs:
            bucket = zlib.crc32(doc["id"].encode("utf-8")) % self.buckets  # crc32: the same in every worker
            yield from self.chunks.add(bucket, doc["id"], sys.getsizeof(doc["id"]))

    def finish_bundle(self):
        for item in self.chunks.drain():
            yield GlobalWindows.windowed_value(item)


def shared_ids(item):
    """(bucket, chunks of ids) -> the tally of documents kept under an id that another kept
    document has too: their texts differ (equal texts were deduplicated), all copies are kept, and
    ``stats.json`` counts the copies beyond the first as ``duplicate_id_different_text``."""
    _, chunks = item
    seen: dict = {}
    for chunk in chunks:
        for doc_id in chunk:
            seen[doc_id] = seen.get(doc_id, 0) + 1
    extra = sum(n - 1 for n in seen.values() if n > 1)
    if extra:
        yield (SHARED_ID, extra)


def _as_doc(t: tuple) -> dict:
    doc = {"source": t[1], "line": t[2], "id": t[3], "text": t[4]}
    if len(t) > 5:
        doc["fields"] = t[5]
    return doc


class AnalyseAndPlace(beam.DoFn):
    """Lists of (key, document) -> ((split, shard), packed [((source, line), JSON line), ...]): Kiwi
    sentences and morphs, the train/valid split, the shard, and the document serialised on the
    worker that analysed it (the shard step then only sorts and joins strings).

    One analyser per worker process, built in ``setup``, on ``threads`` analysing threads.
    Documents are analysed in batches of up to :data:`BATCH` documents or :data:`BATCH_CHARS`
    characters (Kiwi runs over the whole batch in a tight loop, its model hot in the CPU caches,
    before anything else, or on its pool while this thread takes the results). Their lines go to
    the shard step in chunks of up to :data:`CHUNK` per shard; the split counts and the kept
    sample are accumulated per bundle and emitted in ``finish_bundle``."""

    BATCH = 1024
    BATCH_CHARS = 1 << 20
    CHUNK = 512

    def __init__(self, cfg: CorpusConfig, progress_dir: str | None = None, threads: int = 1):
        self.cfg = cfg
        self.progress_dir = progress_dir
        self.threads = threads  # Kiwi's analysing threads in each worker (corpus/runners.py: analysis_threads)

    def setup(self):
        tune_gc()
        self.segmenter = make_segmenter(self.cfg.language, self.threads)
        self.progress = WorkerCounts(self.progress_dir)
        self.probe = getattr(self.segmenter, "probe", None)  # said once by each instance (ANALYSER_PROBE)

    def start_bundle(self):
        self.batch: list = []
        self.batch_chars = 0
        self.chunks = KeyedChunks(self.CHUNK)  # (split, shard) -> [(position, JSON line)] not yet emitted
        self.counts: dict = {}  # split -> [documents, sentences, morphs, chars]
        self.sample: list = []  # the SAMPLES_KEPT smallest (rank, row) of this bundle
        self.missing = [0] * len(self.cfg.keep_fields)  # documents of this bundle without each kept field
        self.kinds: list[dict] = [{} for _ in self.cfg.keep_fields]  # each kept field's values by kind
        self.failed = 0  # documents of this bundle the analyser failed on (dead letters: ANALYSIS_FAILED)

    def process(self, docs: list):
        for keyed in docs:
            self.batch.append(keyed)
            self.batch_chars += len(keyed[1]["text"])
            if len(self.batch) >= self.BATCH or self.batch_chars >= self.BATCH_CHARS:
                yield from self._flush()

    def finish_bundle(self):
        for item in self._flush():
            if isinstance(item, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(item.tag, GlobalWindows.windowed_value(item.value))
            else:
                yield GlobalWindows.windowed_value(item)
        if self.failed:
            yield beam.pvalue.TaggedOutput(TALLY, GlobalWindows.windowed_value((("rejected", ANALYSIS_FAILED), self.failed)))
        if self.probe is not None:  # which code path this worker's Kiwi runs on: one tally key per path
            yield beam.pvalue.TaggedOutput(TALLY, GlobalWindows.windowed_value(((ANALYSER_PROBE, self.probe), 1)))
            self.probe = None
        for place, chunk in self.chunks.drain():
            yield GlobalWindows.windowed_value((place, outputs.pack_chunk(chunk)))
        for split, counts in sorted(self.counts.items()):
            for name, n in zip(SPLIT_COUNTS, counts):
                yield beam.pvalue.TaggedOutput(TALLY, GlobalWindows.windowed_value(((split, name), n)))
        for rank_row in self.sample:
            yield beam.pvalue.TaggedOutput(SAMPLES, GlobalWindows.windowed_value(("kept", rank_row)))
        for name, n in zip(self.cfg.keep_fields, self.missing):
            if n:
                yield beam.pvalue.TaggedOutput(TALLY, GlobalWindows.windowed_value(((MISSING_FIELD, name), n)))
        for name, kinds in zip(self.cfg.keep_fields, self.kinds):
            for kind, n in sorted(kinds.items()):
                yield beam.pvalue.TaggedOutput(TALLY, GlobalWindows.windowed_value(((FIELD_KIND, name, kind), n)))
        self.progress.flush()

    def _flush(self):
        batch, self.batch, self.batch_chars = self.batch, [], 0
        if not batch:
            return
        analysed = segment_each(self.segmenter, [rec["text"] for _, rec in batch])
        cfg = self.cfg
        for (key, rec), result in zip(batch, analysed):
            if isinstance(result, Exception):  # a dead letter naming the error, never the bundle's end
                self.failed += 1
                yield beam.pvalue.TaggedOutput(REJECTED, {
                    "source": rec["source"], "line": rec["line"], "reason": ANALYSIS_FAILED,
                    "detail": error_text(result)[:300]})
                continue
            sentences, morphs = result
            doc = {**rec, "sentences": sentences, "morphs": morphs}
            split = outputs.split_of(doc["text"], cfg.seed, cfg.valid_fraction)
            counts = self.counts.setdefault(split, [0, 0, 0, 0])  # SPLIT_COUNTS of this bundle
            counts[0] += 1
            counts[1] += len(sentences)
            counts[2] += len(morphs)
            counts[3] += len(rec["text"])
            rank = outputs.sample_rank(doc, cfg.seed)
            if len(self.sample) < SAMPLES_KEPT or rank < self.sample[-1][0]:
                row = json.dumps(outputs.sample_row("kept", {**doc, "split": split}), ensure_ascii=False, sort_keys=True)
                outputs.keep_smallest(self.sample, (rank, row), SAMPLES_KEPT)
            place = (split, outputs.shard_of(key, cfg.num_shards))
            if cfg.keep_fields:
                for i, value in enumerate(doc["fields"]):
                    if value is None:
                        self.missing[i] += 1
                    else:
                        kind = value_kind(value)
                        self.kinds[i][kind] = self.kinds[i].get(kind, 0) + 1
            line = outputs.document_json(doc, cfg.keep_fields)
            for out_place, chunk in self.chunks.add(place, ((doc["source"], doc["line"]), line), sys.getsizeof(line)):
                yield out_place, outputs.pack_chunk(chunk)
        self.progress.add(analysed=len(batch))
