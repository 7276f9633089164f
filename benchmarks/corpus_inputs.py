"""Benchmark: what one record per input file costs the corpus launcher and every child stage, with
the records in the manifest (before) and past ``INPUTS_INLINE`` in ``inputs.jsonl`` (now).

    python benchmarks/corpus_inputs.py [--quick]

The corpus request holds one record per input file (``corpus/inputs.py``: path, bytes, identity,
and after the job the sha256 of the bytes read). Before, the manifest repeated every one under
``inputs``; now past ``pipeline/store/inputs.INPUTS_INLINE`` (10,000) the store writes them to
``inputs.jsonl`` and the manifest keeps the first ``INPUTS_HEAD``, the count and the file's sha256.
For synthetic records shaped like a local file's and an S3 object's (long-ish paths, a 64-hex
sha256), at 10k, 100k and 1M inputs (``--quick``: S3 records, 10k and 100k), both ways in the same run:

- ``manifest_bytes``: ``manifest.json`` as the store writes it (``manifest_of`` and ``write_json``'s
  indent=2 JSON). Before is the same code with ``INPUTS_INLINE`` set past the count: below the
  threshold the manifest is byte-identical to the one before the change (compared at 0, 5 and
  10,000 records), so this is the old layout;
- ``id_cpu_s``: the request id, before as ``sha256(canonical(request.key()))`` (one list of every
  input key, one text), now ``Request.id()`` (input keys fed in batches); the same id both ways;
- ``seal_peak_mb``: tracemalloc's peak above what the launcher already held, while the id and the
  manifest (and now ``inputs.jsonl``) are made: what sealing adds;
- ``launcher_mb``: what the launcher holds anyway, as ``pipeline/stages.corpus`` builds it: the
  listing (``InputFile`` a file), the request's records, and after the job each file's sha256 by
  source name and the names themselves;
- ``child_read_cpu_s``: a child stage's manifest read (``parse_manifest``: JSON and the checks);
  ``stream_all_cpu_s``: now, reading every record back with ``inputs.records`` (only a reader that
  wants them all; ``show``, ``list`` and the lineage read the manifest alone).

CPU seconds are measured with tracemalloc off (it doubles them); the memory in a second pass.
``value``: manifest bytes now at the largest size (S3 records); ``baseline``: before. ``cap_inputs``
in the rows: the count at which the manifest would pass the 64 MiB read cap, extrapolated linearly
from the largest size (None: it does not grow with the count).
"""

from __future__ import annotations

import gc
import hashlib
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path

from common import cpu_seconds, emit, parser

from kolectra.core.stage import StageOutput
from kolectra.corpus.inputs import InputFile
from kolectra.corpus.reader import source_names
from kolectra.pipeline.store import inputs
from kolectra.pipeline.store.artifacts import ID_CHARS, Request, manifest_of
from kolectra.pipeline.store.manifest import MAX_MANIFEST, canonical, parse_manifest

STARTED = "2026-11-29T00:00:00Z"


def listing(kind: str, n: int) -> list[InputFile]:
    """``n`` input files as corpus/inputs.py lists them."""
    out = []
    for i in range(n):
        size = 50_000_000 + i
        if kind == "local":
            path = f"/data/corpora/korean-web-2024/crawl-{i // 10_000:04d}/part-{i:08d}.jsonl.gz"
            identity = f"local:{path}:{size}:{1_700_000_000_000_000_000 + i * 1_000_003}"
        else:
            path = f"s3://kolectra-corpora/korean-web-2024/crawl-{i // 10_000:04d}/part-{i:08d}.jsonl.gz"
            identity = f'object:{path}:{size}:"{i:032x}-8"'
        out.append(InputFile(path, size, identity))
    return out


def launched(kind: str, n: int) -> tuple[list, tuple, dict, dict]:
    """What ``stages.corpus`` holds once the job is done: the listing, the records (with the sha256
    the job read filled in), the sha256s by source name and the names."""
    listed = listing(kind, n)
    records = tuple(f.record() for f in listed)
    names = source_names([f.path for f in listed])
    read = {names[r["path"]]: f"{i:064x}" for i, r in enumerate(records)}
    for r in records:
        r["sha256"] = read[names[r["path"]]]
    return listed, records, read, names


def request_of(records: tuple) -> Request:
    return Request(kind="corpus", name="bench", stage_version=13, config={"seed": 1}, inputs=records,
                   libraries=("apache-beam",))


def old_id(request: Request) -> str:
    return hashlib.sha256(canonical(request.key())).hexdigest()[:ID_CHARS]


def manifest_text(request: Request, directory: Path, inline: bool) -> tuple[str, dict | None]:
    """The manifest the store writes for ``request`` (and now the inputs file's entry), with its
    records inline (before) or as the store keeps them now."""
    files = [{"path": "data/train-00000.jsonl.gz", "bytes": 1, "sha256": "0" * 64}]
    saved = inputs.INPUTS_INLINE
    inputs.INPUTS_INLINE = len(request.inputs) if inline else saved
    try:
        entry = inputs.write(request.inputs, directory) if inputs.spills(request.inputs) else None
        files = sorted(files + ([entry] if entry else []), key=lambda e: e["path"])
        manifest = manifest_of(request, StageOutput(stats={}), files, STARTED, None)
    finally:
        inputs.INPUTS_INLINE = saved
    return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", entry


def count_records(directory: Path, manifest: dict) -> int:
    return sum(1 for _ in inputs.records(directory, manifest))


def cpu(fn, *args):
    gc.collect()
    c0 = cpu_seconds()
    out = fn(*args)
    return round(cpu_seconds() - c0, 3), out


def seal_peak_mb(records: tuple, directory: Path, before: bool) -> float:
    """tracemalloc's peak above what was held at the start, while the id and the manifest are made."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    request = request_of(records)
    _ = old_id(request) if before else request.id()
    text, _ = manifest_text(request, directory, inline=before)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del text
    return round((peak - base) / 1e6, 1)


def measure(kind: str, n: int, directory: Path) -> dict:
    gc.collect()
    tracemalloc.start()
    listed, records, read, names = launched(kind, n)
    launcher = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    row: dict = {"kind": kind, "inputs": n, "launcher_mb": round(launcher / 1e6, 1)}
    for way, before in (("before", True), ("now", False)):
        request = request_of(records)
        id_cpu, aid = cpu(old_id if before else Request.id, request)
        text, entry = manifest_text(request, directory, inline=before)
        size = len(text.encode())
        read_cpu, manifest = cpu(parse_manifest, text.encode(), "bench")
        row[way] = {"id": aid, "manifest_bytes": size, "bytes_per_input": round(size / n, 1), "id_cpu_s": id_cpu,
                    "child_read_cpu_s": read_cpu, "seal_peak_mb": seal_peak_mb(records, directory, before),
                    "cap_inputs": int(MAX_MANIFEST / (size / n)) if before else None}
        if entry is not None:
            row[way]["inputs_file_bytes"] = entry["bytes"]
            row[way]["stream_all_cpu_s"], count = cpu(count_records, directory, manifest)
            assert count == n
        del text, manifest
    assert row["before"]["id"] == row["now"]["id"], "the request id changed"
    del listed, records, read, names
    return row


def main() -> None:
    args = parser(__doc__, "about 12 CPU minutes (tracemalloc at 1M records), 5 GB of memory").parse_args()
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("s3",) if args.quick else ("local", "s3"):
            for n in sizes:
                rows.append(measure(kind, n, Path(tmp)))
                print(json.dumps(rows[-1]), file=sys.stderr)
    last = next(r for r in rows if r["kind"] == "s3" and r["inputs"] == sizes[-1])
    emit("corpus_inputs_manifest", "manifest bytes at the most inputs", last["now"]["manifest_bytes"],
         "every input record in the manifest", last["before"]["manifest_bytes"],
         {"sizes": sizes, "inputs_inline": inputs.INPUTS_INLINE, "inputs_head": inputs.INPUTS_HEAD,
          "cap_bytes": MAX_MANIFEST}, rows=rows)


if __name__ == "__main__":
    main()
