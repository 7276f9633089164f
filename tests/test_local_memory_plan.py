"""The local memory check's plan of a job's inputs (corpus/local_memory.py, corpus/inputs.py): the size a
compressed file holds once read (a gzip trailer, a zstd frame header, else the ratio), read with one ranged
GET a file on a bucket (s3, gcs, https), the listing in batches, and the count of the records written drops
read several files at once, stopped at once. Split from tests/test_local_memory.py (the model and the
worker count stay there)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re

import pytest

from kolectra.corpus import build, checked_json, inputs
from kolectra.corpus.local_memory import LocalMemoryError
from tests.gcs_support import gcs_endpoint, gs_bucket  # noqa: F401  (fixtures)
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)

REVIEW = "배우들 연기가 정말 좋았고 마지막 장면이 오래 기억에 남는 영화였습니다"


def _numbered_reviews(lines: int) -> bytes:
    """Distinct lines (each kept), 40 times smaller gzipped than the reviews' 3.1."""
    return "".join(f"{i}번째 관객: {REVIEW}\n" for i in range(lines)).encode()


def _refused_json_mb(tmp_path, path) -> float:
    """The MB of expected shard JSON the corpus job's refusal names (at 0.1 GB: before any Beam work)."""
    from kolectra.corpus.config import default_config

    with pytest.raises(LocalMemoryError) as e:
        build.build(default_config(), [str(path)], tmp_path / "out", ["--local_memory_gb", "0.1", "--direct_num_workers", "1"])
    return float(re.search(r"its ([\d,]+) MB of expected shard JSON", str(e.value)).group(1).replace(",", ""))


def test_a_gzip_of_repetitive_text_counts_its_size_once_decompressed(tmp_path):
    """12.2 MB of numbered copies of one review, all kept, gzipped to 0.3 MB: the check took the stored
    bytes 3.1 times (3 MB of text, 11 MB of JSON) where the same text uncompressed counts 43 MB (84 since a text
    file's byte counts as 7); the gzip trailer's ISIZE gives the text's size, so the two count the same."""
    text = _numbered_reviews(100_000)
    (tmp_path / "plain.txt").write_bytes(text)
    (tmp_path / "packed.txt.gz").write_bytes(gzip.compress(text))
    plain = _refused_json_mb(tmp_path, tmp_path / "plain.txt")
    assert plain == pytest.approx(len(text) * checked_json.TEXT_JSON_PER_INPUT_BYTE / 1e6, abs=1)
    assert _refused_json_mb(tmp_path, tmp_path / "packed.txt.gz") == plain


def test_a_zstd_file_of_repetitive_text_counts_the_size_its_frame_header_states(tmp_path):
    """The zstd tool on a file writes the content size in the frame header: the same 12.2 MB, 0.09 MB as
    zstd (130 times smaller), was counted at 3.3 times its stored bytes (1 MB of JSON where the text
    counts 42); the header's size gives the text's.
    A stream written without it, or frames one after another (pzstd; the header is the first frame's),
    keeps at least the ratio's estimate."""
    import zstandard

    from kolectra.corpus import inputs, outputs
    from kolectra.corpus.memory_model import expected_json_bytes

    text = _numbered_reviews(100_000)
    (tmp_path / "plain.txt").write_bytes(text)
    (tmp_path / "packed.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text))
    assert _refused_json_mb(tmp_path, tmp_path / "packed.txt.zst") == _refused_json_mb(tmp_path, tmp_path / "plain.txt")
    (tmp_path / "unsized.txt.zst").write_bytes(zstandard.ZstdCompressor(write_content_size=False).compress(text))
    (tmp_path / "frames.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(b"first\n")
                                              + zstandard.ZstdCompressor().compress(text))
    for name in ("unsized.txt.zst", "frames.txt.zst"):
        (f,) = inputs.list_inputs([str(tmp_path / name)])
        assert expected_json_bytes([f]) == outputs.expected_json_bytes([(f.path, f.bytes)])


def test_a_trailer_is_taken_only_where_it_says_more_than_the_ratio_and_could_be_one(tmp_path):
    """A multi-member gzip's trailer is its last member's (here 10 bytes): the ratio's estimate stands,
    never less; a file cut off ends in deflate data, here a claim of 4 GiB for 2 kB (over deflate's
    1,032 to 1): ignored; the reviews' own (3.10) is a hair over the ratio (3.1)."""
    from kolectra.corpus import inputs, outputs
    from kolectra.corpus.memory_model import expected_json_bytes, stated_size

    text = _numbered_reviews(20_000)
    (tmp_path / "members.txt.gz").write_bytes(gzip.compress(text) + gzip.compress(b"last line\n"))
    whole = gzip.compress(os.urandom(3000))
    (tmp_path / "cut.txt.gz").write_bytes(whole[:2000] + (2**32 - 1).to_bytes(4, "little"))
    (tmp_path / "one.txt.gz").write_bytes(gzip.compress(text))
    listed = {os.path.basename(f.path): f for f in inputs.list_inputs([str(tmp_path / "*.gz")])}
    assert stated_size(listed["members.txt.gz"]) == 10 and stated_size(listed["cut.txt.gz"]) is None
    assert stated_size(listed["one.txt.gz"]) == len(text)
    for name in ("members.txt.gz", "cut.txt.gz"):
        f = listed[name]
        assert expected_json_bytes([f]) == outputs.expected_json_bytes([(f.path, f.bytes)])
    assert expected_json_bytes([listed["one.txt.gz"]]) == len(text) * outputs.JSON_PER_INPUT_BYTE
    assert expected_json_bytes(listed.values()) == sum(expected_json_bytes([f]) for f in listed.values())


def test_a_gzip_trailer_on_a_bucket_is_one_ranged_get_of_its_last_32_bytes(bucket, s3_endpoint):
    """On a store each gzip file costs one GET of its last 32 bytes (its trailer, and whether they are
    text: the listing gave its size), and a zstd file one of its frame header (its first 18 bytes), never
    the whole object: 4 files, 4 GETs."""
    import zstandard

    from kolectra.core import storage
    from kolectra.corpus import inputs
    from kolectra.corpus.memory_model import expected_json_bytes

    text = _numbered_reviews(20_000)
    for i in range(3):
        storage.write_bytes(f"{bucket}/in/part-{i}.txt.gz", gzip.compress(text[i:]))
    storage.write_bytes(f"{bucket}/in/part-3.txt.zst", zstandard.ZstdCompressor().compress(text[3:]))
    listed = inputs.list_inputs([f"{bucket}/in/part-*"])
    with answered(s3_endpoint) as seen:
        got = expected_json_bytes(listed)
    assert got == sum(len(text) - i for i in range(4)) * 3.5
    assert sorted((r.operation, r.key.rsplit("/", 1)[1], r.range) for r in seen) == [
        ("GetObject", f"part-{i}.txt.gz", f"bytes={f.bytes - 32}-{f.bytes - 1}") for i, f in enumerate(listed[:3])
    ] + [("GetObject", "part-3.txt.zst", "bytes=0-17")]


def test_the_job_s_plan_on_a_bucket_is_one_ranged_get_a_file(bucket, s3_endpoint):
    """The shard count and the dedup groups take the gzip trailer's (zstd frame header's) size as the
    local check does: one plan, read once, whatever the runner: 3 .gz + 1 .zst on a store, 4 small GETs,
    and shards of about shard_bytes for text that compresses 40 times (the ratio's plan: a tenth)."""
    import zstandard

    from kolectra.core import storage
    from kolectra.corpus import inputs, outputs
    from kolectra.corpus.config import default_config
    from kolectra.corpus.memory_model import expanded_sizes

    text = _numbered_reviews(20_000)
    for i in range(3):
        storage.write_bytes(f"{bucket}/in/part-{i}.txt.gz", gzip.compress(text[i:]))
    storage.write_bytes(f"{bucket}/in/part-3.txt.zst", zstandard.ZstdCompressor().compress(text[3:]))
    listed = inputs.list_inputs([f"{bucket}/in/part-*"])
    cfg = dataclasses.replace(default_config(), shard_bytes=1 << 20)
    with answered(s3_endpoint) as seen:
        planned = build.resolve_shards(cfg, listed)
    assert len(seen) == 4 and all(r.operation == "GetObject" and r.range for r in seen), seen
    expanded = expanded_sizes(listed)  # what build() reads once for the shards, the groups and the check
    assert list(expanded) == [len(text) - i for i in range(4)]
    ratio_s = [(f.path, f.bytes) for f in listed]  # the stored sizes times the ratio: what the plan took
    assert planned.num_shards == 32 > 10 * outputs.shards_for(ratio_s, cfg.shard_bytes)
    assert build.dedup_buckets(sum(expanded), 1 << 18) == 64 > build.dedup_buckets(outputs.expected_input_bytes(ratio_s), 1 << 18)


def _jsonl_named_gz(tmp_path, files: int) -> list:
    """``files`` plain JSONL files of 292 kB named .jsonl.gz (a download its client decompressed):
    each ends in '"}\\n', which read as a gzip trailer says 176 MB."""
    from kolectra.corpus import inputs

    for i in range(files):
        text = "".join(json.dumps({"id": f"{i}-{j}", "text": f"{j}번째 관객: {REVIEW}"}, ensure_ascii=False) + "\n"
                       for j in range(2000)).encode()
        (tmp_path / f"part-{i}.jsonl.gz").write_bytes(text)
    return inputs.list_inputs([str(tmp_path / "part-*.jsonl.gz")])


def test_a_text_file_named_gz_is_planned_at_the_ratio_not_its_last_bytes(tmp_path):
    """A text file named .gz ends in text, which as a trailer says 176 MB for 292 kB (under deflate's
    1,032 to 1): 3 such files were planned at 10 shards of 192 MiB and 1,848 MB of shard JSON for the
    local check (the job dead-letters them, damaged_file). Its first bytes are not gzip's: the ratio's
    (1 shard, 9.5 MB)."""
    from kolectra.corpus import outputs
    from kolectra.corpus.config import default_config
    from kolectra.corpus.memory_model import expected_json_bytes, stated_size

    listed = _jsonl_named_gz(tmp_path, 3)
    assert all(stated_size(f) is None for f in listed)
    assert expected_json_bytes(listed) == outputs.expected_json_bytes([(f.path, f.bytes) for f in listed])
    assert build.resolve_shards(default_config(), listed).num_shards == 1


def test_the_plan_holds_a_batch_of_the_listing_not_every_file(tmp_path):
    """The plan's sizes for 20,000 files read again from the store's records file (``inputs.Files``, as
    ``pipeline/stages.corpus`` gives them): a batch of files at a time and 8 bytes a file, where the
    listing made a list and every file's future held 34 MB (169 MB at 100,000)."""
    import tracemalloc

    from kolectra.corpus.inputs import Files
    from kolectra.corpus.memory_model import expanded_sizes

    records = ({"path": f"/data/crawl/part-{i:07d}.jsonl", "bytes": 1000 + i, "identity": f"x{i}"} for i in range(20_000))
    listed = Files(tuple(records))
    tracemalloc.start()
    try:
        sizes = expanded_sizes(listed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(sizes) == 20_000 and sum(sizes) == sum(1000 + i for i in range(20_000))
    assert peak < 2e6, peak


def test_a_bucket_s_text_named_gz_is_one_get_and_a_gone_object_the_ratio(bucket, s3_endpoint):
    """On a store, one GET of the last 32 bytes a file: the gzip file is its trailer's size, the text
    file named .gz the ratio's (its last bytes are text); an object removed since the listing answers
    nothing and is planned at the ratio, without a traceback."""
    from kolectra.core import storage
    from kolectra.corpus import inputs, outputs
    from kolectra.corpus.memory_model import expanded_sizes

    text = "".join(json.dumps({"id": str(j), "text": f"{j}번째 관객: {REVIEW}"}, ensure_ascii=False) + "\n"
                   for j in range(2000)).encode()
    storage.write_bytes(f"{bucket}/in/a.jsonl.gz", gzip.compress(text[:50_000]))
    storage.write_bytes(f"{bucket}/in/b.jsonl.gz", text)
    storage.write_bytes(f"{bucket}/in/c.jsonl.gz", gzip.compress(text))
    listed = inputs.list_inputs([f"{bucket}/in/*.gz"])
    storage.remove(f"{bucket}/in/c.jsonl.gz")
    with answered(s3_endpoint) as seen:
        sizes = expanded_sizes(listed)
    ratio = [outputs.expected_input_bytes([(f.path, f.bytes)]) for f in listed]
    assert list(sizes) == [max(ratio[0], 50_000), ratio[1], ratio[2]]
    assert sorted((r.key.rsplit("/", 1)[1], r.range) for r in seen) == [
        (name, f"bytes={f.bytes - 32}-{f.bytes - 1}") for name, f in zip(("a.jsonl.gz", "b.jsonl.gz", "c.jsonl.gz"), listed)]


def test_write_dropped_s_count_reads_several_files_at_once(tmp_path, monkeypatch):
    """The records count (write_dropped on the local runner) opened one file after another: on a store a
    HEAD and a GET each, 89 ms a file at a 30 ms round trip (2.5 hours at 100,000 files). Files are
    read 8 at a time now (each opening here takes 50 ms), the same count."""
    import threading
    import time

    from kolectra.corpus import compress, inputs, memory_model

    for i in range(16):
        (tmp_path / f"part-{i}.txt").write_bytes(b"line\n" * (i + 1))
    listed = inputs.list_inputs([str(tmp_path / "*.txt")])
    opened = compress.open_decompressed
    lock, at_once, most = threading.Lock(), [0], [0]

    def slow_open(path):  # a store's round trip: how many files are being opened at the same moment
        with lock:
            at_once[0] += 1
            most[0] = max(most[0], at_once[0])
        time.sleep(0.05)
        with lock:
            at_once[0] -= 1
        return opened(path)

    monkeypatch.setattr(compress, "open_decompressed", slow_open)
    assert memory_model.input_records(listed, "text") == sum(range(1, 17))
    assert most[0] > 1


def test_the_plan_on_gcs_reads_each_trailer_too(gs_bucket):
    """gcsfs answers the batch's ranged reads (fsspec's async cat_ranges) as s3fs does: the gzip file's
    trailer, the zstd file's frame header, a text file named .gz at the ratio, a removed object too."""
    import zstandard

    from kolectra.core import storage
    from kolectra.corpus import inputs, outputs
    from kolectra.corpus.memory_model import expanded_sizes

    text = _numbered_reviews(20_000)
    storage.write_bytes(f"{gs_bucket}/in/a.txt.gz", gzip.compress(text))
    storage.write_bytes(f"{gs_bucket}/in/b.txt.zst", zstandard.ZstdCompressor().compress(text[1:]))
    storage.write_bytes(f"{gs_bucket}/in/c.txt.gz", text[2:])
    storage.write_bytes(f"{gs_bucket}/in/d.txt.gz", gzip.compress(text[3:]))
    listed = inputs.list_inputs([f"{gs_bucket}/in/*"])
    storage.remove(f"{gs_bucket}/in/d.txt.gz")
    ratio = [outputs.expected_input_bytes([(f.path, f.bytes)]) for f in listed]
    assert list(expanded_sizes(listed)) == [len(text), len(text) - 1, ratio[2], ratio[3]]


def test_a_stop_during_write_dropped_s_count_does_not_wait_for_the_files_being_read(tmp_path):
    """The count reads 8 files at a time in threads: a Ctrl-C (or SIGTERM's exception) in the launcher
    waited for each file being read to be read to its end (8 files of 1 GB decompressed: 11.8 s, where the
    count one file after another stopped at once; minutes at larger files). The files being read now stop
    at their next block. Here 3 files of 16 GB decompressed (2,048 gzip members of 8 MB, 16 MB stored):
    stopped 0.5 s in, the count must end long before they could be read."""
    import signal
    import threading
    import time
    import zlib

    from kolectra.corpus import inputs, memory_model

    class Stopped(Exception):
        pass

    def stopped(*_):
        raise Stopped

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    member = packer.compress(b'{"text": "x"}\n' * (8 << 20 >> 4)) + packer.flush()
    for i in range(3):
        (tmp_path / f"part-{i}.jsonl.gz").write_bytes(member * 2048)
    listed = inputs.list_inputs([str(tmp_path / "*.gz")])
    main, sent = threading.main_thread().ident, []

    def send() -> None:  # a Ctrl-C, as the launcher's main thread gets it
        sent.append(time.monotonic())
        signal.pthread_kill(main, signal.SIGUSR1)

    stop = threading.Timer(0.5, send)
    before = signal.signal(signal.SIGUSR1, stopped)
    try:
        stop.start()
        with pytest.raises(Stopped) as caught:
            memory_model.input_records(listed, "jsonl")
        ended = time.monotonic()
    finally:
        stop.join()
        signal.signal(signal.SIGUSR1, before)
    # the stop landed in the count (a main thread not scheduled for the timer's 0.5 s took it before)
    assert any(entry.name == "input_records" for entry in caught.traceback), caught.traceback
    assert ended - sent[0] < 10, ended - sent[0]  # read to their ends: minutes


def test_an_http_server_that_ignores_ranges_is_not_held_a_batch_of_whole_files_at_a_time(tmp_path):
    """An https:// input (any fsspec file system goes) whose server ignores Range headers (Python's own
    http.server; some dynamic endpoints) answers a trailer's GET with the whole file. The plan kept
    each answer until the batch (up to 1,024 files) was read: 24 files of 1 MB held 24 MB at once (64
    asked at a time through fsspec's async API, built for s3fs and gcsfs); now the wanted bytes are kept
    of each answer as it comes, 8 files at a time, and the trailers are read right."""
    import functools
    import http.server
    import threading
    import tracemalloc

    from kolectra.corpus import inputs, outputs
    from kolectra.corpus.memory_model import expanded_sizes

    text = _numbered_reviews(10_000)
    for i in range(24):  # 1 MB each, stored (level 0): its trailer says 1 MB, under the ratio's
        (tmp_path / f"part-{i}.txt.gz").write_bytes(gzip.compress(text, compresslevel=0))
    (tmp_path / "part-24.txt.gz").write_bytes(gzip.compress(text))  # 40 times smaller: its trailer's size
    quiet = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        listed = [inputs.InputFile(path=f"{base}/part-{i}.txt.gz", bytes=(tmp_path / f"part-{i}.txt.gz").stat().st_size,
                                   identity=str(i)) for i in range(25)]
        expanded_sizes(listed[:1])  # the client made, outside the measure
        tracemalloc.start()
        try:
            sizes = expanded_sizes(listed)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        server.shutdown()
    assert list(sizes) == [outputs.expected_input_bytes([(f.path, f.bytes)]) for f in listed[:24]] + [len(text)]
    assert peak < 12e6, peak


def test_the_text_share_s_sample_on_a_bucket_reads_its_sample_not_a_read_ahead_block(bucket, s3_endpoint):
    """The text share's sample before a local job reads the first 64 kB of up to 4 JSONL inputs: on a store it
    fetched s3fs's read-ahead block with them (50 MB: a 2 MB file whole, 200 MB for 4 large files before the
    job began); now only what it reads, a gzip file's too, and the share is the same."""
    from kolectra.core import storage

    line = (json.dumps({"id": 1, "text": REVIEW}, ensure_ascii=False) + "\n").encode()
    body = line * ((2 << 20) // len(line))
    storage.write_bytes(f"{bucket}/in/a.jsonl", body)
    random = "".join(json.dumps({"text": os.urandom(48).hex()}) + "\n" for _ in range(40_000)).encode()
    storage.write_bytes(f"{bucket}/in/b.jsonl.gz", gzip.compress(random))  # 2 MB gzipped: hex compresses 2 times
    listed = inputs.list_inputs([f"{bucket}/in/*"])
    with answered(s3_endpoint) as seen:
        share = checked_json.jsonl_text_share(listed, "auto", "text", 1 << 20)
    assert share is not None and share > 0.5
    spans = [tuple(map(int, r.range.removeprefix("bytes=").split("-"))) for r in seen if r.operation == "GetObject"]
    assert spans and all(r.range for r in seen if r.operation == "GetObject"), seen
    assert sum(end + 1 - start for start, end in spans) < 1 << 20, spans


@pytest.mark.parametrize("name", ["a.jsonl", "a.jsonl.gz", "a.txt"])
def test_the_field_check_on_a_bucket_reads_a_block_not_s3fs_s_read_ahead(bucket, s3_endpoint, name):
    """The checks of the first input before a corpus job (its text field, JSONL saved as .txt) read its first 100
    records: on a store the first read fetched s3fs's read-ahead block (50 MB: a 4 MB file whole); now one 1 MB
    block, a gzip file's too, in one or two GETs, and the answer is the same."""
    from kolectra.core import storage
    from kolectra.corpus import field_check

    random = "".join(json.dumps({"id": i, "body": os.urandom(48).hex()}) + "\n" for i in range(80_000)).encode()
    storage.write_bytes(f"{bucket}/in/{name}", gzip.compress(random) if name.endswith(".gz") else random)
    path = f"{bucket}/in/{name}"
    with answered(s3_endpoint) as seen:
        if name == "a.txt":
            assert "JSON object" in field_check.jsonl_as_text_problem(path, "auto", 1 << 20)
        else:
            assert "has a field 'text'; its records have: id, body" in \
                field_check.text_field_problem(path, "auto", "text", 1 << 20)
    gets = [r for r in seen if r.operation == "GetObject"]
    spans = [tuple(map(int, r.range.removeprefix("bytes=").split("-"))) for r in gets]
    assert gets and all(r.range for r in gets), seen
    assert len(gets) <= 2 and sum(end + 1 - start for start, end in spans) <= field_check.STORE_BLOCK + (64 << 10), spans
