"""Benchmark: a pretraining run's metrics log on a bucket root, kept as parts (pipeline/store/log_parts.py).

    python benchmarks/store_run_log.py [--quick] [--saves 10,100,1000] [--lines 100]

Starts moto's S3 server on 127.0.0.1 (``pip install 'moto[server]' s3fs``, what the tests use; its
recorder counts the requests it answers). For each count of saves, a run on the bucket root makes
that many checkpoint saves (``--lines`` metrics lines of ~460 bytes before each, a 4 kB stand-in
checkpoint), through the store's real ``checkpoint_saved``; then ``--resume`` on a machine without
the run (a fresh cache) fetches it, up to the point where the trainer would start. Measured: the
bytes of log parts PUT at a save (mean and largest), the parts' deletes a save, the parts the store
holds at the end, and the resume's GETs, LISTs and bytes of parts read, and its wall time (no
network latency here: a cloud bucket adds ~20-50 ms a GET).

Side by side: the parts merged like a binary counter (kolectra's) and, as the baseline, the layout
before (one part a save, never merged: ``log_parts.merge_from`` answering "none" in this process).

``value``: GETs of the resume after the largest count of saves; ``baseline``: the same before.
``--quick``: 10 and 100 saves (seconds). Full: 10, 100 and 1,000 (a few minutes on 2 cores).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from common import emit, moto_server, parser


class Recorder:
    """moto's recorder: the requests answered between start() and stop(), as (method, path, query,
    bytes sent, a DeleteObjects' body)."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint

    def _call(self, verb: str) -> bytes:
        method = "GET" if verb == "download-recording" else "POST"
        request = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{verb}", method=method)
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.read()

    def start(self) -> None:
        self._call("reset-recording")
        self._call("start-recording")

    def stop(self) -> list[tuple[str, str, str, int]]:
        self._call("stop-recording")
        out = []
        for line in self._call("download-recording").decode().splitlines():
            entry = json.loads(line)
            url = urlsplit(entry["url"])
            headers = {k.lower(): v for k, v in entry.get("headers", {}).items()}
            sent = int(headers.get("x-amz-decoded-content-length") or headers.get("content-length") or 0)
            body = b""
            if entry["method"] == "POST" and "delete" in url.query:  # DeleteObjects: the keys are in its body
                body = base64.b64decode(entry["body"]) if entry.get("body_encoded") else entry.get("body", "").encode()
            out.append((entry["method"], url.path, url.query, sent, body))
        return out


class Stopped(Exception):
    """The run stops here (as a kill would: its state stays in the store)."""


def line(step: int) -> bytes:
    """A metrics line of the trainer's fields, ~460 bytes (tests/test_store_run_log.py's)."""
    return json.dumps({"step": step, "loss": 10.5 - step * 1e-6, "gen_loss": 6.25, "disc_loss": 0.0831,
                       "grad_norm": 1.37, "gen_acc": 0.31, "replaced_share": 0.85, "disc_acc": 0.94,
                       "disc_precision": 0.71, "disc_recall": 0.42, "replaced_token_share": 0.12,
                       "disc_auc": 0.9123456789, "lr": 0.000123456789, "tokens_per_s": 12345.678,
                       "nonpad_tokens": step * 4096, "padding": "x" * 120}).encode() + b"\n"


def one(bucket: str, saves: int, per_save: int, merged: bool, recorder: Recorder, tmp: Path) -> dict:
    from kolectra.core import storage
    from kolectra.core.stage import StageOutput
    from kolectra.pipeline.store import log_parts
    from kolectra.pipeline.store.artifacts import Resumable
    from kolectra.pipeline.store.factory import open_store
    from kolectra.pipeline.store.request import Request

    real_merge = log_parts.merge_from
    log_parts.merge_from = real_merge if merged else (lambda sizes, new: len(sizes))
    root = f"{bucket}/{'merged' if merged else 'before'}-{saves}"
    request = Request(kind="checkpoint", name="bench", stage_version=1, config={"saves": saves})
    resumable = Resumable(family={"kind": "checkpoint"}, scratch=("checkpoints",))
    found: dict = {}

    def train(out: Path) -> StageOutput:
        for k in range(saves):
            with (out / "metrics.jsonl").open("ab") as f:
                f.write(b"".join(line(k * per_save + i) for i in range(per_save)))
            step_dir = out / "checkpoints" / f"step-{k + 1:08d}"
            step_dir.mkdir(parents=True)
            (step_dir / "model.pt").write_bytes(bytes(4096))
            (step_dir / "manifest.json").write_text(json.dumps({"step": k + 1}))
            store.checkpoint_saved(step_dir)
            if k >= 2:  # the trainer keeps two
                for f in (out / "checkpoints" / f"step-{k - 1:08d}").iterdir():
                    f.unlink()
                (out / "checkpoints" / f"step-{k - 1:08d}").rmdir()
        raise Stopped  # the run stays in the store

    def resumed(out: Path) -> StageOutput:
        found["requests"] = recorder.stop()
        found["wall_s"] = time.monotonic() - found["t0"]
        found["log"] = (out / "metrics.jsonl").stat().st_size
        raise Stopped

    os.environ["KOLECTRA_CACHE"] = str(tmp / f"{root.rsplit('/', 1)[-1]}-a")
    store = open_store(root)
    recorder.start()
    try:
        store.build(request, train, resumable=resumable)
    except Stopped:
        pass
    saved = recorder.stop()
    run = f"{root}/.work/checkpoint-{request.id()}"
    parts_key = f"/{log_parts.PARTS}/metrics.jsonl/"
    sizes = {name: int(meta["size"]) for name, meta in storage.listing(f"{run}/{log_parts.PARTS}/metrics.jsonl").items()}
    puts = [sent for method, path, _, sent, _ in saved if method == "PUT" and parts_key in path]
    deletes = sum(body.count(parts_key.lstrip("/").encode()) for *_, body in saved)  # keys of parts deleted

    os.environ["KOLECTRA_CACHE"] = str(tmp / f"{root.rsplit('/', 1)[-1]}-b")
    store = open_store(root)
    found["t0"] = time.monotonic()
    recorder.start()
    try:
        store.build(request, resumed, resumable=resumable, resume=True)
    except Stopped:
        pass
    log_parts.merge_from = real_merge
    got = [path for method, path, query, *_ in found["requests"] if method == "GET" and "list-type" not in query]
    lists = sum(method == "GET" and "list-type" in query for method, _, query, *_ in found["requests"])
    part_gets = [p for p in got if parts_key in p]
    return {
        "saves": saves,
        "log_bytes": found["log"],
        "parts_at_end": len(sizes),
        "put_bytes_per_save_mean": round(sum(puts) / saves),
        "put_bytes_per_save_max": max(puts),
        "part_deletes_per_save": round(deletes / saves, 3),
        "resume_gets": len(got),
        "resume_part_gets": len(part_gets),
        "resume_lists": lists,
        "resume_requests": len(found["requests"]),
        "resume_part_bytes": sum(sizes.get(p.rsplit("/", 1)[-1], 0) for p in part_gets),
        "resume_wall_s": round(found["wall_s"], 2),
    }


def main() -> None:
    p = parser(__doc__, "a few minutes on 2 cores")
    p.add_argument("--saves", default=None, help="comma-separated counts of saves (default 10,100,1000; --quick 10,100)")
    p.add_argument("--lines", type=int, default=100, help="metrics lines written before each save")
    args = p.parse_args()
    counts = [int(n) for n in (args.saves or ("10,100" if args.quick else "10,100,1000")).split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        server, endpoint = moto_server("benchmarks/store_run_log.py",
                                       {"MOTO_RECORDER_FILEPATH": str(Path(tmp) / "requests.jsonl")})
        try:
            from kolectra.core import storage

            bucket = f"s3://kolectra-bench-{uuid.uuid4().hex[:8]}"
            fs, _ = storage.filesystem(bucket)
            fs.mkdir(bucket.removeprefix("s3://"))
            recorder = Recorder(endpoint)
            rows = {kind: [one(bucket, n, args.lines, kind == "merged", recorder, Path(tmp)) for n in counts]
                    for kind in ("merged", "before")}
        finally:
            server.terminate()
            server.wait(timeout=30)
    for kind, found in rows.items():
        for row in found:
            print(kind, json.dumps(row), file=sys.stderr)
    emit("store_run_log", f"GETs of a resume after {counts[-1]} saves", rows["merged"][-1]["resume_gets"],
         "one part a save, never merged", rows["before"][-1]["resume_gets"],
         {"saves": counts, "lines_per_save": args.lines}, rows=rows)


if __name__ == "__main__":
    main()
