"""What the corpus job writes, and the pure rules that decide it: document keys, the train/valid
split, shards, samples, ``stats.json`` (its checks after the job: ``corpus/job_checks.py``). Part of
the corpus stage; the Beam graph in ``corpus/build.py`` calls these, and nothing here depends on the
runner.

Every file is written through :mod:`kolectra.core.storage` (a local directory, the artifact's
prefix on a store, or ``--corpus_staging``), its size and sha256 reported by the worker that wrote
it, with bytes that depend only on the input and the config: shards are gzip with a
fixed header and documents sorted by (source, line); rejects, samples and stats are sorted (the
files of sorted lines stream through :mod:`kolectra.corpus.sorted_files`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import zlib
from pathlib import Path
from typing import Iterable, Iterator

from kolectra.core import scratch, storage
from kolectra.core.errors import UserInputError
from kolectra.corpus import filters, reader, suffixes
from kolectra.corpus.config import CorpusConfig
from kolectra.corpus.record_rules import FIELD_REPAIRED
from kolectra.corpus.shards import DATA_DIR, SPLITS, float_fields
from kolectra.corpus.sorted_files import sorted_lines, write_lines

REJECTS_FILE = "rejects/rejects.jsonl"
# one JSON line per input file (source, records_in, rejected, bytes, sha256, damaged?, changed?),
# sorted by source name; streamed like the rejects, so no worker holds a table of every input file
FILES_FILE = "stats/files.jsonl"
# a file row's key, only where the server or store failed the read after the listing (corpus/read_failures.py):
# why, for the check after the job to name the file (the job then fails: no published row has it)
READ_FAILED = "read_failed"
ANALYSER_PROBE = "kiwi_probe"  # the tally of the workers' Kiwi probe hashes (corpus/segment.py: probe_hash)
# stats.json -> sources repeats files.jsonl's first STATS_SOURCES rows by name (their count and
# how many are left out beside them): a bounded table, whatever the number of input files
STATS_SOURCES = 1000
REPORT_FILE = ".written.json"  # the workers' file entries, for the launcher; never part of the artifact
STATS_FILE = "stats.json"
SAMPLES_DIR = "samples"
SAMPLES_PER_REASON = CorpusConfig.samples_per_reason  # dropped documents shown per reason by default
SAMPLES_KEPT = 20  # kept documents in samples/kept.jsonl
SAMPLE_CHARS = 400  # texts in samples are cut to this many characters
SPLIT_COUNTS = ("documents", "sentences", "morphs", "chars")  # per split in stats.json
# stats.json -> near_dup: distinct candidate pairs checked, those that verified, band buckets over
# near_dup_chain_limit linked as stars only (and their members), nodes left unconverged
NEAR_DUP_COUNTS = ("candidate_pairs", "verified_pairs", "star_only_buckets", "star_only_documents", "unconverged_nodes")
RECORDS_IN = ("records_in",)  # the tally of the lines each input file held
INPUT_FILES = ("input_files",)  # the tally of the files read (1 each)
MISSING_FIELD = "missing_field"  # (MISSING_FIELD, field) tallies: written documents where a kept field is null
FIELD_KIND = "field_kind"  # (FIELD_KIND, field, kind) tallies: a kept field's values by JSON kind (shards.value_kind)


class CorpusError(UserInputError):
    """The input is unusable (too many rejects, damaged or changing files, nothing left) or the
    run is misconfigured; names the file or the missing option. A ValueError, so the CLI
    reports it without a traceback."""


# ---------------------------------------------------------------- pure rules


def text_key(text: str) -> bytes:
    """Dedup key: a 128-bit hash of the normalised text (collisions are negligible at corpus scale),
    as its 16 bytes: every document carries it through the dedup and shard shuffles, where the
    32-character hex form took twice the bytes (49 bytes a Python object against 81)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def bucket_of(key: bytes, buckets: int) -> int:
    """The dedup group of a text key: every copy of a text lands in the same one (the key's first
    4 bytes as a number, the value the hex form's first 8 characters gave)."""
    return int.from_bytes(key[:4], "big") % buckets


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


def sample_item(reason: str, doc: dict, seed: int) -> tuple[str, tuple[str, str]]:
    """(reason, document) -> (reason, (rank, JSON row)) for the per-reason Top-N."""
    return reason, (sample_rank(doc, seed), json.dumps(sample_row(reason, doc), ensure_ascii=False, sort_keys=True))


def keep_smallest(rows: list, item, n: int) -> None:
    """Keep the ``n`` smallest items in the sorted list ``rows`` (a per-worker Top-N)."""
    if len(rows) < n or item < rows[-1]:
        rows.append(item)
        rows.sort()
        del rows[n:]


def shard_of(key: bytes, num_shards: int) -> int:
    return int.from_bytes(key, "big") % num_shards


# Shard counts from the input's size. Shard JSON per byte of (uncompressed) input: 2.5 on the NSMC
# reviews' JSONL (their other fields are half of it), about 5 on plain text, since the sentence and
# morpheme spans make a line about 5 times its text (docs/corpus.md, "Shards"); between the two,
# so shard_bytes is met within a factor of 1.5 either way. Compressed inputs expand first, by
# typical ratios for text (gzip: 3.1 on the reviews), or by the size a gzip trailer or zstd frame
# header states where that is more (corpus/memory_model.py: expanded_sizes, which the job plans by).
# Parquet's columns are compressed too (snappy by default): the NSMC reviews written with pyarrow's
# defaults are 2.3-2.4 times smaller than their JSONL (2.8 for the text column alone; docs/scale.md),
# so a Parquet file counts as the JSONL it holds, for the dedup groups and the shards alike.
JSON_PER_INPUT_BYTE = 3.5
# every suffix the reader decompresses (compress.SUFFIXES: .gzip and .zstd too, which counted as
# uncompressed: a third of the shards and dedup groups they need, and of the local memory check's figure)
EXPANSION = {".gz": 3.1, ".gzip": 3.1, ".bz2": 3.6, ".zst": 3.3, ".zstd": 3.3, ".parquet": 2.4, ".pq": 2.4}


def _expanded(files: Iterable[tuple[str, int]]):
    for path, size in files:
        yield size * EXPANSION.get(os.path.splitext(suffixes.file_name(path))[1], 1.0)


def expected_input_bytes(files: Iterable[tuple[str, int]]) -> float:
    """The bytes inputs of these (path, stored bytes) hold once decompressed, as JSONL for a
    Parquet file (an estimate; see above)."""
    return sum(_expanded(files), 0.0)


def expected_json_bytes(files: Iterable[tuple[str, int]]) -> float:
    """The shard JSON that inputs of these (path, bytes) should give (an estimate; see above)."""
    return json_of(_expanded(files))


def json_of(expanded: Iterable[float]) -> float:
    """The shard JSON that inputs of these sizes once decompressed should give."""
    return sum((b * JSON_PER_INPUT_BYTE for b in expanded), 0.0)


def shards_for(files: Iterable[tuple[str, int]], shard_bytes: int) -> int:
    """Shards per split for inputs of these (path, bytes): about ``shard_bytes`` of JSON each, so
    that what one shard writer handles, and the shards' sizes, stay the same at any corpus size."""
    return shards_for_json(expected_json_bytes(files), shard_bytes)


def shards_for_json(json_bytes: float, shard_bytes: int) -> int:
    """Shards per split for ``json_bytes`` of expected shard JSON: about ``shard_bytes`` each."""
    return max(1, math.ceil(json_bytes / shard_bytes))


def shard_name(split: str, shard: int, num_shards: int) -> str:
    return f"{DATA_DIR}/{split}-{shard:05d}-of-{num_shards:05d}.jsonl.gz"


# One encoder for every line: json.dumps with options builds a new one per call. check_circular
# off: a document is a tree, and the check costs a fifth of the encoding.
_DOCUMENT_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)


def document_json(rec: dict, keep_fields: tuple[str, ...] = ()) -> str:
    """One line of a shard, in the field order of ``corpus/shards.py``; the kept input fields
    (``keep_fields``, values in ``rec["fields"]``) follow, in the order they were asked for."""
    doc = {
        "id": rec["id"],
        "source": rec["source"],
        "text": rec["text"],
        "sentences": rec["sentences"],
        "morphs": rec["morphs"],
    }
    if keep_fields:
        doc.update(zip(keep_fields, rec["fields"]))
    return _DOCUMENT_ENCODER.encode(doc)


def floats_as_strings(line: str, fields: tuple[str, ...]) -> str:
    """A shard line with the values of ``fields`` (floats or null) spelled as strings of their
    shortest round-trip digits, the rest of the line unchanged (why: :func:`shards.float_fields`)."""
    doc = json.loads(line)
    for f in fields:
        if doc[f] is not None:
            doc[f] = repr(doc[f])
    return _DOCUMENT_ENCODER.encode(doc)


# ---------------------------------------------------------------- stats


def is_field_kind(tally_item) -> bool:
    return tally_item[0][0] == FIELD_KIND


def field_kinds(tally: dict, keep_fields: tuple[str, ...]) -> dict:
    """Each kept field's non-null values by JSON kind (``stats.json`` → ``field_kinds``): what the
    dataset card declares each field as, and which fields' floats the shards spell as strings."""
    return {f: dict(sorted((k[2], n) for k, n in tally.items() if k[:2] == (FIELD_KIND, f) and n))
            for f in keep_fields}


def make_stats(tally: dict, cfg: CorpusConfig, files: dict | None = None) -> dict:
    """``stats.json`` from the summed tallies and the rows of the first input files by name
    (:data:`STATS_SOURCES`: records in and rejected, bytes, sha256, and ``damaged``/``changed``
    when so; every file's row is in :data:`FILES_FILE`); every known reason appears, zero or not."""
    get = lambda *k: tally.get(k, 0)  # noqa: E731
    files = files or {}
    rejected_reasons = {r: get("rejected", r) for r in reader.REJECT_REASONS}
    dropped = {r: get("dropped", r) for r in filters.DROP_REASONS}
    for k in tally:  # reasons added later still land in stats.json
        if k[0] == "dropped" and k[1] not in dropped:
            dropped[k[1]] = tally[k]
        if k[0] == "rejected" and k[1] not in rejected_reasons:
            rejected_reasons[k[1]] = tally[k]
    splits = {s: {f: get(s, f) for f in SPLIT_COUNTS} for s in SPLITS}
    repaired = {r: get("repaired", r) for r in reader.REPAIRED_REASONS}
    kept = {}
    if cfg.keep_fields:  # only then: without keep_fields stats.json has the bytes it always had
        repaired[FIELD_REPAIRED] = get("repaired", FIELD_REPAIRED)
        # written documents whose field is null (absent, null, or a text/blocks input's record)
        kept = {"missing_fields": {f: get(MISSING_FIELD, f) for f in cfg.keep_fields},
                # what the dataset card declares each field as (shards.write_dataset_card)
                "field_kinds": field_kinds(tally, cfg.keep_fields)}
    count = max(get(*INPUT_FILES), len(files))
    return {
        "records_in": get(*RECORDS_IN),
        "records_out": sum(splits[s]["documents"] for s in SPLITS),
        "rejected": sum(rejected_reasons.values()),
        "dropped": dropped,
        "rejected_reasons": rejected_reasons,
        "repaired": repaired,
        **kept,
        # kept documents whose id another kept document (of different text) has too: all kept
        "duplicate_id_different_text": get("ids", "duplicate_id_different_text"),
        # only with near-dup on: what its stages did (docs/corpus.md, near duplicates)
        **({"near_dup": {k: get("near_dup", k) for k in NEAR_DUP_COUNTS}} if cfg.near_dup_threshold > 0 else {}),
        "splits": splits,
        "documents": sum(splits[s]["documents"] for s in SPLITS),
        "sentences": sum(splits[s]["sentences"] for s in SPLITS),
        "morphs": sum(splits[s]["morphs"] for s in SPLITS),
        "chars": sum(splits[s]["chars"] for s in SPLITS),
        "num_shards": cfg.num_shards,
        "sources": {s: files[s] for s in sorted(files)},
        # every input file's row is in sources_file; sources leaves out sources_truncated of them
        "sources_count": count,
        "sources_file": FILES_FILE,
        "sources_truncated": count - len(files),
        # the code path each worker's Kiwi analysed on, as its analysis of fixed sentences tells it: one
        # hash when the job is consistent, whatever the number of workers (a Korean corpus only)
        **({"kiwi_probe": probes} if (probes := sorted(k[1] for k, n in tally.items() if k[0] == ANALYSER_PROBE and n))
           else {}),
    }


# ---------------------------------------------------------------- writers (run on a worker)


def _write(out_dir: str, rel: str, data: bytes) -> dict:
    """Write one file of the artifact; its entry (path, bytes, sha256) is computed here, where it is
    written, and travels to the launcher (:func:`write_report`), which never reads it back."""
    path = storage.join(out_dir, rel)
    try:
        return {"path": rel, **storage.write_bytes(path, data)}
    except OSError as e:  # a full disk: name the file (the library's report of the failure would not)
        raise OSError(e.errno, e.strerror, path) from e


def pack_chunk(items: list) -> bytes:
    """A chunk of documents as it crosses the dedup or the shard shuffle: pickled and compressed at
    zlib's fastest level. Shard lines repeat their keys and morph tags, so a chunk of reviews
    shrinks about 2.9 times (12.2 MB of pickled chunks for 2.4 MB of text -> 4.2 MB); the dedup
    chunks' texts and sources 1.6 times (3.4 -> 2.1 MB); about 0.05 CPU s a MB of text each way.
    Less to shuffle (billed per GB on Dataflow) and, on the local runner, which holds every shuffle
    in memory, less held (docs/scale.md)."""
    return zlib.compress(pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL), 1)


def unpack_chunk(blob: bytes) -> list:
    return pickle.loads(zlib.decompress(blob))


def write_shard(item, out_dir: str, num_shards: int, keep_fields: tuple[str, ...] = (), kind_tallies=()) -> dict:
    """((split, shard), packed chunks of (position, JSON line): :func:`pack_chunk`) -> the shard
    file, sorted by (source, line); the floats of a kept field whose values are all floats
    (``kind_tallies``: the job's summed (FIELD_KIND, field, kind) tallies) spelled as strings
    (:func:`shards.float_fields`).

    Streams: the chunks are read once (a distributed runner's grouped values need not fit in
    memory), at most :data:`sorted_files.RUN_BYTES` of lines are sorted in memory (more are sorted in runs on
    the worker's temporary disk and merged), and the lines go to the compressor in blocks. Peak
    memory, measured with ``tracemalloc`` (docs/scale.md): 2.3 times the shard's JSON below
    RUN_BYTES (27.5 MB for an 11.8 MB shard), 1.6 times RUN_BYTES above it (109 MB for 200 MB),
    where sorting and joining the whole shard took 6.7 times its JSON."""
    (split, shard), chunks = item
    floats = float_fields(field_kinds(dict(kind_tallies), keep_fields))
    with scratch.temporary_directory("shard") as spill:
        lines = sorted_lines(map(unpack_chunk, chunks), spill)
        if floats:
            lines = (floats_as_strings(line, floats) for line in lines)
        return write_lines(out_dir, shard_name(split, shard, num_shards), lines, gzipped=True)


def write_empty_shards(entries: list[dict], out_dir: str, num_shards: int) -> list[dict]:
    """The shard writer's entries (:func:`write_shard`), with an empty shard file written for each
    (split, shard) that no document went to, as :func:`write_shard` writes one, and its entry."""
    written = {entry["path"] for entry in entries}
    empty = [(split, i) for split in SPLITS for i in range(num_shards)
             if shard_name(split, i, num_shards) not in written]
    return [*entries, *(write_shard((place, ()), out_dir, num_shards) for place in empty)]


def reject_item(rec: dict) -> tuple[str, list]:
    """A dead letter as the sorted writer's input: one chunk of one (position, JSON line), keyed
    by the one file they all go to. The position sorts by (source, line), then by the line itself,
    so the file's order never depends on the order the rejects arrive in."""
    line = json.dumps(rec, ensure_ascii=False, sort_keys=True)
    return REJECTS_FILE, [((rec["source"], rec["line"], line), line)]


def file_item(source_row: tuple[str, dict]) -> tuple[str, list]:
    """An input file's (source, row) as the sorted writer's input, like :func:`reject_item`:
    :data:`FILES_FILE`'s line ``{"source": ..., **row}``, in source order (names are unique)."""
    source, row = source_row
    return FILES_FILE, [((source,), json.dumps({"source": source, **row}, ensure_ascii=False, sort_keys=True))]


def source_of(source_row: tuple[str, dict]) -> str:
    return source_row[0]


def write_sorted(item, out_dir: str, run_bytes: int | None = None) -> dict:
    """(file, chunks of (position, JSON line)) -> that file (``rejects/rejects.jsonl``,
    ``stats/files.jsonl``), sorted by position. Streams like the shard writer: a job may reject
    up to ``max_reject_ratio`` of its records (millions on a large crawl) and read millions of
    files, and at most ``run_bytes`` of lines are held at a time."""
    rel, chunks = item
    with scratch.temporary_directory("sorted") as spill:
        return write_lines(out_dir, rel, sorted_lines(chunks, spill, run_bytes), gzipped=False)


def write_samples(per_reason: list, out_dir: str) -> list[dict]:
    """``samples/kept.jsonl`` and ``samples/dropped.jsonl`` (a few per reason, sorted)."""
    kept = [row for reason, rows in per_reason if reason == "kept" for _, row in sorted(rows)]
    dropped = [row for reason, rows in sorted(per_reason) if reason != "kept" for _, row in sorted(rows)]
    return [_write(out_dir, f"{SAMPLES_DIR}/{name}.jsonl", "".join(r + "\n" for r in rows).encode("utf-8"))
            for name, rows in (("kept", kept), ("dropped", dropped))]


def write_stats(tallies: list, out_dir: str, cfg: CorpusConfig, shown: list) -> dict:
    """``stats.json`` from the summed tallies (a few per reason, none per file) and the first
    :data:`STATS_SOURCES` input files' (source, row) by name."""
    stats = make_stats(dict(tallies), cfg, dict(shown))
    return _write(out_dir, STATS_FILE, (json.dumps(stats, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))


def write_report(entries: list[dict], out_dir: str) -> None:
    """Every written file's entry, for the launcher: ``REPORT_FILE`` (read and removed by it)."""
    data = json.dumps(sorted(entries, key=lambda e: e["path"]), ensure_ascii=False).encode("utf-8")
    storage.write_bytes(storage.join(out_dir, REPORT_FILE), data)


def take_report(out_dir: str) -> list[dict]:
    """The entries the workers reported (see :func:`write_report`); the report itself is removed."""
    where = storage.join(out_dir, REPORT_FILE)
    entries = json.loads(storage.read_bytes(where).decode("utf-8"))
    if storage.is_url(where):
        storage.remove(where)
    else:
        os.unlink(where)
    return entries


def output_files(num_shards: int) -> list[str]:
    """Every file the pipeline writes, relative to its output directory."""
    shards = [shard_name(split, i, num_shards) for split in SPLITS for i in range(num_shards)]
    return shards + [REJECTS_FILE, FILES_FILE, STATS_FILE, f"{SAMPLES_DIR}/kept.jsonl", f"{SAMPLES_DIR}/dropped.jsonl"]


def fetch_outputs(staged: str, out_dir: str, num_shards: int) -> None:
    """Copy a staged run's files into the local artifact directory, then delete the staging copy;
    beside the files every run writes, those its report names (``dropped/``: corpus/drops.py)."""
    storage.download(storage.join(staged, REPORT_FILE), str(Path(out_dir, REPORT_FILE)))
    fixed = output_files(num_shards)
    reported = json.loads(Path(out_dir, REPORT_FILE).read_bytes().decode("utf-8"))
    for rel in [*fixed, *sorted({e["path"] for e in reported} - set(fixed))]:
        storage.download(storage.join(staged, rel), str(Path(out_dir, rel)))
    storage.remove(staged, recursive=True)


def read_stats(out_dir: str) -> dict:
    return json.loads(storage.read_bytes(storage.join(out_dir, STATS_FILE)).decode("utf-8"))


def read_file_rows(out_dir: str) -> Iterator[tuple[str, dict]]:
    """Every input file's (source, row) from :data:`FILES_FILE`, in name order, a line at a time."""
    with storage.open_file(storage.join(out_dir, FILES_FILE), "rb") as f:
        for line in f:
            row = json.loads(line)
            yield row.pop("source"), row
