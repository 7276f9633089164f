"""The corpus stage as an Apache Beam pipeline: raw text files -> cleaned, deduplicated, segmented
documents in the ``corpus/shards.py`` format. First link of the chain (corpus -> vocab -> examples
-> pretrain -> finetune); the orchestration calls :func:`build` and wraps its output.

Recipe (the graph in :func:`_recipe` reads the same, one labelled step a line):
per input file: read each line as a record or a reject, normalise (language profile:
``corpus/languages.py``), drop boilerplate lines, filter, and file the survivors into one of
``buckets`` dedup groups by a hash of their text -> group the buckets -> exact dedup inside each
bucket (the copy with the smallest (source, line) survives) -> optional MinHash-LSH near-dup
clusters (``corpus/neardup.py``) -> Kiwi sentences and morphemes, train/valid by a salted hash
of the text, shard by the text key -> deterministic shards sorted by (source, line) ->
``data/*.jsonl.gz`` (gzip mtime 0), ``rejects/rejects.jsonl``, ``samples/{kept,dropped}.jsonl``,
``stats.json`` (see ``corpus/outputs.py``).

Elements are large on purpose: a file's survivors travel to the dedup shuffle in chunks of up to
:data:`ReadAndClean.CHUNK` documents per bucket, and a bucket's unique documents go to Kiwi in
lists, because Beam's per-element cost (coding, gRPC, the runner's grouping) was a tenth of the
stage when every document was its own element (``benchmarks/corpus.py``). Counts and samples
are kept per file or bucket on the worker and emitted once.

Runs on the in-process FnApiRunner by default (several worker processes for large inputs, see
``corpus/runners.py``), or on any Beam runner named with ``--runner``; remote workers write to
``--corpus_staging`` and the files are fetched into the local artifact.

Every record ends in exactly one of: a split, a reject reason, a drop reason. Each step emits
``(counter, n)`` tallies that are summed inside the pipeline into ``stats.json``, so
``records_in == records_out + rejected + sum(dropped)`` is checked from independent counts and
holds on any runner (Beam metrics are best-effort on some runners; this is exact).
"""

from __future__ import annotations

import gc
import json
import shutil
import tempfile
import uuid
from pathlib import Path

# runners first: it silences Beam's import-time logging before apache_beam is imported
from kolectra.corpus.runners import (  # noqa: F401  (pipeline_options, local_workers, input_bytes: this module's API)
    LOCAL_RUNNER,
    NORMAL,
    REMOTE_RUNNERS,
    CorpusOptions,
    Interruption,
    input_bytes,
    local_workers,
    pipeline_options,
    tune_gc,
    verbosity,
)

import apache_beam as beam  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions  # noqa: E402
from apache_beam.transforms.window import GlobalWindows  # noqa: E402

from kolectra.core.stage import StageOutput, progress  # noqa: E402
from kolectra.corpus import filters, inputs, neardup, outputs, reader, webtext  # noqa: E402
from kolectra.corpus import text as text_rules  # noqa: E402
from kolectra.corpus.config import CorpusConfig  # noqa: E402
from kolectra.corpus.outputs import (  # noqa: E402,F401  (re-exported: the stage's API)
    REJECTS_FILE,
    SAMPLES_KEPT,
    SAMPLES_PER_REASON,
    SPLIT_COUNTS,
    STATS_FILE,
    CorpusError,
    check_stats,
    make_stats,
    sample_item,
    sample_rank,
    sample_row,
    split_of,
    text_key,
)
from kolectra.corpus.progress import Monitor, WorkerCounts, describe, read_counts  # noqa: E402
from kolectra.corpus.segment import make_segmenter  # noqa: E402
from kolectra.corpus.shards import SPLITS, write_dataset_card  # noqa: E402

# Bump when the output bytes for the same input and config change (part of the artifact id).
# 2: language profiles, boilerplate lines, union-find near-dup clusters, samples/.
# 3: shards gzipped at level 1 (3x faster than 6 on this JSON, files about a fifth larger).
# 4: README.md, a dataset card: datasets.load_dataset(<artifact dir>) loads the splits.
# 5: samples show the cleaned (masked) text; ids masked by mask_pii fall back to source:line;
#    stats.json: per-file bytes and sha256, repaired records; damaged files are dead letters.
STAGE_VERSION = 5

TALLY = neardup.TALLY  # the tag of (counter, n) side outputs
SAMPLES = neardup.SAMPLES  # the tag of (reason, (rank, JSON row)) side outputs
REJECTED = "rejected"
FILES = "files"  # the tag of (source, {bytes, sha256, damaged?, changed?}) per input file
DROPPED = "dropped"


class CorpusInterrupted(KeyboardInterrupt):
    """Ctrl-C during the job; the message says how far it got and that nothing was kept."""


def dedup_buckets(total_bytes: int) -> int:
    """Dedup groups for ``total_bytes`` of input: about 4 MB each, a power of two in [16, 8192].
    Many enough to spread Kiwi over every worker, few enough for large elements; a bucket's
    unique documents are held by one worker at a time. The output does not depend on it."""
    n = 16
    while n < 8192 and n * (4 << 20) < total_bytes:
        n *= 2
    return n


def _count(tally: dict, key, n: int = 1) -> None:
    tally[key] = tally.get(key, 0) + n


def _offer(samples: dict, reason: str, doc: dict, seed: int) -> None:
    """Keep ``doc`` among this worker's few smallest-ranked samples of ``reason``."""
    rows = samples.setdefault(reason, [])
    rank = outputs.sample_rank(doc, seed)
    if len(rows) < SAMPLES_PER_REASON or rank < rows[-1][0]:
        outputs.keep_smallest(rows, outputs.sample_item(reason, doc, seed)[1], SAMPLES_PER_REASON)


# ---------------------------------------------------------------- Beam steps


class ReadAndClean(beam.DoFn):
    """An input file -> (bucket, [(key, source, line, id, text), ...]) chunks of the records that
    survive cleaning and filtering; rejects; and, once per file, its tallies, its dropped samples
    and what was read (bytes, sha256, damage, change since the listing)."""

    CHUNK = 2048

    def __init__(self, cfg: CorpusConfig, sources: dict[str, str], buckets: int, progress_dir: str | None):
        self.cfg = cfg
        self.sources = sources
        self.buckets = buckets
        self.progress_dir = progress_dir

    def setup(self):
        self.counts = WorkerCounts(self.progress_dir)

    def process(self, listed: inputs.InputFile):
        cfg, source = self.cfg, self.sources[listed.path]
        rules = dict(strip_html=cfg.strip_html, mask_pii=cfg.mask_pii, max_repeat=cfg.max_repeat, language=cfg.language)
        tally: dict = {}
        samples: dict = {}
        chunks: dict = {}
        digest: dict = {}
        damaged = None
        lines = kept = reported = sent_bytes = 0
        for rec in reader.read_file(listed.path, source, cfg.format, cfg.text_field, cfg.id_field,
                                    cfg.max_line_bytes, digest):
            lines += 1
            reason = rec.get("reason")
            if reason is not None:
                damaged = rec["detail"] if reason == "damaged_file" else damaged
                _count(tally, ("rejected", reason))
                _count(tally, ("source_rejected", source))
                yield beam.pvalue.TaggedOutput(REJECTED, rec)
                continue
            if "repaired" in rec:
                _count(tally, ("repaired", rec["repaired"]))
            cleaned = text_rules.clean(rec["text"], **rules)
            text, reason = filters.judge(cleaned, cfg)
            if reason is not None:
                _count(tally, (DROPPED, reason))
                _offer(samples, reason, {**rec, "text": cleaned}, cfg.seed)  # cleaned: never unmasked text
                continue
            doc_id = rec["id"]
            if cfg.mask_pii and webtext.mask_pii(doc_id, cfg.language) != doc_id:
                doc_id = f"{source}:{rec['line']}"  # an id that is personal data is not kept either
            key = outputs.text_key(text)
            bucket = outputs.bucket_of(key, self.buckets)
            chunk = chunks.setdefault(bucket, [])
            chunk.append((key, source, rec["line"], doc_id, text))
            kept += 1
            if len(chunk) >= self.CHUNK:
                yield bucket, chunks.pop(bucket)
            if lines - reported >= 4096:  # progress: the raw bytes read so far, records, kept
                now = digest["raw"].bytes
                self.counts.add(read=lines - reported, kept=kept, bytes=now - sent_bytes)
                reported, kept, sent_bytes = lines, 0, now
        yield from sorted(chunks.items())
        self.counts.add(read=lines - reported, kept=kept, bytes=digest.get("bytes", 0) - sent_bytes)
        self.counts.flush()
        tally[("source_in", source)] = lines
        for item in tally.items():
            yield beam.pvalue.TaggedOutput(TALLY, item)
        for reason, rows in samples.items():
            for row in rows:
                yield beam.pvalue.TaggedOutput(SAMPLES, (reason, row))
        yield beam.pvalue.TaggedOutput(FILES, (source, _file_record(listed, digest, damaged)))


def _file_record(listed: inputs.InputFile, digest: dict, damaged: str | None) -> dict:
    record = {"bytes": digest.get("bytes", 0), "sha256": digest.get("sha256")}
    if damaged:
        record["damaged"] = damaged
    changed = inputs.changed_since(listed, record["bytes"]) if "sha256" in digest else None
    if changed:
        record["changed"] = changed
    return record


class KeepFirstCopies(beam.DoFn):
    """(bucket, chunks) -> lists of (key, document) with one copy of each text: the one with the
    smallest (source, line); the other copies are tallied as ``duplicate`` and the runner-up of
    a few shown in the samples. The survivor depends on the data only, never on bundling or
    worker count. Memory: the bucket's unique documents."""

    BATCH = 1024

    def __init__(self, seed: int, progress_dir: str | None):
        self.seed = seed
        self.progress_dir = progress_dir

    def setup(self):
        self.counts = WorkerCounts(self.progress_dir)

    def process(self, item):
        _, chunks = item
        best: dict = {}  # key -> [first, second, copies]
        for chunk in chunks:
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
        duplicates = 0
        samples: dict = {}
        batch = []
        for key, (first, second, copies) in best.items():
            if copies > 1:
                duplicates += copies - 1
                _offer(samples, "duplicate", {**_as_doc(second), "kept": list(first[1:3])}, self.seed)
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


def _as_doc(t: tuple) -> dict:
    return {"source": t[1], "line": t[2], "id": t[3], "text": t[4]}


class AnalyseAndPlace(beam.DoFn):
    """Lists of (key, document) -> ((split, shard), [((source, line), JSON line), ...]): Kiwi
    sentences and morphs, the train/valid split, the shard, and the document serialised on the
    worker that analysed it (the shard step then only sorts and joins strings).

    One analyser per worker process, built in ``setup``. Documents are analysed in batches of up
    to :data:`BATCH` documents or :data:`BATCH_CHARS` characters (Kiwi runs over the whole batch
    in a tight loop, its model hot in the CPU caches, before anything else). Their lines go to
    the shard step in chunks of up to :data:`CHUNK` per shard; the split counts and the kept
    sample are accumulated per bundle and emitted in ``finish_bundle``."""

    BATCH = 1024
    BATCH_CHARS = 1 << 20
    CHUNK = 512

    def __init__(self, cfg: CorpusConfig, progress_dir: str | None = None):
        self.cfg = cfg
        self.progress_dir = progress_dir

    def setup(self):
        tune_gc()
        self.segmenter = make_segmenter(self.cfg.language)
        self.progress = WorkerCounts(self.progress_dir)

    def start_bundle(self):
        self.batch: list = []
        self.batch_chars = 0
        self.chunks: dict = {}  # (split, shard) -> [(position, JSON line)] not yet emitted
        self.counts: dict = {}  # split -> [documents, sentences, morphs, chars]
        self.sample: list = []  # the SAMPLES_KEPT smallest (rank, row) of this bundle

    def process(self, docs: list):
        for keyed in docs:
            self.batch.append(keyed)
            self.batch_chars += len(keyed[1]["text"])
            if len(self.batch) >= self.BATCH or self.batch_chars >= self.BATCH_CHARS:
                yield from self._flush()

    def finish_bundle(self):
        for item in self._flush():
            yield GlobalWindows.windowed_value(item)
        for place, chunk in sorted(self.chunks.items()):
            yield GlobalWindows.windowed_value((place, chunk))
        for split, counts in sorted(self.counts.items()):
            for name, n in zip(SPLIT_COUNTS, counts):
                yield beam.pvalue.TaggedOutput(TALLY, GlobalWindows.windowed_value(((split, name), n)))
        for rank_row in self.sample:
            yield beam.pvalue.TaggedOutput(SAMPLES, GlobalWindows.windowed_value(("kept", rank_row)))
        self.progress.flush()

    def _flush(self):
        batch, self.batch, self.batch_chars = self.batch, [], 0
        if not batch:
            return
        analysed = self.segmenter.segment_many([rec["text"] for _, rec in batch])
        cfg = self.cfg
        for (key, rec), (sentences, morphs) in zip(batch, analysed):
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
            chunk = self.chunks.setdefault(place, [])
            chunk.append(((doc["source"], doc["line"]), outputs.document_json(doc)))
            if len(chunk) >= self.CHUNK:
                yield place, self.chunks.pop(place)
        self.progress.add(analysed=len(batch))


def _one_each(docs: list):
    yield from docs


def _as_list(keyed) -> list:
    return [keyed]


def _ranked(reason_doc, seed: int):
    return outputs.sample_item(*reason_doc, seed)


def _recipe(p: beam.Pipeline, cfg: CorpusConfig, listed: list[inputs.InputFile], sources: dict[str, str],
            out_dir: str, buckets: int, progress_dir: str | None) -> None:
    all_shards = [((s, i), []) for s in SPLITS for i in range(cfg.num_shards)]  # empty shards too
    read = (
        p
        | "ListInputs" >> beam.Create(listed)
        | "SpreadFiles" >> beam.Reshuffle()  # one file per worker at a time, not all in one bundle
        | "ReadAndClean" >> beam.ParDo(ReadAndClean(cfg, sources, buckets, progress_dir)).with_outputs(
            REJECTED, TALLY, SAMPLES, FILES, main="chunks")
    )
    unique = (
        read.chunks
        | "GroupBuckets" >> beam.GroupByKey()
        | "KeepFirstCopies" >> beam.ParDo(KeepFirstCopies(cfg.seed, progress_dir)).with_outputs(TALLY, SAMPLES, main="docs")
    )
    tallies, samples, docs = [read[TALLY], unique[TALLY]], [read[SAMPLES], unique[SAMPLES]], unique.docs
    if cfg.near_dup_threshold > 0:
        near = (docs | "OneEach" >> beam.FlatMap(_one_each)
                | "NearDedup" >> neardup.NearDedup(cfg.near_dup_threshold, cfg.seed))
        docs = near.docs | "AsLists" >> beam.Map(_as_list)
        tallies.append(near[TALLY])
        samples.append(near[SAMPLES] | "RankNearSamples" >> beam.Map(_ranked, cfg.seed))
    placed = docs | "AnalyseAndPlace" >> beam.ParDo(AnalyseAndPlace(cfg, progress_dir)).with_outputs(TALLY, SAMPLES, main="docs")
    dropped_samples = (
        tuple(samples)
        | "DroppedSamples" >> beam.Flatten()
        | "FewPerReason" >> beam.combiners.Top.SmallestPerKey(SAMPLES_PER_REASON)
    )
    kept_samples = placed[SAMPLES] | "FewKept" >> beam.combiners.Top.SmallestPerKey(SAMPLES_KEPT)
    _ = (
        (dropped_samples, kept_samples)
        | "AllSamples" >> beam.Flatten()
        | "CollectSamples" >> beam.combiners.ToList()
        | "WriteSamples" >> beam.Map(outputs.write_samples, out_dir)
    )
    _ = (
        (placed.docs, p | "AllShardNames" >> beam.Create(all_shards))
        | "WithEmptyShards" >> beam.Flatten()
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.Map(outputs.write_shard, out_dir, cfg.num_shards)
    )
    _ = (
        read[REJECTED]
        | "CollectRejects" >> beam.combiners.ToList()
        | "WriteRejects" >> beam.Map(outputs.write_rejects, out_dir)
    )
    files = read[FILES] | "CollectFiles" >> beam.combiners.ToList()
    _ = (
        (*tallies, placed[TALLY])
        | "AllTallies" >> beam.Flatten()
        | "SumTallies" >> beam.CombinePerKey(sum)
        | "CollectTallies" >> beam.combiners.ToList()
        | "WriteStats" >> beam.Map(outputs.write_stats, out_dir, cfg, beam.pvalue.AsSingleton(files))
    )


# ---------------------------------------------------------------- entry point


def build(cfg: CorpusConfig, patterns: list[str], out_dir: Path, beam_args: list[str], *,
          listed: list[inputs.InputFile] | None = None, keep_failed: Path | None = None) -> StageOutput:
    """Run the corpus pipeline over ``patterns`` (paths or globs; or the files ``listed`` before)
    into ``out_dir``. If the run fails a check, its rejects and stats are copied to
    ``keep_failed`` (when given), which the error names."""
    listed = inputs.list_inputs(list(patterns)) if listed is None else listed
    files = [f.path for f in listed]
    sources = reader.source_names(files)
    total = sum(f.bytes for f in listed)
    options = pipeline_options(beam_args, total)
    runner = options.view_as(StandardOptions).runner
    shown = runner
    if runner == LOCAL_RUNNER:
        direct = options.view_as(DirectOptions)
        shown = f"FnApiRunner, {direct.direct_num_workers} worker(s) ({direct.direct_running_mode})"
    progress(f"corpus: {len(files)} input file(s), {total / 1e6:,.1f} MB, runner {shown}, language {cfg.language}")
    staging = options.view_as(CorpusOptions).corpus_staging
    if staging is None and runner in REMOTE_RUNNERS:
        raise CorpusError(
            f"runner {runner} writes on remote workers: pass --corpus_staging gs://BUCKET/DIR (any path the "
            "workers and this machine can both reach); the artifact is copied from there into the local store"
        )
    out = FileSystems.join(staging, f"kolectra-corpus-{uuid.uuid4().hex}") if staging else str(out_dir)
    # workers on this machine report progress through files here (remote ones cannot reach it)
    progress_dir = None if runner in REMOTE_RUNNERS else tempfile.mkdtemp(prefix="kolectra-progress-")
    threshold = gc.get_threshold()  # an in-process worker tunes this process's GC: restore it after
    try:
        with Interruption() as ctrl_c, Monitor(progress_dir or "", total,
                                               enabled=progress_dir is not None and verbosity() >= NORMAL):
            with beam.Pipeline(options=options) as p:
                _recipe(p, cfg, listed, sources, out, dedup_buckets(total), progress_dir)
    except BaseException:
        if not ctrl_c.happened:
            raise
        done = describe(read_counts(progress_dir), total) if progress_dir else "progress unknown"
        raise CorpusInterrupted(
            f"interrupted ({done}); nothing was kept: a corpus artifact appears only when complete, "
            "run the same command again to start over") from None
    finally:
        gc.set_threshold(*threshold)
        if progress_dir:
            shutil.rmtree(progress_dir, ignore_errors=True)
    if staging:
        outputs.fetch_outputs(out, str(out_dir), cfg.num_shards)
    stats = outputs.read_stats(str(out_dir))
    kept_rejects = Path(keep_failed or out_dir, REJECTS_FILE)
    try:
        check_stats(stats, cfg, {v: k for k, v in sources.items()}, rejects=str(kept_rejects))
    except CorpusError:
        if keep_failed is not None:
            for rel in (REJECTS_FILE, STATS_FILE):
                Path(keep_failed, rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(Path(out_dir, rel), Path(keep_failed, rel))
        raise
    write_dataset_card(out_dir)
    _summary(stats)
    return StageOutput(stats=stats)


def _summary(stats: dict) -> None:
    progress(
        f"corpus: {stats['records_in']} records -> {stats['records_out']} documents "
        f"({stats['splits']['valid']['documents']} valid), {stats['rejected']} rejected, "
        f"dropped {sum(stats['dropped'].values())} {stats['dropped']}"
    )
    repaired = {k: n for k, n in stats["repaired"].items() if n}
    if repaired:
        progress(f"corpus: repaired and kept {repaired}")
    for source, info in sorted(stats["sources"].items()):
        if info.get("damaged"):
            progress(f"corpus: damaged input {source} (accepted by max_damaged_files): {info['damaged']}")
