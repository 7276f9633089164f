"""The corpus stage as an Apache Beam pipeline: raw text files -> cleaned, deduplicated, segmented
documents in the ``corpus/store.py`` format. First link of the chain (corpus -> vocab -> examples
-> pretrain -> finetune); the CLI calls :func:`build` and the lead's artifact code wraps its output.

Recipe (the graph in :func:`_recipe` reads the same, one labelled step a line):
read each input line as a record or a reject -> normalise -> filter -> exact dedup on the
normalised text (the copy with the smallest (source, line) survives) -> optional MinHash-LSH
near-dup removal -> Kiwi sentences and
morphemes -> train/valid by a salted hash of the text -> deterministic shards sorted by
(source, line) -> ``data/*.jsonl.gz`` (gzip mtime 0), ``rejects/rejects.jsonl``, ``stats.json``.

Every record ends in exactly one of: a split, a reject reason, a drop reason. Each step emits
``(counter, n)`` tallies that are summed inside the pipeline into ``stats.json``, so
``records_in == records_out + rejected + sum(dropped)`` is checked from independent counts and
holds on any runner (Beam metrics are best-effort on some runners; this is exact).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from corpus import filters, neardup, reader, text as text_rules
from corpus.config import CorpusConfig
from corpus.segment import Segmenter
from corpus.store import DATA_DIR, SPLITS
from pipeline.stage import StageOutput, progress

REJECTS_FILE = "rejects/rejects.jsonl"
STATS_FILE = "stats.json"
TALLY = neardup.TALLY  # the tag of (counter, n) side outputs
REJECTED = "rejected"
DROPPED = "dropped"


class CorpusError(RuntimeError):
    """The job ran but its input is unusable (too many rejects, nothing left); names the file."""


# ---------------------------------------------------------------- pure helpers


def text_key(text: str) -> str:
    """Dedup key: a 128-bit hash of the normalised text (collisions are negligible at corpus scale)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def split_of(text: str, seed: int, valid_fraction: float) -> str:
    """``valid`` for a stable, seed-salted ``valid_fraction`` of texts; equal texts share a split."""
    h = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=f"kolectra-split-{seed}".encode())
    return "valid" if int.from_bytes(h.digest(), "big") / 2**64 < valid_fraction else "train"


def shard_of(key: str, num_shards: int) -> int:
    return int(key, 16) % num_shards


def shard_name(split: str, shard: int, num_shards: int) -> str:
    return f"{DATA_DIR}/{split}-{shard:05d}-of-{num_shards:05d}.jsonl.gz"


def document_json(rec: dict) -> str:
    """One line of a shard, in the field order of ``corpus/store.py``."""
    doc = {
        "id": rec["id"],
        "source": rec["source"],
        "text": rec["text"],
        "sentences": rec["sentences"],
        "morphs": rec["morphs"],
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def gzip_bytes(data: bytes) -> bytes:
    """Gzip with a fixed header (mtime 0, no file name) so equal content gives equal bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="", compresslevel=6) as gz:
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
        s: {f: get(s, f) for f in ("documents", "sentences", "morphs", "chars")} for s in SPLITS
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
        clean = text_rules.clean(rec["text"], strip_html=cfg.strip_html, mask_pii=cfg.mask_pii, max_repeat=cfg.max_repeat)
        reason = filters.first_failure(clean, self.cfg)
        if reason is not None:
            yield beam.pvalue.TaggedOutput(TALLY, ((DROPPED, reason), 1))
            return
        yield text_key(clean), {**rec, "text": clean}


class KeepFirstCopy(beam.CombineFn):
    """Per text key: the copy with the smallest (source, line), and how many copies there were.
    Associative and commutative, so the survivor does not depend on bundling or worker count."""

    def create_accumulator(self):
        return (None, 0)

    def add_input(self, acc, rec):
        return self.merge_accumulators([acc, (rec, 1)])

    def merge_accumulators(self, accs):
        best, n = None, 0
        for rec, count in accs:
            n += count
            if rec is not None and (best is None or (rec["source"], rec["line"]) < (best["source"], best["line"])):
                best = rec
        return (best, n)

    def extract_output(self, acc):
        return acc


def emit_survivor(keyed):
    """(key, (survivor, copies)) -> (key, survivor), tallying copies - 1 as ``duplicate``."""
    key, (rec, copies) = keyed
    if copies > 1:
        yield beam.pvalue.TaggedOutput(TALLY, ((DROPPED, "duplicate"), copies - 1))
    yield key, rec


class Segment(beam.DoFn):
    """(key, record) -> (key, record + sentences + morphs); one Kiwi per worker."""

    def setup(self):
        self.segmenter = Segmenter()

    def process(self, keyed):
        key, rec = keyed
        sentences, morphs = self.segmenter.segment(rec["text"])
        yield key, {**rec, "sentences": sentences, "morphs": morphs}


def assign_shard(keyed, cfg: CorpusConfig):
    """(key, document) -> ((split, shard), document), tallying the split's counts."""
    key, doc = keyed
    split = split_of(doc["text"], cfg.seed, cfg.valid_fraction)
    yield beam.pvalue.TaggedOutput(TALLY, ((split, "documents"), 1))
    yield beam.pvalue.TaggedOutput(TALLY, ((split, "sentences"), len(doc["sentences"])))
    yield beam.pvalue.TaggedOutput(TALLY, ((split, "morphs"), len(doc["morphs"])))
    yield beam.pvalue.TaggedOutput(TALLY, ((split, "chars"), len(doc["text"])))
    yield (split, shard_of(key, cfg.num_shards)), doc


def write_shard(item, out_dir: str, num_shards: int) -> str:
    """((split, shard), documents) -> the shard file, documents sorted by (source, line)."""
    (split, shard), docs = item
    docs = sorted((d for d in docs if d is not None), key=lambda d: (d["source"], d["line"]))
    body = "".join(document_json(d) + "\n" for d in docs).encode("utf-8")
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


def write_stats(tallies: list, out_dir: str, cfg: CorpusConfig) -> str:
    stats = make_stats(dict(tallies), cfg)
    path = FileSystems.join(out_dir, STATS_FILE)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.write((json.dumps(stats, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))
    return path


def _recipe(p: beam.Pipeline, cfg: CorpusConfig, files: list[str], sources: dict[str, str], out_dir: str) -> None:
    all_shards = [((s, i), None) for s in SPLITS for i in range(cfg.num_shards)]  # empty shards too
    read = (
        p
        | "ListInputs" >> beam.Create(files)
        | "SpreadFiles" >> beam.Reshuffle()  # one file per worker at a time, not all in one bundle
        | "ReadRecords" >> beam.ParDo(ReadRecords(cfg, sources)).with_outputs(REJECTED, TALLY, main="records")
    )
    kept = (
        read.records
        | "CleanAndFilter" >> beam.ParDo(CleanAndFilter(cfg)).with_outputs(TALLY, main="kept")
    )
    unique = (
        kept.kept
        | "DedupExact" >> beam.CombinePerKey(KeepFirstCopy())
        | "EmitSurvivors" >> beam.FlatMap(emit_survivor).with_outputs(TALLY, main="docs")
    )
    near = unique.docs | "NearDedup" >> neardup.NearDedup(cfg.near_dup_threshold, cfg.seed)
    placed = (
        near.docs
        | "SentencesAndMorphs" >> beam.ParDo(Segment())
        | "AssignSplitShard" >> beam.FlatMap(assign_shard, cfg).with_outputs(TALLY, main="docs")
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
        (read[TALLY], kept[TALLY], unique[TALLY], near[TALLY], placed[TALLY])
        | "AllTallies" >> beam.Flatten()
        | "SumTallies" >> beam.CombinePerKey(sum)
        | "CollectTallies" >> beam.combiners.ToList()
        | "WriteStats" >> beam.Map(write_stats, out_dir, cfg)
    )


# ---------------------------------------------------------------- entry point

# Beam's "DirectRunner" is a switcher that first tries the Prism runner, which downloads a binary
# from GitHub; the FnApiRunner is the in-process batch engine it falls back to. Local runs must
# never touch the network, so both the default and an explicit DirectRunner mean FnApiRunner.
_LOCAL_RUNNER = "FnApiRunner"


def pipeline_options(beam_args: list[str]) -> PipelineOptions:
    opts = PipelineOptions(list(beam_args))
    std = opts.view_as(StandardOptions)
    if std.runner is None or std.runner.lower() in ("directrunner", "switchingdirectrunner"):
        std.runner = _LOCAL_RUNNER
    return opts


def build(cfg: CorpusConfig, inputs: list[str], out_dir: Path, beam_args: list[str]) -> StageOutput:
    """Run the corpus pipeline over ``inputs`` (paths or globs) into ``out_dir``."""
    files = reader.expand_inputs(list(inputs))
    sources = reader.source_names(files)
    options = pipeline_options(beam_args)
    runner = options.view_as(StandardOptions).runner
    progress(f"corpus: {len(files)} input file(s), runner {runner}")
    out = str(out_dir)
    with beam.Pipeline(options=options) as p:
        _recipe(p, cfg, files, sources, out)
    with FileSystems.open(FileSystems.join(out, STATS_FILE), compression_type=CompressionTypes.UNCOMPRESSED) as f:
        stats = json.loads(f.read().decode("utf-8"))
    check_stats(stats, cfg, {v: k for k, v in sources.items()})
    progress(
        f"corpus: {stats['records_in']} records -> {stats['records_out']} documents "
        f"({stats['splits']['valid']['documents']} valid), {stats['rejected']} rejected, "
        f"dropped {sum(stats['dropped'].values())} {stats['dropped']}"
    )
    return StageOutput(stats=stats)
