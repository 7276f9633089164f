"""Benchmark: how long the corpus launcher's listing takes on many ``--input https://...`` URLs named
one by one, on a web server that answers each request after ``--delay-ms``.

    python benchmarks/http_inputs.py [--quick] [--urls N] [--delay-ms MS]

A URL named as it is (no glob) is asked for its object's info (a HEAD; ``corpus/literals.py``), and
one identified by its ``Last-Modified`` alone (no ETag) once more, to tell a file's time from each
response's own (a dynamic endpoint). Before, every request went one after the other: 1,000 URLs
at 100 ms took 200 s before the job's first line. Now ``core/object_infos.object_infos`` keeps up to
``HEADS_AT_ONCE`` in flight on fsspec's own event loop. The stand-in server (Python's
``ThreadingHTTPServer`` in this process, a thread a request) serves ``--urls`` files three ways:

- ``etag``: an ETag (a static host, S3 behind a CDN): one request a URL;
- ``stamp``: a Last-Modified of 2023 and no ETag (Python's http.server, many static hosts): two;
- ``clock``: the time of each response as Last-Modified (a dynamic endpoint): two, and a third a
  second later where the two fell in one second.

For each: ``wall_s`` of ``inputs.list_inputs``, ``requests`` the server answered and ``most_at_once``
(requests in flight at a time), now and with one request at a time (``HEADS_AT_ONCE = 1``: the
order before, the same requests). ``value``: URLs listed a second now on ``stamp``; ``baseline``:
one at a time.
"""

from __future__ import annotations

import email.utils
import http.server
import threading
import time

from common import emit, parser

WHO = "benchmarks/http_inputs.py"


class _Server:
    """A ThreadingHTTPServer of made-up 100-byte files, each request answered after ``delay`` s."""

    def __init__(self, delay: float, kind: str):
        self.delay, self.kind, self.lock = delay, kind, threading.Lock()
        self.requests = self.now = self.most = 0
        bench = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_HEAD(self):
                bench.answer(self)

            def do_GET(self):
                bench.answer(self)
                self.wfile.write(b"x" * 100)

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def answer(self, handler) -> None:
        with self.lock:
            self.requests, self.now = self.requests + 1, self.now + 1
            self.most = max(self.most, self.now)
        time.sleep(self.delay)
        with self.lock:
            self.now -= 1
        handler.send_response(200)
        handler.send_header("Content-Length", "100")
        if self.kind == "etag":
            handler.send_header("ETag", '"v1"')
        else:
            when = time.time() if self.kind == "clock" else 1_700_000_000
            handler.send_header("Last-Modified", email.utils.formatdate(when, usegmt=True))
        handler.end_headers()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def measure(n: int, delay: float, kind: str, at_once: int | None) -> dict:
    from kolectra.core import object_infos
    from kolectra.corpus import inputs

    server, default = _Server(delay, kind), object_infos.HEADS_AT_ONCE
    object_infos.HEADS_AT_ONCE = at_once or default
    try:
        urls = [f"http://127.0.0.1:{server.http.server_port}/f{i:05d}.txt" for i in range(n)]
        t0 = time.perf_counter()
        listed = inputs.list_inputs(urls)
        wall = time.perf_counter() - t0
        assert len(listed) == n
        return {"kind": kind, "at_once": object_infos.HEADS_AT_ONCE, "wall_s": round(wall, 2),
                "requests": server.requests, "most_at_once": server.most}
    finally:
        object_infos.HEADS_AT_ONCE = default
        server.close()


def main() -> None:
    p = parser(__doc__, "about 4 minutes: one at a time dominates")
    p.add_argument("--urls", type=int, help="URLs named (default 1,000; --quick 100)")
    p.add_argument("--delay-ms", type=float, default=100.0, help="each request answered after this (default 100)")
    args = p.parse_args()
    n, delay = args.urls or (100 if args.quick else 1000), args.delay_ms / 1000
    rows = [measure(n, delay, kind, at_once) for kind in ("etag", "stamp", "clock") for at_once in (None, 1)]
    now, before = (next(r["wall_s"] for r in rows if r["kind"] == "stamp" and (r["at_once"] == 1) == one)
                   for one in (False, True))
    emit("http_inputs", "URLs listed/s", n / now, "one request at a time", n / before,
         {"urls": n, "delay_ms": args.delay_ms}, rows=rows)


if __name__ == "__main__":
    main()
