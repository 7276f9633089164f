"""The corpus stage as an Apache Beam pipeline: raw text files -> cleaned, deduplicated, segmented
documents in the ``corpus/shards.py`` format. First link of the chain (corpus -> vocab -> examples
-> pretrain -> finetune); the CLI calls :func:`build` and the lead's artifact code wraps its output.

Recipe (the graph in :func:`_recipe` reads the same, one labelled step a line):
read each input line as a record or a reject -> normalise (language profile: ``corpus/languages.py``)
-> drop boilerplate lines, filter -> exact dedup on the normalised text (the copy with the
smallest (source, line) survives) -> optional MinHash-LSH near-dup clusters (``corpus/neardup.py``)
-> Kiwi sentences and morphemes, train/valid by a salted hash of the text, shard by the text key
-> deterministic shards sorted by (source, line) -> ``data/*.jsonl.gz`` (gzip mtime 0),
``rejects/rejects.jsonl``, ``samples/{kept,dropped}.jsonl``, ``stats.json``.

Runs on the in-process FnApiRunner by default (several worker processes for large inputs, see
``corpus/runners.py``), or on any Beam runner named with ``--runner``; remote workers write
to ``--corpus_staging`` and the files are fetched into the local artifact.

Every record ends in exactly one of: a split, a reject reason, a drop reason. Each step emits
``(counter, n)`` tallies that are summed inside the pipeline into ``stats.json``, so
``records_in == records_out + rejected + sum(dropped)`` is checked from independent counts and
holds on any runner (Beam metrics are best-effort on some runners; this is exact).
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import io
import json
import uuid
from pathlib import Path

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions
from apache_beam.transforms.window import GlobalWindows

from kolectra.corpus import filters, neardup, reader, text as text_rules
from kolectra.corpus.config import CorpusConfig
from kolectra.corpus.runners import (  # noqa: F401  (pipeline_options, local_workers: part of this module's API)
    LOCAL_RUNNER,
    REMOTE_RUNNERS,
    CorpusOptions,
    input_bytes,
    local_workers,
    pipeline_options,
    tune_gc,
)
from kolectra.corpus.segment import make_segmenter
from kolectra.corpus.shards import DATA_DIR, SPLITS, write_dataset_card
from kolectra.core.stage import StageOutput, progress

# Bump when the output bytes for the same input and config change (part of the artifact id).
# 2: language profiles, boilerplate lines, union-find near-dup clusters, samples/.
# 3: shards gzipped at level 1 (3x faster than 6 on this JSON, files about a fifth larger).
# 4: README.md, a dataset card: datasets.load_dataset(<artifact dir>) loads the splits.
STAGE_VERSION = 4

REJECTS_FILE = "rejects/rejects.jsonl"
STATS_FILE = "stats.json"
SAMPLES_DIR = "samples"
SAMPLES_PER_REASON = 5  # dropped documents shown per reason in samples/dropped.jsonl
SAMPLES_KEPT = 20  # kept documents in samples/kept.jsonl
SAMPLE_CHARS = 400  # texts in samples are cut to this many characters
TALLY = neardup.TALLY  # the tag of (counter, n) side outputs
SAMPLES = neardup.SAMPLES  # the tag of (reason, document) side outputs
REJECTED = "rejected"
SPLIT_COUNTS = ("documents", "sentences", "morphs", "chars")  # per split in stats.json
DROPPED = "dropped"


class CorpusError(ValueError):
    """The input is unusable (too many rejects, nothing left) or the run is misconfigured; names
    the file or the missing option. A ValueError, so the CLI reports it without a traceback."""


# ---------------------------------------------------------------- pure helpers


def text_key(text: str) -> str:
    """Dedup key: a 128-bit hash of the normalised text (collisions are negligible at corpus scale)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def split_of(text: str, seed: int, valid_fraction: float) -> str:
    """``valid`` for a stable, seed-salted ``valid_fraction`` of texts; equal texts share a split."""
    h = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=f"kolectra-split-{seed}".encode())
    return "valid" if int.from_bytes(h.digest(), "big") / 2**64 < valid_fraction else "train"


def sample_rank(doc: dict, seed: int) -> str:
    """Which documents a sample shows: the smallest salted hashes of (source, line) - a uniform,
    stable choice that does not depend on bundling."""
    h = hashlib.blake2b(f"{doc['source']}\x00{doc['line']}".encode("utf-8"), digest_size=8, key=f"kolectra-sample-{seed}".encode())
    return h.hexdigest()


def sample_row(reason: str, doc: dict) -> dict:
    row = {"reason": reason, "id": doc.get("id"), "source": doc["source"], "line": doc["line"]}
    for k in ("split", "kept"):
        if k in doc:
            row[k] = doc[k]
    text = doc.get("text", "")
    row["text"] = text if len(text) <= SAMPLE_CHARS else text[:SAMPLE_CHARS] + "…"
    return row


def shard_of(key: str, num_shards: int) -> int:
    return int(key, 16) % num_shards


def shard_name(split: str, shard: int, num_shards: int) -> str:
    return f"{DATA_DIR}/{split}-{shard:05d}-of-{num_shards:05d}.jsonl.gz"


# One encoder for every line: json.dumps with options builds a new one per call. check_circular
# off: a document is a tree, and the check costs a fifth of the encoding.
_DOCUMENT_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)


def document_json(rec: dict) -> str:
    """One line of a shard, in the field order of ``corpus/shards.py``."""
    doc = {
        "id": rec["id"],
        "source": rec["source"],
        "text": rec["text"],
        "sentences": rec["sentences"],
        "morphs": rec["morphs"],
    }
    return _DOCUMENT_ENCODER.encode(doc)


def gzip_bytes(data: bytes) -> bytes:
    """Gzip with a fixed header (mtime 0, no file name) so equal content gives equal bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="", compresslevel=1) as gz:
        gz.write(data)
    return buf.getvalue()


def make_stats(tally: dict, cfg: CorpusConfig) -> dict:
    """``stats.json`` from the summed tallies; every known reason appears, zero or not."""
    get = lambda *k: tally.get(k, 0)  # noqa: E731
    sources = sorted({k[1] for k in tally if k[0] == "source_in"})
    rejected_reasons = {r: get("rejected", r) for r in reader.REJECT_REASONS}
    dropped = {r: get("dropped", r) for r in filters.DROP_REASONS}
    for k in tally:  # reasons added later still land in stats.json
        if k[0] == "dropped" and k[1] not in dropped:
            dropped[k[1]] = tally[k]
        if k[0] == "rejected" and k[1] not in rejected_reasons:
            rejected_reasons[k[1]] = tally[k]
    splits = {
        s: {f: get(s, f) for f in SPLIT_COUNTS} for s in SPLITS
    }
    return {
        "records_in": sum(get("source_in", s) for s in sources),
        "records_out": sum(splits[s]["documents"] for s in SPLITS),
        "rejected": sum(rejected_reasons.values()),
        "dropped": dropped,
        "rejected_reasons": rejected_reasons,
        "splits": splits,
        "documents": sum(splits[s]["documents"] for s in SPLITS),
        "sentences": sum(splits[s]["sentences"] for s in SPLITS),
        "morphs": sum(splits[s]["morphs"] for s in SPLITS),
        "chars": sum(splits[s]["chars"] for s in SPLITS),
        "num_shards": cfg.num_shards,
        "sources": {
            s: {"records_in": get("source_in", s), "rejected": get("source_rejected", s)}
            for s in sources
        },
    }


def check_stats(stats: dict, cfg: CorpusConfig, paths: dict[str, str]) -> None:
    """Reconciliation and the reject-ratio gate; ``paths`` maps source names back to inputs."""
    accounted = stats["records_out"] + stats["rejected"] + sum(stats["dropped"].values())
    if stats["records_in"] != accounted:
        raise CorpusError(
            f"corpus stats do not reconcile: records_in={stats['records_in']} but "
            f"out+rejected+dropped={accounted} ({stats})"
        )
    if stats["records_in"] == 0:
        raise CorpusError(f"the inputs hold no records: {sorted(paths.values())}")
    ratio = stats["rejected"] / stats["records_in"]
    if ratio > cfg.max_reject_ratio:
        worst, counts = max(
            stats["sources"].items(),
            key=lambda kv: (kv[1]["rejected"] / max(kv[1]["records_in"], 1), kv[1]["rejected"]),
        )
        top = max(stats["rejected_reasons"].items(), key=lambda kv: kv[1])[0]
        raise CorpusError(
            f"{stats['rejected']} of {stats['records_in']} records rejected ({ratio:.1%}), over "
            f"max_reject_ratio={cfg.max_reject_ratio:.1%}; worst file: {paths.get(worst, worst)} "
            f"({counts['rejected']} of {counts['records_in']} lines rejected); most common reason: "
            f"{top}. Check --format/--text-field, or see {REJECTS_FILE} in the output."
        )
    if stats["records_out"] == 0:
        raise CorpusError(f"no document survived cleaning and filtering (dropped: {stats['dropped']})")


# ---------------------------------------------------------------- Beam steps


class ReadRecords(beam.DoFn):
    """input path -> records (main), rejects, and per-file ``source_in`` tallies."""

    def __init__(self, cfg: CorpusConfig, sources: dict[str, str]):
        self.cfg = cfg
        self.sources = sources

    def process(self, path: str):
        source = self.sources[path]
        cfg = self.cfg
        lines = 0
        for rec in reader.read_file(path, source, cfg.format, cfg.text_field, cfg.id_field, cfg.max_line_bytes):
            lines += 1
            if "reason" in rec:
                yield beam.pvalue.TaggedOutput(REJECTED, rec)
                yield beam.pvalue.TaggedOutput(TALLY, (("rejected", rec["reason"]), 1))
                yield beam.pvalue.TaggedOutput(TALLY, (("source_rejected", source), 1))
            else:
                yield rec
        yield beam.pvalue.TaggedOutput(TALLY, (("source_in", source), lines))


class CleanAndFilter(beam.DoFn):
    """record -> (text_key, record with normalised text), or a ``dropped`` tally."""

    def __init__(self, cfg: CorpusConfig):
        self.cfg = cfg

    def process(self, rec: dict):
        cfg = self.cfg
        clean = text_rules.clean(
            rec["text"], strip_html=cfg.strip_html, mask_pii=cfg.mask_pii, max_repeat=cfg.max_repeat, language=cfg.language
        )
        clean, reason = filters.judge(clean, cfg)
        if reason is not None:
            yield beam.pvalue.TaggedOutput(TALLY, ((DROPPED, reason), 1))
            yield beam.pvalue.TaggedOutput(SAMPLES, (reason, rec))  # the raw text: what the filter saw came from it
            return
        yield text_key(clean), {**rec, "text": clean}


def keep_first_copy(keyed):
    """(text key, copies) -> (key, the copy with the smallest (source, line)), tallying the other
    copies as ``duplicate`` and showing the runner-up in the samples. One pass over the copies
    (a spam text with a million copies is streamed, never held), and the survivor depends on the
    data only, never on bundling or worker count."""
    key, copies = keyed
    first = second = None
    n = 0
    for rec in copies:
        n += 1
        pos = (rec["source"], rec["line"])
        if first is None or pos < (first["source"], first["line"]):
            first, second = rec, first
        elif second is None or pos < (second["source"], second["line"]):
            second = rec
    if n > 1:
        yield beam.pvalue.TaggedOutput(TALLY, ((DROPPED, "duplicate"), n - 1))
        yield beam.pvalue.TaggedOutput(SAMPLES, ("duplicate", {**second, "kept": [first["source"], first["line"]]}))
    yield key, first


class AnalyseAndPlace(beam.DoFn):
    """(key, record) -> ((split, shard), [((source, line), JSON line), ...]): Kiwi sentences and
    morphs, the train/valid split, the shard, and the document serialised on the worker that
    analysed it (the shard step then only sorts and joins strings, cheaper to shuffle and hold
    than dicts).

    One analyser per worker process, built in ``setup``. Documents are analysed in batches of up
    to :data:`BATCH` documents or :data:`BATCH_CHARS` characters (Kiwi runs over the whole batch
    in a tight loop, its model hot in the CPU caches, before anything else). Their lines go
    to the shard step in chunks of up to :data:`CHUNK` per shard, and the split counts and the
    kept-document sample are accumulated per bundle and emitted in ``finish_bundle``: a few
    elements per bundle instead of several per document, whose per-element cost in Beam was a
    measurable share of the stage (``benchmarks/corpus.py``)."""

    BATCH = 1024
    BATCH_CHARS = 1 << 20
    CHUNK = 512

    def __init__(self, cfg: CorpusConfig):
        self.cfg = cfg

    def setup(self):
        tune_gc()
        self.segmenter = make_segmenter(self.cfg.language)

    def start_bundle(self):
        self.batch: list = []
        self.batch_chars = 0
        self.chunks: dict = {}  # (split, shard) -> [(position, JSON line)] not yet emitted
        self.counts: dict = {}  # split -> [documents, sentences, morphs, chars]
        self.sample: list = []  # the SAMPLES_KEPT smallest (rank, row) of this bundle

    def process(self, keyed):
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

    def _flush(self):
        batch, self.batch, self.batch_chars = self.batch, [], 0
        analysed = self.segmenter.segment_many([rec["text"] for _, rec in batch])
        cfg = self.cfg
        for (key, rec), (sentences, morphs) in zip(batch, analysed):
            doc = {**rec, "sentences": sentences, "morphs": morphs}
            split = split_of(doc["text"], cfg.seed, cfg.valid_fraction)
            counts = self.counts.setdefault(split, [0, 0, 0, 0])  # SPLIT_COUNTS of this bundle
            counts[0] += 1
            counts[1] += len(sentences)
            counts[2] += len(morphs)
            counts[3] += len(rec["text"])
            rank = sample_rank(doc, cfg.seed)
            if len(self.sample) < SAMPLES_KEPT or rank < self.sample[-1][0]:
                row = json.dumps(sample_row("kept", {**doc, "split": split}), ensure_ascii=False, sort_keys=True)
                self.sample = sorted(self.sample + [(rank, row)])[:SAMPLES_KEPT]
            place = (split, shard_of(key, cfg.num_shards))
            chunk = self.chunks.setdefault(place, [])
            chunk.append(((doc["source"], doc["line"]), document_json(doc)))
            if len(chunk) >= self.CHUNK:
                yield place, self.chunks.pop(place)


def write_shard(item, out_dir: str, num_shards: int) -> str:
    """((split, shard), chunks of (position, JSON line)) -> the shard file, sorted by (source, line).

    Memory: one shard's JSON text at a time (about corpus size / (2 * num_shards) for train);
    raise ``num_shards`` to bound it for very large corpora."""
    (split, shard), chunks = item
    docs = sorted(d for chunk in chunks for d in chunk)
    body = "".join(line + "\n" for _, line in docs).encode("utf-8")
    path = FileSystems.join(out_dir, shard_name(split, shard, num_shards))
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(gzip_bytes(body))
    return path


def write_rejects(rejects: list[dict], out_dir: str) -> str:
    rows = sorted(rejects, key=lambda r: (r["source"], r["line"]))
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    path = FileSystems.join(out_dir, REJECTS_FILE)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write(body.encode("utf-8"))
    return path


def sample_item(reason_doc, seed: int):
    """(reason, document) -> (reason, (rank, JSON row)) for the per-reason Top-N."""
    reason, doc = reason_doc
    return reason, (sample_rank(doc, seed), json.dumps(sample_row(reason, doc), ensure_ascii=False, sort_keys=True))


def write_samples(per_reason: list, out_dir: str) -> list[str]:
    """``samples/kept.jsonl`` and ``samples/dropped.jsonl`` (a few per reason, sorted)."""
    kept = [row for reason, rows in per_reason if reason == "kept" for _, row in sorted(rows)]
    dropped = [row for reason, rows in sorted(per_reason) if reason != "kept" for _, row in sorted(rows)]
    paths = []
    for name, rows in (("kept", kept), ("dropped", dropped)):
        path = FileSystems.join(out_dir, f"{SAMPLES_DIR}/{name}.jsonl")
        with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            f.write("".join(r + "\n" for r in rows).encode("utf-8"))
        paths.append(path)
    return paths


def write_stats(tallies: list, out_dir: str, cfg: CorpusConfig) -> str:
    stats = make_stats(dict(tallies), cfg)
    path = FileSystems.join(out_dir, STATS_FILE)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write((json.dumps(stats, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))
    return path


def _recipe(p: beam.Pipeline, cfg: CorpusConfig, files: list[str], sources: dict[str, str], out_dir: str) -> None:
    all_shards = [((s, i), []) for s in SPLITS for i in range(cfg.num_shards)]  # empty shards too
    read = (
        p
        | "ListInputs" >> beam.Create(files)
        | "SpreadFiles" >> beam.Reshuffle()  # one file per worker at a time, not all in one bundle
        | "ReadRecords" >> beam.ParDo(ReadRecords(cfg, sources)).with_outputs(REJECTED, TALLY, main="records")
    )
    kept = (
        read.records
        | "CleanAndFilter" >> beam.ParDo(CleanAndFilter(cfg)).with_outputs(TALLY, SAMPLES, main="kept")
    )
    unique = (
        kept.kept
        | "GroupCopies" >> beam.GroupByKey()
        | "KeepFirstCopy" >> beam.FlatMap(keep_first_copy).with_outputs(TALLY, SAMPLES, main="docs")
    )
    dropping = [kept, unique]  # the steps with TALLY and SAMPLES outputs so far
    docs = unique.docs
    if cfg.near_dup_threshold > 0:
        near = docs | "NearDedup" >> neardup.NearDedup(cfg.near_dup_threshold, cfg.seed)
        docs = near.docs
        dropping.append(near)
    placed = docs | "AnalyseAndPlace" >> beam.ParDo(AnalyseAndPlace(cfg)).with_outputs(TALLY, SAMPLES, main="docs")
    dropped_samples = (
        tuple(step[SAMPLES] for step in dropping)
        | "DroppedSamples" >> beam.Flatten()
        | "RankSamples" >> beam.Map(sample_item, cfg.seed)
        | "FewPerReason" >> beam.combiners.Top.SmallestPerKey(SAMPLES_PER_REASON)
    )
    kept_samples = placed[SAMPLES] | "FewKept" >> beam.combiners.Top.SmallestPerKey(SAMPLES_KEPT)
    _ = (
        (dropped_samples, kept_samples)
        | "AllSamples" >> beam.Flatten()
        | "CollectSamples" >> beam.combiners.ToList()
        | "WriteSamples" >> beam.Map(write_samples, out_dir)
    )
    _ = (
        (placed.docs, p | "AllShardNames" >> beam.Create(all_shards))
        | "WithEmptyShards" >> beam.Flatten()
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.Map(write_shard, out_dir, cfg.num_shards)
    )
    _ = (
        read[REJECTED]
        | "CollectRejects" >> beam.combiners.ToList()
        | "WriteRejects" >> beam.Map(write_rejects, out_dir)
    )
    _ = (
        (read[TALLY], *(step[TALLY] for step in dropping), placed[TALLY])
        | "AllTallies" >> beam.Flatten()
        | "SumTallies" >> beam.CombinePerKey(sum)
        | "CollectTallies" >> beam.combiners.ToList()
        | "WriteStats" >> beam.Map(write_stats, out_dir, cfg)
    )


# ---------------------------------------------------------------- entry point

def output_files(num_shards: int) -> list[str]:
    """Every file the pipeline writes, relative to its output directory."""
    shards = [shard_name(split, i, num_shards) for split in SPLITS for i in range(num_shards)]
    return shards + [REJECTS_FILE, STATS_FILE, f"{SAMPLES_DIR}/kept.jsonl", f"{SAMPLES_DIR}/dropped.jsonl"]


def fetch_outputs(staged: str, out_dir: str, num_shards: int) -> None:
    """Copy a staged run's files into the local artifact directory, then delete the staging copy."""
    for rel in output_files(num_shards):
        src = FileSystems.join(staged, rel)
        dst = Path(out_dir, rel)
        dst.parent.mkdir(parents=True, exist_ok=True)
        with FileSystems.open(src, compression_type=CompressionTypes.UNCOMPRESSED) as f, open(dst, "wb") as g:
            while chunk := f.read(1 << 20):
                g.write(chunk)
    FileSystems.delete([staged])


def build(cfg: CorpusConfig, inputs: list[str], out_dir: Path, beam_args: list[str]) -> StageOutput:
    """Run the corpus pipeline over ``inputs`` (paths or globs) into ``out_dir``."""
    files = reader.expand_inputs(list(inputs))
    sources = reader.source_names(files)
    options = pipeline_options(beam_args, input_bytes(files))
    runner = options.view_as(StandardOptions).runner
    workers = ""
    if runner == LOCAL_RUNNER:
        direct = options.view_as(DirectOptions)
        workers = f", {direct.direct_num_workers} worker(s) ({direct.direct_running_mode})"
    progress(f"corpus: {len(files)} input file(s), runner {runner}{workers}, language {cfg.language}")
    staging = options.view_as(CorpusOptions).corpus_staging
    if staging is None and runner in REMOTE_RUNNERS:
        raise CorpusError(
            f"runner {runner} writes on remote workers: pass --corpus_staging gs://BUCKET/DIR (any path the "
            "workers and this machine can both reach); the artifact is copied from there into the local store"
        )
    out = FileSystems.join(staging, f"kolectra-corpus-{uuid.uuid4().hex}") if staging else str(out_dir)
    threshold = gc.get_threshold()  # an in-process worker tunes this process's GC: restore it after
    try:
        with beam.Pipeline(options=options) as p:
            _recipe(p, cfg, files, sources, out)
    finally:
        gc.set_threshold(*threshold)
    if staging:
        fetch_outputs(out, str(out_dir), cfg.num_shards)
    with FileSystems.open(FileSystems.join(str(out_dir), STATS_FILE), compression_type=CompressionTypes.UNCOMPRESSED) as f:
        stats = json.loads(f.read().decode("utf-8"))
    check_stats(stats, cfg, {v: k for k, v in sources.items()})
    write_dataset_card(out_dir)
    progress(
        f"corpus: {stats['records_in']} records -> {stats['records_out']} documents "
        f"({stats['splits']['valid']['documents']} valid), {stats['rejected']} rejected, "
        f"dropped {sum(stats['dropped'].values())} {stats['dropped']}"
    )
    return StageOutput(stats=stats)
