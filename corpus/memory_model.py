"""The corpus job's memory on Beam's local runner, as fitted: the launcher's peak (one in-process
worker included) per MB of the input's expected shard JSON, near-dup off and on, with
``corpus/beam_local.py``'s changes and on Beam's own runner; each worker process's term, which the
job's shard size bounds; and the drops' shuffle and writer when ``write_dropped`` is set, which follow
the input's records (:func:`input_records` counts them before the job). A gzip input's size once
decompressed is read from its trailer where that says more than the typical ratio (:func:`expanded_sizes`,
which the job's shard count and dedup groups take too).
``corpus/local_memory.py`` checks a job against it before the job (:func:`local_memory_model` gives
the job's :class:`~kolectra.corpus.local_memory.MemoryModel`); the measurements behind each figure
are in docs/scale.md ("What a corpus size needs", "Every drop written")."""

from __future__ import annotations

import dataclasses
import itertools
import re
import threading
from array import array
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from kolectra.core import storage
from kolectra.corpus import beam_local, compress, http_reads, outputs, parquet, read_failures, reader
from kolectra.corpus.config import CorpusConfig
from kolectra.corpus.input_reads import open_input
from kolectra.corpus.inputs import InputFile, is_remote
from kolectra.corpus.local_memory import MemoryModel
from kolectra.corpus.runners import LOCAL_RUNNER

# The local runner's peak RSS per MB of expected shard JSON (corpus/local_memory.py: MemoryModel), fitted
# by benchmarks/local_peak.py on 1-8 NSMC review files with corpus/beam_local.py's changes and on Beam's
# own runner, near-dup off and on, each a little over every measured peak; an input byte is 3.5 bytes
# of JSON (outputs.JSON_PER_INPUT_BYTE). The fits and their margins: docs/scale.md ("What a corpus
# size needs").
# Each worker process beside the launcher (multi_processing: corpus/local_memory.py) holds its own
# Kiwi, harness and budgeted chunks, about 1.0 GB (1.2 with near-dup on, whose Kiwi stage takes the
# documents joined to their marks), and in the shard stage up to five shard-sized buffers (the group
# being written three times in Beam's channel and two waiting): bounded by the shard's size, a
# setting, not by the input (docs/scale.md, "The local runner's worker processes").
LOCAL_WORKER_BASE_MB, LOCAL_WORKER_BASE_MB_NEAR_DUP = 1000, 1200
SHARD_BUFFERS = 5  # shard-sized buffers a worker holds at most in the shard stage


def local_worker_mb(shard_json_bytes: float, near_dup: bool) -> float:
    """A corpus worker process's allowance for shards of ``shard_json_bytes`` of JSON."""
    return (LOCAL_WORKER_BASE_MB_NEAR_DUP if near_dup else LOCAL_WORKER_BASE_MB) + SHARD_BUFFERS * shard_json_bytes / 1e6


LOCAL_WORKER_MB = local_worker_mb(CorpusConfig.shard_bytes, near_dup=False)  # at the default shard_bytes: 2.0 GB
LOCAL_WORKER_MB_NEAR_DUP = local_worker_mb(CorpusConfig.shard_bytes, near_dup=True)
# 0.76 GB until 2026-12-01, when the job on the first review file peaked at 835 MB against 834: Beam
# and kolectra's imports had grown by about 28 MB (226 MB before the first stage, 198 on 2026-11-29)
LOCAL_MEMORY = MemoryModel(base_mb=800, per_mb=1.5, worker_mb=LOCAL_WORKER_MB)
# near-dup and Beam's own, measured again on 2026-12-01 (c0bd6de): 6-14 % over their 1-2 file peaks
# (Beam's own at 1 file the closest: 842 MB against 889), so they stand
LOCAL_MEMORY_BEAM_OWN = MemoryModel(base_mb=740, per_mb=3.0, worker_mb=LOCAL_WORKER_MB)
LOCAL_MEMORY_NEAR_DUP = MemoryModel(base_mb=910, per_mb=1.6, worker_mb=LOCAL_WORKER_MB_NEAR_DUP)
LOCAL_MEMORY_NEAR_DUP_BEAM_OWN = MemoryModel(base_mb=830, per_mb=3.5, worker_mb=LOCAL_WORKER_MB_NEAR_DUP)
# write_dropped (corpus/drops.py) sends every drop through a shuffle of its own, which the local runner
# holds whole, and the process writing a (reason, part) file sorts up to sorted_files.RUN_BYTES of its
# lines. A drop costs its row's fields whatever its text, so what the shuffle holds follows the records,
# not the bytes: 3 M lines of 1-2 syllables, all too_short, peaked at 1,099 MB with it and 759 without
# (75 bytes a line), 3 M blank lines at 987 MB (51 bytes a line, one byte of input each), where a term
# per MB of JSON, fitted on the syllables, was 5 % under the blank lines and 33-74 % over reviews
# (docs/scale.md, "Every drop written"). So the input's records are counted before the job
# (:func:`input_records`) and each is taken to be dropped; a long drop costs less than the kept
# document it replaces, which the fits above count.
DROPS_BASE_MB = 130  # the drop writer's sorted run (a worker process's, or the launcher's in process)
DROP_BYTES = 80  # bytes held for each record's drop in the launcher's shuffle: 75 measured, rounded up
DROPS_PER_MB = 2.6  # MB per MB of expected shard JSON, where the records were not counted


def local_memory_model(cfg: CorpusConfig, runner: str, json_bytes: float | None = None,
                       records: int | None = None) -> MemoryModel:
    """The fitted peak for this job, with near-dup or without, on the local runner with or without
    corpus/beam_local.py's changes (applied here, as the runner would before the job); a worker
    process's term for this job's shards (``json_bytes`` of JSON over ``cfg.num_shards`` a split:
    a few shards of a small input are small, a ``num_shards`` set low makes them large); with
    ``write_dropped``, the drops' shuffle and writer on top: :data:`DROP_BYTES` for each of the
    input's ``records`` (:func:`input_records`), or :data:`DROPS_PER_MB` when they were not counted."""
    changed = runner == LOCAL_RUNNER and beam_local.install()
    near_dup = cfg.near_dup_threshold > 0
    if near_dup:
        model = LOCAL_MEMORY_NEAR_DUP if changed else LOCAL_MEMORY_NEAR_DUP_BEAM_OWN
    else:
        model = LOCAL_MEMORY if changed else LOCAL_MEMORY_BEAM_OWN
    shard = json_bytes / cfg.num_shards if json_bytes is not None and cfg.num_shards > 0 else cfg.shard_bytes
    worker = local_worker_mb(shard, near_dup)
    if cfg.write_dropped:  # every drop shuffled and written: held beside the rest (above)
        if records is not None:
            counted = {"records": records, "per_record": DROP_BYTES}
        else:
            counted = {"per_mb": model.per_mb + DROPS_PER_MB}
        return dataclasses.replace(model, base_mb=model.base_mb + DROPS_BASE_MB, worker_mb=worker + DROPS_BASE_MB,
                                   measure=f"{model.measure}, every drop written", **counted)
    return model if worker == model.worker_mb else dataclasses.replace(model, worker_mb=worker)


@read_failures.before_the_job()  # its reads' failures are passed over: tried again once
def input_records(listed: Iterable[InputFile], fmt: str) -> int:
    """The records of these input files, as the drops' term counts them: a text or JSONL file's
    lines (a blocks file's records are fewer: its lines bound them), a Parquet file's rows from its
    footer. Read once more before the job, decompressed 64 KiB at a time: 0.2 CPU s for the first 4
    NSMC review files (57 MB of JSONL), which the job then takes 30-40 CPU s a file to analyse.
    A file that cannot be read counts what was read of it (the job dead-letters it, ``damaged_file``).
    :data:`SIZE_READERS` files at a time, :data:`SIZE_BATCH` of the listing held: on a store a file
    costs a HEAD and a GET, which one at a time took 89 ms a file at a 30 ms round trip (2.5 hours
    at 100,000 files; docs/scale.md, "The job's plan on many files").
    A stop (Ctrl-C, SIGTERM's exception) ends the files being read at their next block, where the pool's
    end waited for each to be read to its end (8 files of 1 GB decompressed: 12 s after a Ctrl-C)."""
    total, files, stop = 0, iter(listed), threading.Event()
    with ThreadPoolExecutor(SIZE_READERS) as pool:
        try:
            while batch := list(itertools.islice(files, SIZE_BATCH)):
                total += sum(pool.map(_records, (f.where for f in batch), itertools.repeat(fmt), itertools.repeat(stop)))
        except BaseException:
            stop.set()
            raise
    return total


def _records(path: str, fmt: str, stop: threading.Event | None = None) -> int:
    lines, last = 0, b"\n"
    try:
        if reader.resolve_format(path, fmt) == "parquet":
            with parquet.open_seekable(path) as f:
                return sum(rows for rows, _ in parquet.row_groups(f))
        with compress.open_decompressed(path) as stream:
            while (block := stream.read(1 << 16)) and not (stop and stop.is_set()):
                lines, last = lines + block.count(b"\n"), block[-1:]
    except Exception:  # noqa: BLE001 - damaged or gone: the job says so, the estimate keeps what it read
        return lines
    return lines + (last != b"\n")  # a last line without its newline is a record too


# A gzip member ends with ISIZE, its uncompressed size mod 2^32 (RFC 1952), so one read of a file's last 4
# bytes (on a store, one ranged GET) gives a single-member file's size once decompressed, where the
# stored bytes times outputs.EXPANSION's 3.1 (the reviews: 3.10) took 24 MB of numbered copies of one
# review (0.55 MB gzipped, 43 times smaller) for 1.7 MB. The trailer can only say less than the truth
# (a multi-member file's is its last member's; over 4 GiB, the size mod 2^32), never more, so the larger
# of the two is taken: never under the ratio's estimate. A trailer over deflate's most (1,032 bytes out
# for a byte in) is no trailer (a file cut off, or not gzip: the job dead-letters it) and is ignored.
# A zstd frame's header (its first bytes, at most 18) holds its content size when the writer knew it
# (the zstd tool on a file does; a stream's writer may not): the first frame's, less than the file's
# when frames follow (pzstd), so again the larger; over zstd's most (an RLE block: 128 KiB for 4 bytes)
# it is ignored.
DEFLATE_MOST = 1032
ZSTD_MOST = 1 << 15
ZSTD_HEADER = 18  # a frame header's most bytes
# A trailer is any file's last 4 bytes: a text file named .gz (a download its client decompressed, the
# name kept) ends in text, its newline read as 167-184 MB (more in its other bytes), so a 292 kB one was
# planned at 176 MB (603 times, under deflate's most past 170 kB), and a few such files made the shard
# count and the local check's figure many times the corpus. So the last GZIP_TAIL bytes are read (the
# same one GET): where they are text (UTF-8, no control character but tab and line ends) the file is no
# gzip and the ratio stands. A gzip file's last 8 bytes are its CRC-32 and ISIZE (under 16 MB: a zero
# byte) after deflate's bits, which pass for text about once in 10^10 (an 8-byte window of deflated Korean
# text passes 0.29 % of the time: 0.48 a byte). A stored gzip (level 0) ends in its own text, so its last 8
# bytes decide: 0.18 % of those over 16 MiB are taken for text and planned at the ratio, 3.1 times the
# stored bytes where they hold about 1 time: more shards than needed, never fewer.
# A file cut off starts as gzip and ends in deflate data: 4 random bytes, ignored only where they say
# more than DEFLATE_MOST times the file (always under 4 MB, rarely over 4 GB); the job dead-letters it.
GZIP_TAIL = 32
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8's continuation bytes: a character cut at the tail's start
SIZE_BATCH = 1024  # files planned at a time: what the plan holds, whatever the number of files
SIZE_READERS = 8  # local files (or a store without fsspec's async API) read at once, a thread each
# an http(s) server that answers a trailer's range with the whole file is read through up to this many bytes
# a file (a megabyte held at a time); past them the ratio's estimate stands
WHOLE_ANSWER_MOST = 32 << 20
STORE_READERS = 64  # ranged GETs in flight at once on an async store (s3fs, gcsfs): see docs/scale.md


def expected_json_bytes(listed: Iterable[InputFile]) -> float:
    """The shard JSON these inputs should give (:func:`expanded_sizes`), as the job plans its shards
    and the local memory check counts it."""
    return outputs.json_of(expanded_sizes(listed))


def expanded_sizes(listed: Iterable[InputFile]) -> array:
    """Each input's bytes once decompressed (as JSONL for Parquet), in the listing's order, by which the
    job plans its shards and dedup groups and the local check counts its memory: ``outputs.expected_input_bytes``'s
    ratio, or the size a gzip file's trailer or a zstd file's frame header says (:func:`stated_sizes`)
    where that is more, so a corpus that compresses well still gets shards of about ``shard_bytes``.
    One small read a gzip or zstd file, :data:`SIZE_BATCH` files at a time (the listing is not held: it may be a file read
    again at each pass, ``corpus.inputs.Files``); 8 bytes a file kept."""
    sizes, files = array("d"), iter(listed)
    with ThreadPoolExecutor(SIZE_READERS) as pool:
        while batch := list(itertools.islice(files, SIZE_BATCH)):
            ratio = [outputs.expected_input_bytes([(f.path, f.bytes)]) for f in batch]
            sizes.extend(max(r, s or 0) for r, s in zip(ratio, _stated(batch, pool)))
    return sizes


def stated_size(f: InputFile) -> int | None:
    """:func:`stated_sizes` of one file."""
    return stated_sizes([f])[0]


def stated_sizes(files: list[InputFile]) -> list[int | None]:
    """The size once decompressed that each gzip file's ISIZE (its last member's, mod 2^32) or zstd file's
    first frame header states; None where it states none, cannot be read, or cannot be true (over
    :data:`DEFLATE_MOST` or :data:`ZSTD_MOST` times the file; a .gz file that ends in text). On a store,
    one ranged GET of those bytes (the last :data:`GZIP_TAIL`; the listing gave the size),
    :data:`STORE_READERS` at a time."""
    with ThreadPoolExecutor(SIZE_READERS) as pool:
        return _stated(files, pool)


def _stated(files: list[InputFile], pool: ThreadPoolExecutor) -> list[int | None]:
    codecs = [compress.codec_of(f.path) for f in files]
    wanted = {i: ((max(0, f.bytes - GZIP_TAIL), f.bytes) if codec == "gzip" else (0, min(f.bytes, ZSTD_HEADER)))
              for i, (f, codec) in enumerate(zip(files, codecs))
              if (codec == "gzip" and f.bytes >= 18) or (codec == "zstd" and f.bytes > 0)}  # a gzip member: 18 bytes at least
    stated: list[int | None] = [None] * len(files)
    for i, data in _ranges(files, wanted, pool).items():
        stated[i] = _size_in(codecs[i], data, files[i].bytes)
    return stated


def _size_in(codec: str, data: bytes | None, stored: int) -> int | None:
    """The size a trailer (gzip) or frame header (zstd) of a file of ``stored`` bytes states, if it can be true."""
    if data is None:
        return None
    if codec == "gzip":
        if _is_text(data):  # a text file named .gz (above)
            return None
        size, most = (int.from_bytes(data[-4:], "little") if len(data) >= 4 else None), DEFLATE_MOST
    else:
        try:
            import zstandard  # noqa: PLC0415 - optional dependency; only .zst inputs need it

            size, most = zstandard.frame_content_size(data), ZSTD_MOST
        except Exception:  # noqa: BLE001 - no zstandard, or no frame header: the ratio's estimate stands
            return None
    return size if size is not None and 0 <= size <= most * stored else None


def _is_text(tail: bytes) -> bool:
    """Whether a file's last bytes are text: UTF-8 (a character cut at their start aside) with no control
    character but tab and line ends."""
    try:
        text = tail.lstrip(_CONTINUATION).decode()
    except UnicodeDecodeError:
        return False
    return _CONTROL.search(text) is None


def _ranges(files: list[InputFile], wanted: dict[int, tuple[int, int]], pool: ThreadPoolExecutor) -> dict[int, bytes | None]:
    """The bytes [start, end) of each file ``wanted`` names (by its place in ``files``); None where they
    cannot be read (gone, shrunk, refused: the job says so; the ratio's estimate stands). A store with
    fsspec's async API (s3fs, gcsfs) is asked :data:`STORE_READERS` at a time in one call (its own
    connections: core/store_clients.py), where a thread a request spent 1.4 ms of CPU and a round trip each
    at 8 at a time (docs/scale.md, "The job's plan on many files"); local files (and other file systems,
    https:// too) in threads."""
    got: dict[int, bytes | None] = {}
    by_store: dict[str, list[int]] = {}
    local = []
    for i in wanted:
        if is_remote(files[i].path):
            by_store.setdefault(storage.scheme(files[i].path), []).append(i)
        else:
            local.append(i)
    for places in by_store.values():
        from fsspec.asyn import AsyncFileSystem  # noqa: PLC0415 - only when a store is read

        fs, _ = storage.filesystem(files[places[0]].path)
        # s3fs and gcsfs only: kolectra sizes their connection pools, and they honour a range, where an
        # HTTP server may answer the whole file (held for the whole batch: 24 files of 1 MB, 31 MB at once)
        if isinstance(fs, AsyncFileSystem) and storage.scheme(files[places[0]].path) in storage.ROOT_SCHEMES:
            paths = [storage.filesystem(files[i].path)[1] for i in places]
            try:
                answers = fs.cat_ranges(paths, [wanted[i][0] for i in places], [wanted[i][1] for i in places],
                                        on_error="return", batch_size=STORE_READERS)
            except Exception:  # noqa: BLE001 - the store unreachable as a whole: the job says so
                answers = [None] * len(places)
            got.update((i, a if isinstance(a, bytes) else None) for i, a in zip(places, answers))
        else:
            local += places
    got.update(zip(local, pool.map(lambda i: _read(files[i], *wanted[i]), local)))
    return got


def _read(f: InputFile, start: int, end: int) -> bytes | None:
    try:
        if is_remote(f.path):
            fs, path = storage.filesystem(f.where)
            if storage.scheme(f.path) in ("http", "https"):
                # a server that answers the range with the whole file: read through a megabyte at a time, up to
                # WHOLE_ANSWER_MOST (cat_file held the answer, a 20 GB input's for its last 32 bytes); a failure is
                # not tried again: an estimate's read, which the job's own read makes again if it must
                opened = fs.open(path, size=f.bytes, block_size=max(1, end - start), cache_type="none")
                with http_reads.ranged_or_whole(opened, f.path, skip_most=WHOLE_ANSWER_MOST, waits=()) as ranged:
                    ranged.seek(start)
                    return ranged.read(end - start)
            data = fs.cat_file(path, start=start, end=end)
            # a server that ignores the range (an HTTP one may) answers the whole file: keep what was asked
            return data[start:end] if len(data) > end - start else data
        with open_input(f.where) as stream:
            stream.seek(start)
            return stream.read(end - start)
    except Exception:  # noqa: BLE001 - gone, unreadable: the job says so; the ratio's estimate stands
        return None
