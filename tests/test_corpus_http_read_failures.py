"""An https input whose server fails the read after a good listing: a failure that may pass (503, a
connection cut short) is tried again and the corpus is the clean run's, byte for byte; one that will not
(403: a signed URL expired since the listing) or that outlasts the retries is one line, exit 2, naming the
URL without its credentials, in-process and with 2 worker processes (before: ``internal error: RuntimeError:
aiohttp.client_exceptions.ClientResponseError: 403 ...``, exit 1, or Beam's wrapped traceback's first line).

A real local http.server in a thread serves the file; it fails GETs only once "armed", which the test does
as the job starts (the listing file written: every check before the job reads the file cleanly).
"""

from __future__ import annotations

import gzip
import http.server
import json
import re
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from kolectra.core import storage
from kolectra.corpus import http_reads, listing
from kolectra.pipeline.cli import main

SECRETS = ("AKIASECRETKEY", "SIGSECRET", "hunter2")
SIGNED = "?X-Amz-Credential=AKIASECRETKEY%2F20261201%2Fus-east-1&X-Amz-Signature=SIGSECRET"
BODY = "".join(json.dumps({"text": f"The film was a delight and every actor was at their best, review {i}."}) + "\n"
               for i in range(300)).encode()
WAITS = "KOLECTRA_READ_RETRY_WAITS"  # (corpus/read_failures.py) the worker processes' too
FAST = "0.05,0.05,0.05"  # 3 retries


class Server:
    """Serves ``body`` at any path (ranges where ``ranges``); once armed, GETs take the next of ``failing``
    ("403", "503", "cut": the connection closed a third of the way into the answer), then ``always`` if set."""

    def __init__(self, body: bytes = BODY, ranges: bool = True):
        self.body, self.ranges, self.armed, self.failing, self.always = body, ranges, False, [], None
        self.slow: dict[str, float] = {}  # once armed: a file's name -> seconds its GETs wait, failing none
        self.gets: list[tuple[bool, str | None]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _head(self, status: int, size: int, extra: dict | None = None):
                self.send_response(status)
                self.send_header("Content-Length", str(size))
                self.send_header("ETag", '"v1"')
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()

            def do_HEAD(self):
                self._head(200, len(outer.body))

            def do_GET(self):
                asked = self.headers.get("Range")
                outer.gets.append((outer.armed, asked))
                wait = outer.slow.get(self.path.split("?")[0].rsplit("/", 1)[-1]) if outer.armed else None
                if wait is not None:
                    time.sleep(wait)
                action = (outer.failing.pop(0) if outer.failing else outer.always) if outer.armed and wait is None \
                    else None
                if action in ("403", "503"):
                    return self._head(int(action), 0)
                start, end = 0, len(outer.body)
                m = re.fullmatch(r"bytes=(\d+)-(\d+)", asked or "")
                if m and outer.ranges:
                    start, end = int(m[1]), min(int(m[2]) + 1, len(outer.body))
                    self._head(206, end - start, {"Content-Range": f"bytes {start}-{end - 1}/{len(outer.body)}"})
                else:
                    self._head(200, end)
                part = outer.body[start:end]
                if action == "cut":
                    self.wfile.write(part[: len(part) // 3])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(part)

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def url(self, name: str = "reviews.jsonl", signed: bool = False) -> str:
        who = "user:hunter2@" if signed else ""
        return f"http://{who}127.0.0.1:{self.http.server_port}/{name}{SIGNED if signed else ''}"

    def close(self):
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture(scope="module")
def shared():
    s = Server()
    yield s
    s.close()


@pytest.fixture(scope="module")
def clean(shared, tmp_path_factory) -> dict[str, bytes]:
    """The corpus of the server's file read without a failure (one for the module: the id names the URL)."""
    root = tmp_path_factory.mktemp("clean")
    shared.armed, shared.failing, shared.always = False, [], None  # set up before a test's arming, after others'
    assert _corpus(shared.url(), root) == 0
    return _artifact(root)


@pytest.fixture()
def armed_at_the_job(shared, monkeypatch):
    """The server fails as set from the moment the job starts (its listing file written)."""
    server = shared
    server.armed, server.failing, server.always, server.gets, server.slow = False, [], None, [], {}
    write = listing.write

    def arming(*a, **k):
        server.armed = True
        return write(*a, **k)

    monkeypatch.setattr(listing, "write", arming)
    monkeypatch.setenv(WAITS, FAST)
    return server


def _corpus(url: str, root: Path, *more: str) -> int:
    return main(["corpus", "--input", url, "--out", str(root), "--set", "language=en", *more])


def _artifact(root: Path) -> dict[str, bytes]:
    """Every file of the one corpus artifact under ``root`` (gz decompressed) by its path, the artifact's
    id too, but the manifest (its provenance names the run's own --out and times)."""
    [folder] = [p for p in (root / "corpus").iterdir() if p.is_dir()]
    out = {"id": folder.name.encode()}
    for f in sorted(folder.rglob("*")):
        if f.is_file() and f.name != "manifest.json":
            out[str(f.relative_to(folder))] = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
    return out


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("kolectra corpus:")]
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    return lines[0]


@pytest.mark.parametrize("workers", [[], ["--direct_num_workers", "2"]], ids=["in-process", "2-worker-processes"])
def test_a_signed_url_refused_after_the_listing_is_one_line_naming_it_without_its_credentials(
        armed_at_the_job, workers, tmp_path, capfd):
    armed_at_the_job.always = "403"
    assert _corpus(armed_at_the_job.url(signed=True), tmp_path / "root", *workers) == 2
    err = capfd.readouterr().err
    line = _one_line(err)
    assert f"http://127.0.0.1:{armed_at_the_job.http.server_port}/reviews.jsonl" in line
    assert "403 Forbidden" in line and "sign it again" in line and "no corpus was kept" in line, line
    assert not [s for s in SECRETS if s in err]
    assert not (tmp_path / "root" / ".logs").exists()  # no bug report to file
    assert not list((tmp_path / "root").glob("corpus/*/manifest.json"))  # nothing published
    assert [armed for armed, _ in armed_at_the_job.gets].count(True) == 1  # a 403 is not tried again


@pytest.mark.parametrize("failing", [["503"], ["cut"], ["503", "cut", "503"]], ids=["503", "cut-short", "three"])
def test_a_read_that_fails_then_heals_gives_the_clean_runs_corpus_byte_for_byte(armed_at_the_job, clean, failing,
                                                                              tmp_path, capfd):
    server = armed_at_the_job
    server.failing = list(failing)
    assert _corpus(server.url(), tmp_path / "healed") == 0, capfd.readouterr().err
    assert not server.failing  # each failure was met, and tried again
    assert _artifact(tmp_path / "healed") == clean


def test_a_server_that_keeps_failing_is_one_line_after_the_retries(armed_at_the_job, tmp_path, capfd):
    armed_at_the_job.always = "503"
    assert _corpus(armed_at_the_job.url(), tmp_path / "root") == 2
    line = _one_line(capfd.readouterr().err)
    assert "failed its read 4 times in a row, the last: 503 Service Unavailable" in line, line
    assert [armed for armed, _ in armed_at_the_job.gets].count(True) == 4  # the first try and 3 retries


@pytest.mark.parametrize("ranges", [True, False], ids=["ranges", "no-ranges"])
def test_a_cut_read_goes_on_from_where_it_stopped_byte_exact(ranges, monkeypatch):
    """In ranges: the block that failed is asked again (not the file from its start); a server that takes no
    range: its whole answer again, the bytes given already skipped."""
    monkeypatch.setenv(WAITS, FAST)
    body = bytes(range(256)) * 64  # 16 KB, read in 1 KB ranges
    server = Server(body, ranges=ranges)
    try:
        fs, path = storage.filesystem(server.url("data.bin"))
        with http_reads.ranged_or_whole(fs.open(path, block_size=1024), path) as f:
            got = f.read(5000)
            server.armed, server.failing = True, ["cut", "503", "cut"]
            while chunk := f.read(3000):
                got += chunk
        assert got == body and not server.failing
        after = [asked for armed, asked in server.gets if armed]
        if ranges:  # each retry asks for the block where the read stopped
            assert len(set(after[:4])) == 1 and not after[0].startswith("bytes=0-"), after
    finally:
        server.close()


def test_a_parquet_files_rows_refused_by_the_server_are_its_failure_not_the_files_damage(monkeypatch):
    """Before: one ``damaged_file`` dead letter 'parquet error after row 0: ClientResponseError: 403' (exit 2
    'damaged input file(s)... accept what could be read with --set max_damaged_files=1')."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from kolectra.corpus import parquet_records, reader

    buf = io.BytesIO()
    pq.write_table(pa.table({"text": [f"review {i} of a film" for i in range(2000)]}), buf, row_group_size=500)
    server = Server(buf.getvalue())
    rows = parquet_records.parquet_rows

    def refused_from_here(*a, **k):  # the file's hashing pass read it; its rows' reads are refused
        server.armed, server.always = True, "403"
        return rows(*a, **k)

    monkeypatch.setattr(parquet_records, "parquet_rows", refused_from_here)
    try:
        with pytest.raises(reader.InputError, match=r"reviews.parquet: the server refused to serve it \(403 Forbidden\)"):
            list(reader.read_file(server.url("reviews.parquet"), "reviews", "auto", "text", "id", 10_000))
    finally:
        server.close()


def test_a_read_that_ran_out_of_time_is_tried_again_once_not_for_half_an_hour():
    """Each try of a server that went mute waits out aiohttp's 300 s: 6 of them would hold a worker 30 minutes."""
    import asyncio

    import aiohttp

    from kolectra.corpus import read_failures

    waits = read_failures.RETRY_WAITS
    for timed_out in (asyncio.TimeoutError(), aiohttp.ServerTimeoutError("Timeout on reading data from socket")):
        assert read_failures.wait_before(timed_out, 0, waits) is not None
        assert read_failures.wait_before(timed_out, 1, waits) is None
    reset = aiohttp.ClientOSError(104, "Connection reset by peer")
    assert all(read_failures.wait_before(reset, i, waits) is not None for i in range(len(waits)))
    assert read_failures.wait_before(reset, len(waits), waits) is None


def test_a_bad_retry_setting_is_refused_in_words(monkeypatch):
    from kolectra.corpus import read_failures

    monkeypatch.setenv(WAITS, "1,soon")
    with pytest.raises(read_failures.UserInputError, match="KOLECTRA_READ_RETRY_WAITS='1,soon'"):
        read_failures.retry_waits()
    monkeypatch.setenv(WAITS, "")
    assert read_failures.retry_waits() == ()


@pytest.mark.parametrize("given", ["abc", "1,,x", "nan", "-1"])
def test_a_malformed_retry_waits_variable_is_refused_in_one_line_not_made_each_inputs_damage(shared, given, tmp_path,
                                                                                               monkeypatch, capfd):
    """Before: the job's first read met it, each URL input was 'damaged ... cannot open: UserInputError:
    KOLECTRA_READ_RETRY_WAITS=...' (the one file here: '1 of 1 records rejected'), which max_damaged_files accepts,
    the file's text left out of the corpus."""
    shared.armed, shared.failing, shared.always = False, [], None
    monkeypatch.setenv(WAITS, given)
    assert _corpus(shared.url(), tmp_path / "root", "--set", "max_damaged_files=1") == 2
    line = _one_line(capfd.readouterr().err)
    assert f"{WAITS}={given!r}: give the seconds to wait" in line and "damaged" not in line, line
    assert not list((tmp_path / "root").glob("corpus/*/manifest.json"))


def test_a_failed_read_stops_the_job_at_once_with_its_line_not_after_every_other_files_read(armed_at_the_job, tmp_path,
                                                                                             capfd):
    """Before: the job read (and analysed) every other file, then its check named the failed one: for a 34 GB job
    with a signed URL expired, hours of work thrown away. With worker processes the read step's note now stops it
    (here: one file refused, the other served slowly, 60 s a GET; in process the reads run on the launcher's
    thread, and the check after the job names the file, corpus/build.py's _worker_processes)."""
    armed_at_the_job.always = "403"
    armed_at_the_job.slow = {"slow.jsonl": 60.0}
    began = time.monotonic()
    assert _corpus(armed_at_the_job.url("refused.jsonl", signed=True), tmp_path / "root", "--input",
                   armed_at_the_job.url("slow.jsonl"), "--direct_num_workers", "2") == 2
    line = _one_line(capfd.readouterr().err)
    assert "could not be read after the listing" in line and "403 Forbidden" in line and "no corpus was kept" in line
    assert "refused.jsonl" in line and "slow.jsonl" not in line, line
    assert time.monotonic() - began < 50, "the job ran to its end"
    assert not list((tmp_path / "root").glob("corpus/*/manifest.json"))


def test_a_failure_of_many_files_names_a_few_and_counts_the_rest():
    """A signature that expired fails every file of a job alike: the line named all of them (1,000 files,
    about 300 kB in one line); it names the first few and counts the others, as the job's check does."""
    from kolectra.corpus import read_failures
    from kolectra.corpus.config import CorpusConfig
    from kolectra.corpus.job_checks import check_stats
    from kolectra.corpus.outputs import CorpusError

    why = "the server refused to serve it (403 Forbidden)"
    failed = {f"https://host/part-{i:04d}.jsonl": why for i in range(1000)}
    said = read_failures.line(failed)
    assert said.startswith("1000 input file(s) could not be read after the listing: https://host/part-0000.jsonl: ")
    assert said.count(why) == read_failures.NAMED and "; and 995 more (no corpus was kept)" in said, said
    rows = [(f"part-{i:04d}.jsonl", {"read_failed": why, "rejected": 0, "records_in": 0}) for i in range(7)]
    stats = {"records_in": 0, "records_out": 0, "rejected": 0, "dropped": {}, "sources": dict(rows)}
    with pytest.raises(CorpusError, match=r"^7 input file\(s\) .*part-0004\.jsonl: [^;]*; and 2 more \(no corpus"):
        check_stats(stats, CorpusConfig(), {f"part-{i:04d}.jsonl": f"https://host/part-{i:04d}.jsonl" for i in range(7)},
                    "rejects", rows=rows)



@pytest.mark.parametrize("key, said", [("changed", r"^7 input file\(s\) changed while the job read them"),
                                       ("damaged", r"^7 damaged input file\(s\) \(over max_damaged_files=0\)")])
def test_files_changed_or_damaged_are_named_a_few_and_counted_as_failed_reads_are(key, said):
    """The lines of files changed during the job (a bucket rewritten while read) and of damaged files named every
    one as the failed reads' did; they name the first 5 and count the rest, as that line does."""
    from kolectra.corpus.config import CorpusConfig
    from kolectra.corpus.job_checks import check_stats
    from kolectra.corpus.outputs import CorpusError

    rows = [(f"part-{i:04d}.jsonl", {key: f"why {i}", "rejected": 0, "records_in": 0}) for i in range(7)]
    stats = {"records_in": 0, "records_out": 0, "rejected": 0, "dropped": {}, "sources": dict(rows)}
    with pytest.raises(CorpusError) as caught:
        check_stats(stats, CorpusConfig(max_damaged_files=0),
                    {f"part-{i:04d}.jsonl": f"https://host/part-{i:04d}.jsonl" for i in range(7)}, "rejects", rows=rows)
    text = str(caught.value)
    assert re.match(said, text) and "why 4" in text and "why 5" not in text and "; and 2 more" in text, text

if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
