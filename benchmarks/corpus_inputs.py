"""Benchmark: what one record per input file costs the corpus launcher and every child stage, with
the records in the manifest (before) and past ``INPUTS_INLINE`` in ``inputs.jsonl`` (now).

    python benchmarks/corpus_inputs.py [--quick] [--launcher [list|file ...]]

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
- ``launcher``: what the launcher holds, both ways. ``launcher_mb``: after the job, as
  ``pipeline/stages.corpus`` builds it: the listing (``InputFile`` a file), the request's records,
  and before, each file's sha256 by source name and the names' table (now the job's rows are merged
  with the records a line at a time: ``corpus/listing.fill_sha256``); ``launcher_peak_mb``:
  tracemalloc's peak meanwhile; ``graph_bytes``: the job's graph (``corpus/build._recipe``, built,
  not run), before with a ``Create`` of every file, now naming the listing's file
  (``listing_file_bytes``), and ``graph_peak_mb`` what building and serialising it adds (not at 1 M);
- ``child_read_cpu_s``: a child stage's manifest read (``parse_manifest``: JSON and the checks);
  ``stream_all_cpu_s``: now, reading every record back with ``inputs.records`` (only a reader that
  wants them all; ``show``, ``list`` and the lineage read the manifest alone).

``--launcher`` measures only the launcher's path from the listing to the seal (``launcher_path``),
``list`` (the records a tuple, the listing a list: as at c584efe, and runs on that tree) and
``file`` (both read again from the store's ``RecordFile``): ``held_mb`` after the job, ``peak_mb``,
CPU s, and the id and the sha256s of ``inputs.jsonl`` and the manifest, to compare the ways.

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

import apache_beam as beam
from common import cpu_seconds, emit, parser

from kolectra.core.stage import StageOutput
from kolectra.corpus import build as corpus_build
from kolectra.corpus.inputs import InputFile
from kolectra.corpus.listing import FILE_NAME, fill_sha256, in_name_order
from kolectra.corpus.listing import write as write_listing
from kolectra.corpus.reader import source_namer, source_names
from kolectra.pipeline.configs import resolve
from kolectra.pipeline.store import inputs
from kolectra.pipeline.store.manifest import MAX_MANIFEST, canonical, fields_digest, parse_manifest
from kolectra.pipeline.store.request import ID_CHARS, Request, manifest_of

STARTED = "2026-11-29T00:00:00Z"


def listing(kind: str, n: int) -> list[InputFile]:
    """``n`` input files as corpus/inputs.py lists them."""
    return list(listed_files(kind, n))


def listed_files(kind: str, n: int):
    """:func:`listing` a file at a time (as ``corpus.inputs.iter_inputs`` gives them)."""
    for i in range(n):
        size = 50_000_000 + i
        if kind == "local":
            path = f"/data/corpora/korean-web-2024/crawl-{i // 10_000:04d}/part-{i:08d}.jsonl.gz"
            identity = f"local:{path}:{size}:{1_700_000_000_000_000_000 + i * 1_000_003}"
        else:
            path = f"s3://kolectra-corpora/korean-web-2024/crawl-{i // 10_000:04d}/part-{i:08d}.jsonl.gz"
            identity = f'object:{path}:{size}:"{i:032x}-8"'
        yield InputFile(path, size, identity)


def launched(kind: str, n: int, before: bool) -> tuple:
    """What ``stages.corpus`` holds once the job is done: the listing and the records (with the
    sha256 the job read filled in); before, also the sha256s by source name and the names' table.
    Now the rows (``stats/files.jsonl``, name order; a generator here) are merged with the records."""
    listed = listing(kind, n)
    records = tuple(f.record() for f in listed)
    if before:
        names = source_names([f.path for f in listed])
        read = {names[r["path"]]: f"{i:064x}" for i, r in enumerate(records)}
        for r in records:
            r["sha256"] = read[names[r["path"]]]
        return listed, records, read, names
    name_of = source_namer(f.path for f in listed)
    fill_sha256(records, name_of, ((name_of(f.path), {"sha256": f"{i:064x}"}) for i, f in enumerate(listed)))
    return listed, records


def graph_of(listed: list[InputFile], directory: Path, before: bool) -> int:
    """The corpus job's graph (``corpus/build._recipe``, built, not run) for ``listed``: its bytes.
    Now the listing is written to a file the graph names; before, the job's ``Create`` of every
    file's (rank, (file, source)) (the same graph with that step in the place of the file's)."""
    cfg, _ = resolve("corpus", preset="default", sets=["num_shards=1"])
    at = str(directory / FILE_NAME)
    p = beam.Pipeline()
    if before:
        sources = source_names([f.path for f in listed])
        ranks = {s: i for i, s in enumerate(sorted(sources.values()))}
        _ = p | "CreateListing" >> beam.Create([(ranks[sources[f.path]], (f, sources[f.path])) for f in listed])
    else:
        write_listing(in_name_order(listed, source_namer(f.path for f in listed)), at)
    corpus_build._recipe(p, cfg, at, "/out", 16, None)
    return len(p.to_runner_api().SerializeToString())


def traced_peak_mb(fn, *args) -> float:
    """tracemalloc's peak above what was held at the start, while ``fn`` runs."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fn(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return round((peak - base) / 1e6, 1)


def launcher_rows(kind: str, n: int, directory: Path) -> dict:
    """The launcher both ways: held after the job and at the peak, the graph's bytes, CPU s."""
    listed = listing(kind, n)
    row: dict = {}
    for way, before in (("before", True), ("now", False)):
        gc.collect()
        tracemalloc.start()
        held = launched(kind, n, before)
        launcher, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del held
        fill_cpu, _ = cpu(launched, kind, n, before)
        graph_cpu, graph_bytes = cpu(graph_of, listed, directory, before)
        row[way] = {"launcher_mb": round(launcher / 1e6, 1), "launcher_peak_mb": round(peak / 1e6, 1),
                    "launcher_cpu_s": fill_cpu, "graph_bytes": graph_bytes, "graph_cpu_s": graph_cpu,
                    # tracemalloc doubles the CPU and Beam's pickling of a million values is minutes
                    "graph_peak_mb": traced_peak_mb(graph_of, listed, directory, before) if n < 1_000_000 else None}
    row["now"]["listing_file_bytes"] = (directory / FILE_NAME).stat().st_size
    return row


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
    listed, records, _, _ = launched(kind, n, before=True)
    row: dict = {"kind": kind, "inputs": n, "launcher": launcher_rows(kind, n, directory)}
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
    del listed, records
    return row


def launcher_path(kind: str, n: int, way: str, directory: Path, traced: bool) -> dict:
    """The launcher from the listing to the seal, as ``pipeline/stages.corpus`` runs it, the job
    left out (its rows made up): ``list``, the records a tuple of dicts and the listing a list (as at
    c584efe; runs on that tree too), or ``file``, both read again from the store's ``RecordFile``.
    ``held_mb``: tracemalloc's count once the sha256s are merged (what waits through the seal);
    ``peak_mb``: its peak from the listing to the manifest's text. The id and the bytes of
    ``inputs.jsonl`` and ``manifest.json``, to compare the ways."""
    gc.collect()
    if traced:
        tracemalloc.start()
    if way == "list":
        listed = listing(kind, n)
        records = tuple(f.record() for f in listed)
    else:
        from kolectra.corpus.inputs import Files  # noqa: PLC0415 - not in the tree before
        from kolectra.pipeline.store.inputs import RecordFile  # noqa: PLC0415

        records = RecordFile(f.record() for f in listed_files(kind, n))
        listed = Files(records)
    request = request_of(records)
    aid = request.id()
    name_of = source_namer(f.path for f in listed)
    assert sum(f.bytes for f in listed) > 0
    write_listing(in_name_order(listed, name_of), str(directory / FILE_NAME))
    fill_sha256(records, name_of, ((name_of(f.path), {"sha256": f"{i:064x}"}) for i, f in enumerate(listed)))
    held = tracemalloc.get_traced_memory()[0] if traced else 0
    files = [{"path": "data/train-00000.jsonl.gz", "bytes": 1, "sha256": "0" * 64}]
    if inputs.spills(records):
        files = sorted([*files, inputs.write(records, directory)], key=lambda e: e["path"])
    manifest = manifest_of(request, StageOutput(stats={}), files, STARTED, None)
    # the clock's and the checkout's (a worktree of another commit): the rest must be the same bytes both ways
    manifest["provenance"].update(finished=STARTED, git_commit=None)
    manifest["fields_digest"] = fields_digest(manifest)
    text = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    if traced:
        tracemalloc.stop()
    spilled = directory / inputs.INPUTS_FILE
    out = {"id": aid, "manifest_sha256": hashlib.sha256(text).hexdigest(),
           "inputs_file_sha256": hashlib.sha256(spilled.read_bytes()).hexdigest() if inputs.spills(records) else None,
           "held_mb": round(held / 1e6, 1), "peak_mb": round(peak / 1e6, 1)}
    getattr(records, "close", bool)()
    return out


def launcher_ab(sizes: list[int], ways: list[str], kinds: list[str]) -> list[dict]:
    """``--launcher``: :func:`launcher_path` each way at each size and kind; CPU s untraced."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            for n in sizes:
                row: dict = {"kind": kind, "inputs": n}
                for way in ways:
                    c0 = cpu_seconds()
                    launcher_path(kind, n, way, Path(tmp), traced=False)
                    cpu = round(cpu_seconds() - c0, 2)
                    row[way] = {**launcher_path(kind, n, way, Path(tmp), traced=True), "cpu_s": cpu}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    return rows


def main() -> None:
    p = parser(__doc__, "about 26 CPU minutes (tracemalloc at 1M records, the old graph of 1M files), 5 GB of memory")
    p.add_argument("--launcher", nargs="*", metavar="WAY", choices=("list", "file"),
                   help="only the launcher's path from the listing to the seal, these ways (list, file)")
    p.add_argument("--kind", choices=("local", "s3"), help="with --launcher: only these records (default: both)")
    args = p.parse_args()
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    if args.launcher is not None:
        rows = launcher_ab(sizes, args.launcher or ["list", "file"], [args.kind] if args.kind else ["local", "s3"])
        last = rows[-1]
        emit("corpus_inputs_launcher", "MB held after the job at the most inputs", last.get("file", {}).get("held_mb"),
             "records a tuple, listing a list", last.get("list", {}).get("held_mb"), {"sizes": sizes}, rows=rows)
        return
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
