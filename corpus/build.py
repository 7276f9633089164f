"""The corpus stage as an Apache Beam pipeline: raw text files -> cleaned, deduplicated, segmented
documents in the ``corpus/shards.py`` format. First link of the chain (corpus -> vocab -> examples
-> pretrain -> finetune); the orchestration calls :func:`build` and wraps its output.

Recipe (the graph in :func:`_recipe` reads the same, one labelled step a line):
per input file (a large one in pieces: ``corpus/pieces.py``): read each line as a record or a
reject, normalise (language profile: ``corpus/languages.py``), drop boilerplate lines, filter, and
file the survivors into one of ``buckets`` dedup groups by a hash of their text -> group the
buckets -> exact dedup inside each
bucket (the copy with the smallest (source, line) survives) -> optional MinHash-LSH near-dup
clusters (``corpus/neardup.py``) -> ids that several surviving texts share, counted -> Kiwi sentences and morphemes, train/valid by a salted hash
of the text, shard by the text key -> deterministic shards sorted by (source, line) ->
``data/*.jsonl.gz`` (gzip mtime 0), ``rejects/rejects.jsonl``, ``samples/{kept,dropped}.jsonl``,
``stats.json`` (see ``corpus/outputs.py``).

The steps, and why their elements are large (chunks of documents, not documents), are in
``corpus/steps.py``; the files and the rules that decide their bytes in ``corpus/outputs.py``; the
checks of the finished job, and its summary lines, in ``corpus/job_checks.py``.

Runs on the in-process FnApiRunner by default (several worker processes for large inputs, see
``corpus/runners.py``), or on any Beam runner named with ``--runner``; remote workers write to
``--corpus_staging`` and the files are fetched into the local artifact.

Every record ends in exactly one of: a split, a reject reason, a drop reason. Each step emits
``(counter, n)`` tallies that are summed inside the pipeline into ``stats.json``, so
``records_in == records_out + rejected + sum(dropped)`` is checked from independent counts and
holds on any runner (Beam metrics are best-effort on some runners; this is exact).
"""

from __future__ import annotations

import dataclasses
import gc
import shutil
import uuid
from pathlib import Path
from typing import Callable

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

from kolectra.core import scratch, stops, storage
from kolectra.core.errors import Terminated
from kolectra.core.stage import StageOutput, progress
from kolectra.core.verbosity import NORMAL
from kolectra.corpus import drops, field_check, inputs, languages, neardup_beam, outputs, pieces, read_failures, reader
from kolectra.corpus import listing as listing_file
from kolectra.corpus.checked_json import checked_json_bytes, checked_note, jsonl_text_share, parquet_text_per_byte
from kolectra.corpus.config import OPERATIONAL, CorpusConfig  # noqa: F401  (OPERATIONAL: this module's API)
from kolectra.corpus.job_checks import PathsByName, check_stats, noting_damaged, summary  # build.check_stats: API
from kolectra.corpus.local_memory import check_local_memory
from kolectra.corpus.memory_model import (  # noqa: F401  (re-exported: the stage's API, as before its move)
    DROPS_BASE_MB,
    DROPS_PER_MB,
    LOCAL_MEMORY,
    LOCAL_MEMORY_BEAM_OWN,
    LOCAL_MEMORY_NEAR_DUP,
    LOCAL_MEMORY_NEAR_DUP_BEAM_OWN,
    LOCAL_WORKER_BASE_MB,
    LOCAL_WORKER_BASE_MB_NEAR_DUP,
    LOCAL_WORKER_MB,
    LOCAL_WORKER_MB_NEAR_DUP,
    SHARD_BUFFERS,
    expanded_sizes,
    expected_json_bytes,
    input_records,
    local_memory_model,
    local_worker_mb,
)
from kolectra.corpus.outputs import REJECTS_FILE, SAMPLES_KEPT, SAMPLES_PER_REASON, STATS_FILE, CorpusError, make_stats  # noqa: F401  (re-exported: the stage's API)
from kolectra.corpus.progress import Monitor, describe, read_counts
from kolectra.corpus.runners import (  # noqa: F401  (pipeline_options, local_workers, input_bytes: this module's API)
    LOCAL_RUNNER,
    REMOTE_RUNNERS,
    CorpusOptions,
    Interruption,
    analysis_threads,
    input_bytes,
    local_workers,
    new_pipeline,
    pipeline_options,
    runner_label,
    runner_setup,
    verbosity,
)
from kolectra.corpus.shards import write_dataset_card
from kolectra.corpus.steps import (  # noqa: F401  (re-exported: the stage's API)
    FILES,
    REJECTED,
    SAMPLES,
    TALLY,
    AnalyseAndPlace,
    IdBuckets,
    KeepFirstCopies,
    ReadAndClean,
    shared_ids,
)

STAGE_VERSION = 28  # bump when the same request's bytes change; history: docs/artifacts.md
LARGE = "large"  # the tag of the listing's files read in pieces


class CorpusInterrupted(KeyboardInterrupt):
    """Ctrl-C during the job; the message says how far it got and that what it built is discarded (a copy
    published before, which a ``--force`` rebuild replaces only once complete, stands: the store says so)."""


class CorpusTerminated(CorpusInterrupted, Terminated):
    """SIGTERM during the job (exit status 143); the message as :class:`CorpusInterrupted`'s."""


# The most exact-dedup groups: at the default 4 MB each, 4 TB of uncompressed input before a group
# grows (what that costs the chunks sent to them: docs/scale.md).
MAX_DEDUP_BUCKETS = 1 << 20


def dedup_buckets(uncompressed: float, group_bytes: int) -> int:
    """Dedup groups for ``uncompressed`` bytes of input (``memory_model.expanded_sizes``, summed):
    about ``group_bytes`` each, a power of two in [16, :data:`MAX_DEDUP_BUCKETS`]. Many enough to
    spread Kiwi over every worker and to bound what one holds (a group's unique documents, held by
    one worker at a time), few enough for large elements. The output does not depend on it."""
    n = 16
    while n < MAX_DEDUP_BUCKETS and n * group_bytes < uncompressed:
        n *= 2
    return n


def resolve_shards(cfg: CorpusConfig, listed: list[inputs.InputFile], json_bytes: float | None = None) -> CorpusConfig:
    """``num_shards=0``: the count for these inputs' expected shard JSON (``json_bytes``, worked out
    when not given: ``memory_model.expected_json_bytes``, a gzip trailer's size where it says more than
    the ratio), which the job then uses and ``stats.json`` records; a count that was given stays."""
    if cfg.num_shards:
        return cfg
    json_bytes = expected_json_bytes(listed) if json_bytes is None else json_bytes
    return dataclasses.replace(cfg, num_shards=outputs.shards_for_json(json_bytes, cfg.shard_bytes))


def _source_rank(rank: int, listed: tuple) -> tuple[int, str]:
    return rank, listed[1]


def _ranked(reason_doc, seed: int):
    return outputs.sample_item(*reason_doc, seed)


def _large_apart(ranked: tuple, cfg: CorpusConfig):
    """The listing's files, those read in pieces (corpus/pieces.py) to their own output."""
    rank, (listed, _) = ranked
    if pieces.splittable(listed, cfg.format, cfg.split_bytes):
        yield beam.pvalue.TaggedOutput(LARGE, (rank, ranked))
    else:
        yield ranked


def _recipe(p: beam.Pipeline, cfg: CorpusConfig, listed_at: str, out_dir: str, buckets: int,
            progress_dir: str | None, threads: int = 1, copies: str | None = None) -> None:
    # Beam's graph is most of the job's fixed cost on small inputs: a GroupByKey on each file's index
    # spreads the files as Reshuffle would, and a ToList whose input is never empty (the summed
    # tallies, an entry per shard) goes without the empty-input default, each
    # a few tens of ms less to build and run (docs/benchmarks.md). The files come from the listing's
    # file at ``listed_at``, (rank, (file, source)) a line: the graph holds its location, not a value
    # a file (corpus/listing.py)
    listing = p | "ListInputs" >> beam.Create([listed_at]) | "ReadListing" >> beam.FlatMap(listing_file.read)
    work, tallies = listing, []
    # copies: where a large compressed file's copies go, given only when a listed file is read in
    # pieces (build): the graph of a corpus of small files is as it was
    if copies:
        files = listing | "LargeApart" >> beam.FlatMap(_large_apart, cfg).with_outputs(LARGE, main="whole")
        planned = (
            files[LARGE]
            | "SpreadLarge" >> beam.GroupByKey()
            | "PlanPieces" >> beam.ParDo(pieces.PlanPieces(cfg.split_bytes, cfg.format, cfg.max_line_bytes, progress_dir, copies)).with_outputs(
                pieces.PIECE_ROWS, TALLY, main="work")
        )
        work = (files.whole, planned.work) | "AllWork" >> beam.Flatten()
        tallies.append(planned[TALLY])
    dropping = (drops.DROPS,) if cfg.write_dropped else ()  # every drop written (corpus/drops.py)
    read = (
        work
        | "SpreadFiles" >> beam.GroupByKey()  # one file (or piece) per worker at a time, not all in one bundle
        | "ReadAndClean" >> beam.ParDo(ReadAndClean(cfg, buckets, progress_dir)).with_outputs(
            REJECTED, TALLY, SAMPLES, FILES, pieces.PIECE_ROWS, *dropping, main="chunks")
    )
    file_rows = read[FILES]
    if copies:  # each large file's one row, from its plan's and its pieces' parts
        file_rows = (
            (file_rows,
             (read[pieces.PIECE_ROWS], planned[pieces.PIECE_ROWS]) | "AllPieceRows" >> beam.Flatten()
             | "CombinePieceRows" >> beam.CombinePerKey(pieces.CombineRows()))
            | "AllFileRows" >> beam.Flatten()
        )
    unique = (
        read.chunks
        | "GroupBuckets" >> beam.GroupByKey()
        | "KeepFirstCopies" >> beam.ParDo(KeepFirstCopies(cfg.seed, progress_dir, cfg.num_shards if dropping else 0,
                                                           cfg.samples_per_reason))
        .with_outputs(TALLY, SAMPLES, *dropping, main="docs")
    )
    tallies, samples, docs = [*tallies, read[TALLY], unique[TALLY]], [read[SAMPLES], unique[SAMPLES]], unique.docs
    dropped = [read[tag] for tag in dropping] + [unique[tag] for tag in dropping]
    if cfg.near_dup_threshold > 0:
        near = docs | "NearDedup" >> neardup_beam.NearDedup(
            cfg.near_dup_threshold, cfg.seed, listing | "SourceRanks" >> beam.MapTuple(_source_rank),
            chain_limit=cfg.near_dup_chain_limit, groups=buckets)  # lists of one dedup group in and out
        docs = near.docs
        tallies.append(near[TALLY])
        samples.append(near[SAMPLES] | "RankNearSamples" >> beam.Map(_ranked, cfg.seed))
        if dropping:  # each near duplicate is an element already (its sample's)
            dropped.append(near[SAMPLES] | "NearDrops" >> beam.Map(drops.packed_item, cfg.num_shards))
    shared = (docs | "IdBuckets" >> beam.ParDo(IdBuckets(buckets)) | "GroupIds" >> beam.GroupByKey()
              | "SharedIds" >> beam.FlatMap(shared_ids))
    tallies.append(shared)
    placed = docs | "AnalyseAndPlace" >> beam.ParDo(AnalyseAndPlace(cfg, progress_dir, threads)).with_outputs(
        TALLY, SAMPLES, REJECTED, main="docs")
    dropped_samples = (
        tuple(samples)
        | "DroppedSamples" >> beam.Flatten()
        | "FewPerReason" >> beam.combiners.Top.SmallestPerKey(cfg.samples_per_reason)
    )
    kept_samples = placed[SAMPLES] | "FewKept" >> beam.combiners.Top.SmallestPerKey(SAMPLES_KEPT)
    written_samples = (
        (dropped_samples, kept_samples)
        | "AllSamples" >> beam.Flatten()
        | "CollectSamples" >> beam.combiners.ToList()
        | "WriteSamples" >> beam.FlatMap(outputs.write_samples, out_dir)
    )
    summed = (*tallies, placed[TALLY]) | "AllTallies" >> beam.Flatten() | "SumTallies" >> beam.CombinePerKey(sum)
    # the kept fields' kinds over the whole job decide how the shards spell floats (shards.float_fields)
    kinds = (cfg.keep_fields, beam.pvalue.AsList(summed | "FieldKinds" >> beam.Filter(outputs.is_field_kind))) \
        if cfg.keep_fields else ()
    # The shard shuffle carries the analysed documents alone; the shards none went to are written
    # empty afterwards. A Flatten of the documents with every shard's name ahead of it made the
    # local runner copy the documents once more through a stage of its own (docs/scale.md)
    written_shards = (
        placed.docs
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.Map(outputs.write_shard, out_dir, cfg.num_shards, *kinds)
        | "CollectShards" >> beam.combiners.ToList()  # with its default: a job without documents has every shard empty
        | "WriteEmptyShards" >> beam.FlatMap(outputs.write_empty_shards, out_dir, cfg.num_shards)
    )
    # the rejects and every input file's row (stats/files.jsonl) go to their files sorted and
    # streamed; stats.json gets the totals and the first STATS_SOURCES files' rows by name
    written_lines = (
        (read[REJECTED] | "RejectLines" >> beam.Map(outputs.reject_item),
         placed[REJECTED] | "AnalysisRejectLines" >> beam.Map(outputs.reject_item),  # documents Kiwi failed on
         file_rows | "FileLines" >> beam.Map(outputs.file_item),
         p | "NoRejects" >> beam.Create([(REJECTS_FILE, [])]))  # the file is written when nothing was rejected too
        | "AllLines" >> beam.Flatten()
        | "GroupLines" >> beam.GroupByKey()
        | "WriteLines" >> beam.Map(outputs.write_sorted, out_dir)
    )
    shown = file_rows | "FirstFiles" >> beam.combiners.Top.Smallest(outputs.STATS_SOURCES, key=outputs.source_of)
    written_stats = (
        summed
        | "CollectTallies" >> beam.combiners.ToList().without_defaults()
        | "WriteStats" >> beam.Map(outputs.write_stats, out_dir, cfg, beam.pvalue.AsSingleton(shown))
    )
    written_drops = [tuple(dropped) | "AllDrops" >> beam.Flatten() | "GroupDrops" >> beam.GroupByKey()
                     | "WriteDrops" >> beam.Map(drops.write_part, out_dir)] if dropping else []
    _ = (
        (written_samples, written_shards, written_lines, written_stats, *written_drops)
        | "AllWritten" >> beam.Flatten()
        | "CollectWritten" >> beam.combiners.ToList().without_defaults()
        | "ReportWritten" >> beam.Map(outputs.write_report, out_dir)
    )


# ---------------------------------------------------------------- entry point


def build(cfg: CorpusConfig, patterns: list[str], out_dir: Path, beam_args: list[str], *,
          listed: list[inputs.InputFile] | None = None, keep_failed: Path | None = None,
          name_of: Callable[[str], str] | None = None) -> StageOutput:
    """Run the corpus pipeline over ``patterns`` (paths or globs; or the files ``listed`` before)
    into ``out_dir``. If the run fails a check, its rejects and stats are copied to
    ``keep_failed`` (when given), which the error names. ``name_of``: the listed files' source
    names (``reader.source_namer`` of their paths), when the caller has worked it out already."""
    listed = inputs.list_inputs(list(patterns)) if listed is None else listed
    if not listed:  # list_inputs refuses a pattern with no match; a caller's own empty listing too
        raise CorpusError("corpus: no input files")
    if any(inputs.is_remote(f.where) for f in listed):
        # a malformed KOLECTRA_READ_RETRY_WAITS is refused here, in one line: met first by the job's reads, it made
        # every store input a "damaged" file (cannot open), which max_damaged_files accepts, its text left out
        read_failures.retry_waits()
    _check_keep_fields(cfg, listed)
    _check_text_field(cfg, next(iter(listed)).where)
    name_of = name_of or reader.source_namer(f.path for f in listed)  # no table of names: one is worked out when asked
    total = sum(f.bytes for f in listed)
    split = any(pieces.splittable(f, cfg.format, cfg.split_bytes) for f in listed)
    # one plan for the shards, the dedup groups and the local check: a gzip file's trailer (a zstd file's
    # frame header) says its size once decompressed, where it says more than the ratio (one small read)
    expanded = expanded_sizes(listed)
    buckets = dedup_buckets(sum(expanded, 0.0), cfg.dedup_group_bytes)
    json_bytes = outputs.json_of(expanded)
    cfg = resolve_shards(cfg, listed, json_bytes)
    options = pipeline_options(beam_args, total)
    runner = options.view_as(StandardOptions).runner
    # every drop written: the drops' shuffle follows the records, so the local runner's check counts them
    records = input_records(listed, cfg.format) if cfg.write_dropped and runner == LOCAL_RUNNER else None
    model = local_memory_model(cfg, runner, json_bytes, records)  # a worker's term by the planned shards
    # the check counts the inputs' text as the fits count it: a text file's all text, a JSONL file's its share,
    # a Parquet file's the text its rows hold a stored byte
    share = jsonl_text_share(listed, cfg.format, cfg.text_field, cfg.max_line_bytes) if runner == LOCAL_RUNNER else None
    held = parquet_text_per_byte(listed, cfg.format, cfg.text_field, cfg.keep_fields) if runner == LOCAL_RUNNER else None
    checked = checked_json_bytes(listed, expanded, cfg.format, share, held)
    if checked != json_bytes:
        model = dataclasses.replace(model, measure=f"{model.measure} ({checked_note(listed, cfg.format, share, held)})")
    peak = check_local_memory(options, "corpus", checked, model)
    threads = analysis_threads(options)  # after the check, which may take fewer workers
    shown = runner_label(options, peak)
    if languages.profile(cfg.language).analyser == "kiwi":
        shown += f", Kiwi on {threads} thread(s) a worker"
    progress(f"corpus: {len(listed)} input file(s), {total / 1e6:,.1f} MB -> {cfg.num_shards} shard(s) a split, "
             f"runner {shown}, language {cfg.language}")
    in_place = storage.is_url(str(out_dir))  # the artifact lives on a store: workers write there
    staging = None if in_place else options.view_as(CorpusOptions).corpus_staging
    if staging is None and runner in REMOTE_RUNNERS and not in_place:
        raise CorpusError(
            f"runner {runner} writes on remote workers: keep the artifacts on a store they reach "
            "(--out gs://BUCKET/kolectra), or pass --corpus_staging gs://BUCKET/DIR to have the files copied "
            "from there into this local root"
        )
    out = storage.join(staging, f"kolectra-corpus-{uuid.uuid4().hex}") if staging else str(out_dir)
    # workers on this machine report progress through files here (remote ones cannot reach it)
    progress_dir = None if runner in REMOTE_RUNNERS else scratch.mkdtemp("progress")
    # the listing, and a large compressed file's copies (corpus/piece_copies.py), go where the workers
    # read: the progress folder for the local runner's (or a local output's), else the job's folder on
    # the store, which a cluster's workers reach (removed below, whatever the job's end)
    shared = progress_dir is not None and (runner == LOCAL_RUNNER or not storage.is_url(out))
    job_dir = progress_dir if shared else storage.join(out, "_job")
    listed_at = storage.join(job_dir, listing_file.FILE_NAME)
    copies_at = storage.join(job_dir, "pieces")
    threshold = gc.get_threshold()  # an in-process worker tunes this process's GC: restore it after
    ran = False
    # nothing is written in the job's folder before the runner's checks pass: a launch refused by them
    # (a missing extra, no credentials) spent up to a minute removing the folder it never made, in the
    # store client's own search for credentials (gcsfs asks the GCE metadata server, with back-off)
    job_started = False
    try:
        with Interruption(owns=progress_dir) as ctrl_c, Monitor(progress_dir or "", total,
                                               enabled=progress_dir is not None and verbosity() >= NORMAL), \
                read_failures.Watch(progress_dir if _worker_processes(options) else None, ctrl_c.fail, CorpusError):
            with runner_setup(options), new_pipeline(options) as p:  # the runner's own checks first
                job_started = True
                listing_file.write(listing_file.in_name_order(listed, name_of), listed_at)
                _recipe(p, cfg, listed_at, out, buckets, progress_dir, threads, copies_at if split else None)
            ran = True
    except BaseException:
        if ctrl_c.failure is not None and not ctrl_c.terminated:  # read_failures.Watch's: an input's read failed
            raise ctrl_c.failure from None
        if not (ctrl_c.happened or ctrl_c.terminated):
            raise
        done = describe(read_counts(progress_dir), total) if progress_dir else "progress unknown"
        raise (CorpusTerminated if ctrl_c.terminated else CorpusInterrupted)(
            f"{'terminated' + stops.why() if ctrl_c.terminated else 'interrupted'} ({done}); what it built is "
            "discarded: a corpus artifact appears only when complete, run the same command again to start over") from None
    finally:
        gc.set_threshold(*threshold)
        if progress_dir:
            shutil.rmtree(progress_dir, ignore_errors=True)
        if job_dir != progress_dir and job_started:  # on the store: the listing and any copies, however it ended
            _remove_job_dir(job_dir, quiet=not ran)
    if staging:
        outputs.fetch_outputs(out, str(out_dir), cfg.num_shards)
    written = outputs.take_report(str(out_dir))
    stats = outputs.read_stats(str(out_dir))
    kept_rejects = storage.join(str(keep_failed or out_dir), REJECTS_FILE)
    damaged: list[tuple[str, str]] = []  # at most max_damaged_files rows, or check_stats stops the job
    try:
        check_stats(stats, cfg, PathsByName(listed, name_of), rejects=kept_rejects,
                    rows=noting_damaged(outputs.read_file_rows(str(out_dir)), damaged))
    except CorpusError as e:
        if keep_failed is None or not stats["records_in"]:  # empty inputs: nothing to look at
            raise
        for rel in (REJECTS_FILE, outputs.FILES_FILE, STATS_FILE):
            storage.write_bytes(storage.join(str(keep_failed), rel), storage.read_bytes(storage.join(str(out_dir), rel)))
        if str(keep_failed) in str(e):  # the message names the kept dead letters already
            raise
        raise type(e)(f"{e} (the failed run's stats and dead letters are kept in {keep_failed})") from None
    written.append(write_dataset_card(out_dir, cfg.keep_fields))
    summary(stats, damaged, neardup_beam.ROUNDS)
    return StageOutput(stats=stats, files=written if in_place else None)


def _worker_processes(options) -> bool:
    """Whether the local job reads in worker processes, where :class:`read_failures.Watch` may stop it at a
    failed read's note. In process the reads run on the launcher's main thread: the Watch's stop landed inside
    the next file's read (a sound file recorded as damaged) and at times left the process hanging at its
    exit; there the check after the job names the file."""
    direct = options.view_as(DirectOptions)
    return direct.direct_running_mode == "multi_processing" and (direct.direct_num_workers or 1) > 1


def _remove_job_dir(location: str, quiet: bool) -> None:
    """Remove the job's folder on the store. After a job that failed (or never started: the store's
    client missing, say), a failure to is not raised: the job's own error is the one to see."""
    try:
        storage.remove(location, recursive=True)
    except Exception:
        if not quiet:
            raise


def _check_keep_fields(cfg: CorpusConfig, listed: list[inputs.InputFile]) -> None:
    """keep_fields with no JSONL input could only write null fields: refuse the request. Among
    JSONL inputs, a text or blocks file's documents get null fields (counted as missing)."""
    if cfg.keep_fields and not any(reader.resolve_format(f.path, cfg.format) in reader.FIELD_FORMATS for f in listed):
        raise CorpusError(
            f"--keep-fields {','.join(cfg.keep_fields)}: none of the {len(listed)} input(s) is read as JSONL or Parquet "
            f"(--format {cfg.format}), and text or blocks lines have no fields to keep; use --format jsonl "
            "(or auto with .jsonl/.json/.ndjson files), or leave --keep-fields out")


def _check_text_field(cfg: CorpusConfig, first: str) -> None:
    """A text_field that the first input's records do not have is refused before the job (which would
    reject every record of it as missing_text), naming the fields they have (field_check.text_field_problem);
    and a JSONL or Parquet file that --format auto would read as text (field_check.jsonl_as_text_problem,
    parquet_as_text_problem)."""
    problem = field_check.text_field_problem(first, cfg.format, cfg.text_field, cfg.max_line_bytes)
    if problem:
        raise CorpusError(f"text_field {cfg.text_field!r}: {problem} (--text-field NAME sets another)")
    problem = field_check.jsonl_as_text_problem(first, cfg.format, cfg.max_line_bytes)
    if problem:
        raise CorpusError(problem)
    problem = field_check.parquet_as_text_problem(first, cfg.format)
    if problem:
        raise CorpusError(problem)
