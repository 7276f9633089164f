"""Benchmark: what the corpus job's plan costs the launcher on many small compressed files in a bucket.

    python benchmarks/plan_sizes.py [--quick] [--sizes 1000,5000] [--delay-ms 0,30] [--base-tree DIR]
                                    [--records] [--echo-ms MS]

Before the job, ``corpus/build.py`` reads each gzip file's trailer (a zstd file's frame header) for its
size once decompressed (``corpus/memory_model.expanded_sizes``): one small ranged GET a file on a store.
With ``write_dropped`` on the local runner it also counts the input's records (``input_records``),
reading every file whole. This runs moto's S3 server in this process (objects put through its backend),
each request answered after ``--delay-ms`` (a real bucket's round trip: 20-50 ms), and for each size and
delay a fresh client process that lists ``s3://bench/nN/part-*.jsonl.gz`` and times
``expanded_sizes`` (and ``input_records`` with ``--records``):

- ``requests``: the client's requests (botocore's ``before-call`` events), by operation;
- ``cpu_s``: the client's CPU seconds (the server's are not counted); ``wall_s`` on moto;
- ``sum``: the sizes' sum, the same on both sides.

Moto's server spends milliseconds of CPU a request in this process, so on a busy machine it, not the
round trip, sets the wall time. ``--echo-ms MS`` uses a stand-in endpoint instead (an asyncio server in
a process of its own that answers any ranged GET after ``MS`` ms with zeros and a trailer, no CPU to
speak of) and made-up listings of ``.jsonl.gz`` objects: what the client's concurrency and CPU give at a
round trip of ``MS`` (``requests``, ``cpu_s`` and ``wall_s`` as above).

``--base-tree DIR`` (a checkout of the commit before: ``git worktree add --detach DIR COMMIT``) runs the
same in that tree. ``value``: files planned a second now, at the largest size and delay; ``baseline``:
before.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import child_result, emit, moto_in_process, namespace_of, parser, s3_endpoint

WHO = "benchmarks/plan_sizes.py"
BUCKET = "bench"


def child(n: int, what: str) -> None:
    from kolectra.core import storage
    from kolectra.corpus import inputs, memory_model

    pattern = f"s3://{BUCKET}/n{n}/part-*.jsonl.gz"
    fs, _ = storage.filesystem(pattern)
    fs.connect()
    sent: Counter = Counter()
    fs.s3.meta.events.register("before-call.s3", lambda model, **_: sent.update([model.name]))
    if what == "echo":  # the stand-in endpoint lists nothing: made-up objects of 400 bytes
        listed = [inputs.InputFile(f"s3://{BUCKET}/part-{i:07d}.jsonl.gz", 400, str(i)) for i in range(n)]
        what = "sizes"
    else:
        listed = inputs.list_inputs([pattern])
    sent.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    got = sum(memory_model.expanded_sizes(listed)) if what == "sizes" else memory_model.input_records(listed, "jsonl")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"files": n, "what": what, "requests": dict(sent), "cpu_s": round(cpu, 2),
                      "wall_s": round(wall, 2), "sum": got}))


def serve_echo(port: int, delay_s: float) -> None:
    """The stand-in endpoint (``--echo-ms``): every request answered after ``delay_s`` with the range asked
    for, zeros and an ISIZE of 1,000 (under the ratio's 1,240 for 400 bytes: the sum is the ratio's)."""
    import asyncio
    import re

    async def answer(reader, writer) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                asked = re.search(rb"(?i)\r\nrange: bytes=(\d+)-(\d+)", head)
                start, end = (int(asked.group(1)), int(asked.group(2))) if asked else (0, 3)
                body = bytes(max(0, end - start - 3)) + (1000).to_bytes(4, "little")
                await asyncio.sleep(delay_s)
                writer.write(b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\nETag: \"x\"\r\n"
                             b"Content-Range: bytes %d-%d/*\r\n\r\n%s" % (len(body), start, end, body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        async with await asyncio.start_server(answer, "127.0.0.1", port, backlog=1024) as server:
            await server.serve_forever()

    asyncio.run(main())


def echo_rows(sizes: list[int], delay_ms: float, sides: dict) -> list[dict]:
    """Each size against the stand-in endpoint (a process of its own), on each side."""
    server, _ = s3_endpoint(lambda port: [sys.executable, __file__, "--serve-echo", str(port), str(delay_ms / 1000)],
                            f"{WHO}: the stand-in endpoint did not start")
    try:
        rows = []
        for n in sizes:
            for side, pythonpath in sides.items():
                rows.append({"side": side, "delay_ms": delay_ms, "endpoint": "stand-in",
                             **child_result(__file__, ["--child", str(n), "echo"], pythonpath, WHO)})
                print(json.dumps(rows[-1]), file=sys.stderr)
        return rows
    finally:
        server.terminate()
        server.wait()


def serve_and_fill(sizes: list[int], delay_s: list[float]):
    """moto's server in a thread of this process, answering each request after ``delay_s[0]`` seconds
    (the list is read at each request: the caller changes it), with ``sizes[i]`` small gzip files under ``n<size>/``."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from moto.server import ThreadedMotoServer
    from werkzeug.serving import make_server

    class Slow(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = DomainDispatcherApplication(create_backend_app)

            def slow(environ, start_response):
                time.sleep(delay_s[0])
                return app(environ, start_response)

            self._server = make_server(self._ip_address, self._port, slow, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    server, backend = moto_in_process(BUCKET, Slow)
    for n in sizes:
        for i in range(n):  # 20 reviews a file, about 1.7 kB of JSONL, 0.4 kB gzipped
            body = "".join(json.dumps({"id": f"{i}-{j}", "text": f"{i}번째 파일의 {j}번째 리뷰: 연기가 좋았다"},
                                      ensure_ascii=False) + "\n" for j in range(20))
            backend.put_object(BUCKET, f"n{n}/part-{i:07d}.jsonl.gz", gzip.compress(body.encode(), mtime=0))
    return server


def main() -> None:
    p = parser(__doc__, "about 3 minutes on 2 cores (--quick: 1,000 files, no delay and 30 ms)")
    p.add_argument("--sizes", help="comma-separated object counts (default 1000,5000; --quick 1000)")
    p.add_argument("--delay-ms", default="0,30", help="comma-separated delays a request (default 0,30)")
    p.add_argument("--records", action="store_true", help="time input_records (write_dropped's count) too")
    p.add_argument("--base-tree", type=Path, help="a checkout of the commit before, run beside this one")
    p.add_argument("--echo-ms", type=float, help="a stand-in endpoint answering after this many ms, not moto")
    p.add_argument("--child", nargs=2, metavar=("N", "WHAT"), help=argparse.SUPPRESS)
    p.add_argument("--serve-echo", nargs=2, metavar=("PORT", "DELAY_S"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1])
        return
    if args.serve_echo:
        serve_echo(int(args.serve_echo[0]), float(args.serve_echo[1]))
        return
    sizes = [int(s) for s in (args.sizes or ("1000" if args.quick else "1000,5000")).split(",")]
    delays = [args.echo_ms] if args.echo_ms is not None else [float(d) for d in args.delay_ms.split(",")]
    delay_s = [0.0]
    server = None if args.echo_ms is not None else serve_and_fill(sizes, delay_s)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sides = {"now": None}
            if args.base_tree:
                sides["base"] = namespace_of(args.base_tree, Path(tmp) / "base-path")
            if args.echo_ms is not None:
                rows = echo_rows(sizes, args.echo_ms, sides)
            for delay in delays if server else ():
                delay_s[0] = delay / 1000
                for n in sizes:
                    for what in ("sizes", "records") if args.records else ("sizes",):
                        for side, pythonpath in sides.items():
                            rows.append({"side": side, "delay_ms": delay, **child_result(
                                __file__, ["--child", str(n), what], pythonpath, WHO)})
                            print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        if server:
            server.stop()
    last = [r for r in rows if r["what"] == "sizes" and r["files"] == max(sizes) and r["delay_ms"] == max(delays)]
    now = next(r for r in last if r["side"] == "now")
    base = next((r for r in last if r["side"] == "base"), None)
    emit("plan_sizes", "files planned a second", round(now["files"] / now["wall_s"], 1),
         "c156fb7's 8 threads", round(base["files"] / base["wall_s"], 1) if base else None,
         {"sizes": sizes, "delay_ms": delays}, rows=rows,
         same_sums=None if base is None else all(
             r["sum"] == next(b["sum"] for b in rows if b["side"] == "base" and b["files"] == r["files"]
                              and b["what"] == r["what"] and b["delay_ms"] == r["delay_ms"])
             for r in rows if r["side"] == "now"))


if __name__ == "__main__":
    main()
