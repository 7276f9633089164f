"""An https input whose server compresses as it sends (Apache's mod_deflate on text/plain, ``Content-Encoding:
gzip`` to a client that accepts it): aiohttp asks for gzip by default, and the server cut each ``Range`` from
the compressed bytes, which aiohttp decoded as if whole. Before: a read past the first block failed "Can not
decode content-encoding: gzip" ("run the same command again once it answers", for ever), and the corpus job
on such a file in pieces failed "changed while the job read them" (a range past the compressed size read as
0 bytes). Now ranges are asked for uncompressed (corpus/checked_ranges.py), and a server that compresses a
``206`` all the same is read as one GET, decoded whole.

Real local http.servers on 127.0.0.1, the real corpus job in process.
"""

from __future__ import annotations

import gzip
import http.server
import json
import re
import threading

from kolectra.core import storage
from kolectra.corpus import http_reads
from tests.test_corpus_http_read_failures import _artifact, _corpus

BODY = "".join(json.dumps({"text": f"The film was a delight and every actor was at their best, review {i} of {i * 7919 % 1013}."})
               + "\n" for i in range(4000)).encode()  # 350 KB, 20 KB gzipped


class Compressing:
    """Serves BODY at any path, ranges honoured; where ``compress`` and the client accepts gzip (or ``always``),
    the answer is BODY gzipped, a range cut from the gzipped bytes (``Content-Encoding: gzip``)."""

    def __init__(self, compress: bool = True, always: bool = False):
        self.asked: list[str] = []
        outer, zipped = self, gzip.compress(BODY)

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):  # fsspec's HEAD asks for identity: the file's own size
                self.send_response(200)
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()

            def do_GET(self):
                accepted = self.headers.get("Accept-Encoding", "")
                outer.asked.append(accepted)
                coded = compress and ("gzip" in accepted or always)
                data = zipped if coded else BODY
                m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range") or "")
                start, end = (int(m[1]), min(int(m[2]) + 1, len(data))) if m else (0, len(data))
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206 if m else 200)
                if m:
                    self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
                if coded:
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(end - start))
                self.end_headers()
                self.wfile.write(data[start:end])

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def url(self, name: str = "reviews.jsonl") -> str:
        return f"http://127.0.0.1:{self.http.server_port}/{name}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.http.shutdown()
        self.http.server_close()


def _read(url: str, at: int = 0) -> tuple[bytes, bool]:
    """The file from byte ``at`` to its end, read in 16 KB ranges; and whether it was read as one GET."""
    with http_reads.ranged_or_whole(storage.open_file(url, block_size=16 << 10), url, waits=(0.01,)) as f:
        f.seek(at)
        out = b""
        while chunk := f.read(5000):
            out += chunk
        return out, f.whole


def test_a_server_compressing_as_it_sends_is_read_in_ranges_of_the_files_own_bytes():
    """Before: ReadFailed '... ClientPayloadError: 400, message: Can not decode content-encoding: gzip; run the same
    command again once it answers' (the second range, cut from the gzipped bytes)."""
    with Compressing() as server:
        assert _read(server.url()) == (BODY, False)
        assert _read(server.url(), at=100_001) == (BODY[100_001:], False)
        assert server.asked and set(server.asked) == {"identity"}, server.asked


def test_a_range_compressed_though_asked_for_uncompressed_is_read_as_one_get_decoded():
    """A server that compresses whatever the client accepts: its ranges are no part of the file, read whole instead
    (a range past its gzipped size, answered 416, is the job's check after the read's: the file's size differs)."""
    with Compressing(always=True) as server:
        assert _read(server.url()) == (BODY, True)
        assert _read(server.url(), at=10_001) == (BODY[10_001:], True)


def test_the_corpus_of_a_file_in_pieces_on_a_compressing_server_is_the_plain_servers(tmp_path, capfd):
    """Before: exit 2, '1 input file(s) changed while the job read them ...: (bytes 65547-131111 of it read as 0
    bytes)': a piece's range, past the gzipped size, was answered 416."""
    pieces = ("--set", "split_bytes=65536")
    with Compressing(compress=False) as plain:
        assert _corpus(plain.url(), tmp_path / "plain", *pieces) == 0, capfd.readouterr().err
    with Compressing() as server:
        assert _corpus(server.url(), tmp_path / "compressing", *pieces) == 0, capfd.readouterr().err
    clean, got = _artifact(tmp_path / "plain"), _artifact(tmp_path / "compressing")
    clean.pop("id"), got.pop("id")  # the URL's port is part of the input's identity
    assert got == clean
