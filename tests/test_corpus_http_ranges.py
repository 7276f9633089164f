"""An ``--input`` http(s) file on a server that answers a range request with the whole file (Python's
``http.server``, many dynamic endpoints) is read to its end.

fsspec reads an http(s) file a block (5 MB) a request, each a ``Range`` request; a server that sends
the whole file instead answers the first block's, but fsspec refuses every later one ("The HTTP server
doesn't appear to support range requests"): the corpus job on any such file over 5 MB failed as
``internal error: ValueError`` (a piece of a large file, read from its offset, at its first read). The
read goes on as one GET from the start, what was read already skipped. Here fsspec's block is made
64 KiB, so that a file of 300 kB is several blocks.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import json
import threading

import pytest

from kolectra.core import storage
from kolectra.corpus import reader
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store

TEXTS = [f"{i}번째 리뷰입니다 이 영화 정말 재밌었어요 배우들 연기도 최고였고 음악도 좋았습니다" for i in range(2500)]
BLOCK = 1 << 16


class _WholeEachTime(http.server.SimpleHTTPRequestHandler):
    """A file server that takes no ``Range`` header: every GET answers 200 and the whole file."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        del self.headers["Range"]
        super().do_GET()

    def copyfile(self, source, outputfile):  # the client hangs up once it has read what it wanted
        try:
            super().copyfile(source, outputfile)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture()
def served(tmp_path, monkeypatch):
    body = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(TEXTS)).encode()
    (tmp_path / "reviews.jsonl").write_bytes(body)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_WholeEachTime, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/reviews.jsonl"
    fs, _ = storage.filesystem(url)
    monkeypatch.setattr(fs, "block_size", BLOCK)
    assert len(body) > 4 * BLOCK
    yield url, body
    server.shutdown()
    server.server_close()


def test_a_file_of_many_blocks_is_read_whole(served):
    url, body = served
    digest: dict = {}
    got = list(reader.read_file(url, "reviews.jsonl", "auto", "text", "id", 1 << 20, digest))
    assert [r.get("reason") for r in got if "reason" in r] == []
    assert [r["text"] for r in got] == TEXTS
    assert (digest["bytes"], digest["sha256"]) == (len(body), hashlib.sha256(body).hexdigest())


@pytest.mark.parametrize("sets", [[], ["split_bytes=65536"]])  # whole; in pieces, each read from its offset
def test_a_corpus_is_built_from_it(tmp_path, served, sets):
    url, body = served
    art = stages.corpus(Store(tmp_path / "store"), [url], sets=sets)
    stats = json.loads((art.path / "stats.json").read_text())
    assert stats["records_in"] == len(TEXTS) and not stats.get("rejected")
    [record] = art.manifest["inputs"]
    assert record["sha256"] == hashlib.sha256(body).hexdigest()
    docs = [json.loads(line) for f in sorted((art.path / "data").glob("*.jsonl.gz"))
            for line in gzip.decompress(f.read_bytes()).decode("utf-8").splitlines()]
    assert len(docs) > len(TEXTS) // 2


def test_a_gzip_file_s_trailer_is_not_read_by_downloading_the_file(tmp_path):
    """The plan reads a .gz input's last 32 bytes (its stated size) in one ranged GET: such a server answered
    the whole file, which was held in memory for the 32 bytes (a 20 GB input: 20 GB before the job began,
    8 such files at a time). It is read through a megabyte at a time, up to 32 MB (test_local_memory: read
    right); past that the size is the ratio's estimate, as for a file that cannot be read."""
    import tracemalloc

    from kolectra.corpus import inputs, memory_model

    (tmp_path / "big.jsonl.gz").write_bytes(gzip.compress(b"x") * 4 + bytes(48 << 20))  # 48 MB, its tail zeros
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_WholeEachTime, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        listed = inputs.list_inputs([f"http://127.0.0.1:{server.server_port}/big.jsonl.gz"])
        tracemalloc.start()
        try:
            assert memory_model.stated_sizes(listed) == [None]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 << 20, f"{peak / 2**20:.0f} MB held to read 32 bytes"
    finally:
        server.shutdown()
        server.server_close()


def test_a_large_file_on_such_a_server_is_one_piece_not_a_download_from_its_start_a_piece(served, monkeypatch):
    """A file over split_bytes is read in pieces, each from its offset: on such a server each piece read the
    file from its start to its end (a 34 GB file in 265 pieces of 128 MB: 4.5 TB). The plan's read, which
    finds the server answered the whole file, makes it one piece (its reads made a block each, as 4 MB are
    of fsspec's 5 MB)."""
    from kolectra.corpus import inputs, pieces

    monkeypatch.setattr(pieces, "PLAN_CHUNK", BLOCK)
    url, body = served
    [listed] = inputs.list_inputs([url])
    digest, planned = pieces.plan(listed, BLOCK, "auto", 1 << 20)
    assert digest == {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    assert [(p.start, p.end, p.first_line) for p in planned] == [(0, len(body), 1)]
