"""An https input's reads where the server misbehaves beyond a plain failure (second read of
corpus/read_failures.py, corpus/http_reads.py):

- a ``206`` whose ``Content-Range`` starts at another byte than asked (a cache's block of its own) had its
  bytes spliced in at the place asked, the corpus holding text no file holds, exit 0; now the file is read
  on as one GET (the bytes before skipped), or, where that is refused, one line;
- a Parquet file's rows were read by fsspec as they were, never tried again: one 503 amid them failed the
  job (exit 2), where a JSONL file's read went on; now they are tried again as a JSONL file's reads are.

Real local http.servers on 127.0.0.1, the real corpus job in process.
"""

from __future__ import annotations

import gzip
import http.server
import io
import re
import socket
import threading

import pytest

from kolectra.core import storage
from kolectra.corpus import http_reads, listing, parquet, read_failures
from tests.test_corpus_http_read_failures import FAST, WAITS, _artifact, _corpus


class Flaky:
    """Serves ``files`` (name -> bytes), ranges honoured; once ``armed``, the n-th GET (0-based, counted from
    the arming) does ``plan(n)``: None (served), "503", "cut" (closed a third of the way in), "shifted"
    (a range answered from 100 bytes before the byte asked, its Content-Range saying so), "gzip" (a range cut
    from the file gzipped, ``Content-Encoding: gzip``: a server compressing whatever it sends) or "whole" (200,
    the whole file, with a ``Content-Range`` saying so: a server that takes no range but says the bytes it sends)."""

    def __init__(self, files: dict[str, bytes], plan=lambda n: None):
        self.files, self.plan, self.armed, self.gets = files, plan, False, []
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
                self._head(200, len(outer.files[self.path.rsplit("/", 1)[-1]]))

            def do_GET(self):
                body = outer.files[self.path.rsplit("/", 1)[-1]]
                asked = self.headers.get("Range")
                action = outer.plan(len(outer.gets)) if outer.armed else None
                if outer.armed:
                    outer.gets.append((asked, action))
                if action == "503":
                    return self._head(503, 0)
                m = re.fullmatch(r"bytes=(\d+)-(\d+)", asked or "")
                coded = {"Content-Encoding": "gzip"} if action == "gzip" else {}
                body = gzip.compress(body, mtime=0) if coded else body
                if m is None or action == "whole":
                    start, end = 0, len(body)
                    self._head(200, end, {**coded, **({"Content-Range": f"bytes 0-{end - 1}/{end}"} if m else {})})
                elif int(m[1]) >= len(body):
                    return self._head(416, 0, {"Content-Range": f"bytes */{len(body)}"})
                else:
                    start, end = int(m[1]), min(int(m[2]) + 1, len(body))
                    if action == "shifted":
                        start, end = max(0, start - 100), end - 100
                    self._head(206, end - start, {"Content-Range": f"bytes {start}-{end - 1}/{len(body)}", **coded})
                part = body[start:end]
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

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.http.server_port}/{name}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.http.shutdown()
        self.http.server_close()


BODY = bytes(range(256)) * 64  # 16 KB, read in 1 KB ranges


def test_a_range_answered_from_another_byte_is_not_spliced_into_the_file(monkeypatch):
    """Before: every third block came 100 bytes early and the bytes read were not the file's (no error)."""
    monkeypatch.setenv(WAITS, FAST)
    with Flaky({"data.bin": BODY}, plan=lambda n: "shifted" if n % 3 == 0 else None) as server:
        fs, path = storage.filesystem(server.url("data.bin"))
        with http_reads.ranged_or_whole(fs.open(path, block_size=1024), path) as f:
            got = f.read(3000)
            server.armed = True
            while chunk := f.read(2000):
                got += chunk
        assert got == BODY
        # the shifted answer, then the file as one GET (no Range), its first 3,000 bytes skipped
        assert [action for _, action in server.gets[:1]] == ["shifted"] and server.gets[1][0] is None, server.gets


def test_a_range_answered_from_another_byte_where_no_whole_read_is_allowed_is_one_line(monkeypatch):
    """A read from an offset that must not download what is before it (a Parquet file's footer, a piece):
    a ReadFailed naming what the server answered, not the wrong bytes."""
    monkeypatch.setenv(WAITS, FAST)
    with Flaky({"data.bin": BODY}, plan=lambda n: "shifted") as server:
        fs, path = storage.filesystem(server.url("data.bin"))
        server.armed = True
        with http_reads.ranged_or_whole(fs.open(path, block_size=1024), path, skip_most=0) as f:
            f.seek(5000)
            with pytest.raises(read_failures.ReadFailed, match=r"answers range requests with other bytes than asked "
                               r"\(asked for the bytes from 5,000, the server answered 206 with Content-Range: "
                               r"bytes 4900-\d+/16384\), where the file is read in parts, not as one GET .*; download the file"):
                f.read(1000)


def _reviews_parquet() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    texts = [f"The film was a delight and every actor was at their best, review {i}." for i in range(2000)]
    pq.write_table(pa.table({"text": texts}), buf, row_group_size=250)
    return buf.getvalue()


def test_a_parquet_files_rows_read_while_the_server_fails_every_other_get_give_the_clean_corpus(tmp_path, monkeypatch,
                                                                                                capfd):
    """Before: the first 503 amid the rows' reads (fsspec's, not tried again) failed the job, exit 2 'the server
    failed its read (503 Service Unavailable)'; a JSONL file's read went on. Every other GET of the job fails
    here (a 503 or a cut connection): each read heals at its retry."""
    monkeypatch.setenv(WAITS, FAST)
    with Flaky({"reviews.parquet": _reviews_parquet()}, plan=lambda n: (None, "503", None, "cut")[n % 4]) as server:
        assert _corpus(server.url("reviews.parquet"), tmp_path / "clean") == 0, capfd.readouterr().err
        write = listing.write

        def arming(*a, **k):  # from the job's start: the checks before it read the file cleanly
            server.armed = True
            return write(*a, **k)

        monkeypatch.setattr(listing, "write", arming)
        assert _corpus(server.url("reviews.parquet"), tmp_path / "healed") == 0, capfd.readouterr().err
        failed = [action for _, action in server.gets if action]
        assert failed.count("503") >= 3 and failed.count("cut") >= 3, server.gets
    assert _artifact(tmp_path / "healed") == _artifact(tmp_path / "clean")


def test_a_parquet_file_opened_for_its_rows_is_read_with_a_stores_buffer(monkeypatch):
    """The rows' reads tried again (http_reads' wrapper) keep the 8 MiB buffer of a store's object, one ranged
    GET a fill, not a local file's 1 MiB."""
    seen = []
    import pyarrow.parquet as pq

    real = pq.ParquetFile

    def recorded(*a, buffer_size=0, **k):
        seen.append(buffer_size)
        return real(*a, buffer_size=buffer_size, **k)

    monkeypatch.setattr(pq, "ParquetFile", recorded)
    with Flaky({"reviews.parquet": _reviews_parquet()}) as server:
        with parquet.open_seekable(server.url("reviews.parquet")) as f:
            _, groups = parquet.read_groups(f, ["text"])
            assert sum(1 for _, rows in groups for _ in rows) == 2000
    assert seen and set(seen) == {parquet.REMOTE_READ_BUFFER}, seen


def test_a_parquet_file_on_a_server_that_takes_no_range_is_its_servers_failure_not_damage(tmp_path, capfd):
    """Before: '1 damaged input file(s) (over max_damaged_files=0): ...: parquet error after row 0 (...): ValueError:
    The HTTP server doesn't appear to support range requests... Replace them, or accept what could be read with
    --set max_damaged_files=1' (which kept none of its rows). A Parquet file is read from its footer, at its end."""
    from tests.test_corpus_http_read_failures import Server, _one_line

    server = Server(_reviews_parquet(), ranges=False)
    try:
        assert _corpus(server.url("reviews.parquet"), tmp_path / "root") == 2
    finally:
        server.close()
    line = _one_line(capfd.readouterr().err)
    assert "could not be read after the listing" in line and "reviews.parquet: its server answers range requests " \
        "with the whole file (it takes no Range header)" in line and "download the file and name the local copy" in line
    assert "damaged" not in line and "max_damaged_files" not in line, line
