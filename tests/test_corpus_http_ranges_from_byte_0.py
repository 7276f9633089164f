"""An https input's reads from its first byte where the server misbehaves (corpus/http_reads.py,
corpus/checked_ranges.py):

- a Parquet file is never read as one GET (its reader seeks back), but a read at byte 0 (a file under 64 KiB:
  pyarrow's footer read takes the whole file) answered with other bytes than asked (a ``206`` compressed by a
  server that compresses whatever it sends) went on as one; the next seek failed, and the job said the file was
  damaged ('ValueError: Cannot seek streaming HTTP file ... accept what could be read with --set
  max_damaged_files=1'); now the server's failure in one line, as from any other byte;
- a ``200`` carrying a ``Content-Range`` from the byte asked was taken for the range and its whole body returned:
  the check before the job that reads a file's first 5 bytes held the whole file.

Real local http.servers on 127.0.0.1 (test_corpus_http_read_failures_ranges.Flaky), the real corpus job in process.
"""

from __future__ import annotations

import json
import tracemalloc

from kolectra.corpus import field_check, parquet
from tests.test_corpus_http_read_failures import FAST, WAITS, _artifact, _corpus, _one_line
from tests.test_corpus_http_read_failures_ranges import Flaky


def _small_parquet() -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"text": [f"The film was a delight, review {i}." for i in range(300)]}), buf)
    assert len(buf.getvalue()) < 64 << 10
    return buf.getvalue()


def test_a_small_parquet_file_on_a_server_compressing_its_ranges_is_its_servers_failure_not_damage(
        tmp_path, monkeypatch, capfd):
    """Before: exit 2, '1 damaged input file(s) (over max_damaged_files=0): ...reviews.parquet: parquet error after
    row 0 (300 row(s) of its row group not read: rows 0-299): ValueError: Cannot seek streaming HTTP file. Replace
    them, or accept what could be read with --set max_damaged_files=1' (which kept none of its rows)."""
    monkeypatch.setenv(WAITS, FAST)
    with Flaky({"reviews.parquet": _small_parquet()}, plan=lambda n: "gzip") as server:
        server.armed = True
        assert _corpus(server.url("reviews.parquet"), tmp_path / "root") == 2
    line = _one_line(capfd.readouterr().err)
    assert "reviews.parquet: its server answers range requests with other bytes than asked (asked for the bytes " \
           "from 0 uncompressed, the server answered 206 compressed (Content-Encoding: gzip)" in line, line
    assert "download the file and name the local copy in --input" in line, line
    assert "damaged" not in line and "Cannot seek" not in line, line


def test_a_files_first_bytes_on_a_server_compressing_its_ranges_still_tell_a_misnamed_parquet_file():
    """The check before the job reads a file's first 5 bytes forward only: read as one GET there (decoded), a Parquet
    file named as Hive names it (000000_0) is still told from text, the refusal above being the Parquet reader's."""
    with Flaky({"000000_0": _small_parquet()}, plan=lambda n: "gzip") as server:
        server.armed = True
        problem = field_check.parquet_as_text_problem(server.url("000000_0"), "auto")
    assert problem is not None and "a Parquet file (it opens with PAR1)" in problem, problem


def test_a_200_that_says_its_content_range_gives_the_bytes_asked_not_the_whole_file():
    """Before: open_seekable(...).read(5) gave the file's 48 MB, and the check before the job for a misnamed Parquet
    file (every http(s) input read with --format auto) held them in memory for its 5 bytes (a peak of 100 MB)."""
    body = "".join(json.dumps({"text": f"review {i}"}) + "\n" for i in range(8)).encode() + bytes(48 << 20)
    with Flaky({"big.jsonl": body}, plan=lambda n: "whole") as server:
        server.armed = True
        with parquet.open_seekable(server.url("big.jsonl"), one_way=True) as f:
            assert f.read(5) == body[:5]
            assert f.read(10) == body[5:15]
        assert server.gets and {action for _, action in server.gets} == {"whole"}, server.gets
        tracemalloc.start()
        try:
            assert field_check.parquet_as_text_problem(server.url("big.jsonl"), "auto") is None
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 8 << 20, f"{peak / 2**20:.0f} MB held to read 5 bytes"


def test_a_jsonl_file_in_pieces_on_such_a_server_is_the_plain_servers_corpus(tmp_path, monkeypatch, capfd):
    """Each range from a later byte is that server's whole file: read on as one GET, the corpus the file's."""
    monkeypatch.setenv(WAITS, FAST)
    body = "".join(json.dumps({"text": f"The film was a delight and every actor was at their best, review {i}."})
                   + "\n" for i in range(3000)).encode()
    pieces = ("--set", "split_bytes=65536")
    got = {}
    for plan in (None, "whole"):
        with Flaky({"reviews.jsonl": body}, plan=lambda n, plan=plan: plan) as server:
            server.armed = True
            assert _corpus(server.url("reviews.jsonl"), tmp_path / str(plan), *pieces) == 0, capfd.readouterr().err
            got[plan] = _artifact(tmp_path / str(plan))
            got[plan].pop("id")  # the URL's port is part of the input's identity
    assert got["whole"] == got[None]
