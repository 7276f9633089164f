"""What one large input file costs the corpus job's longest work item, whole and in pieces.

A file was one work item of ``ReadAndClean`` (``corpus/steps.py``): a corpus given as one large
file was read and cleaned by one worker, and the dedup shuffle after it waits for every input, so
that item's CPU time is a floor under the job's wall time however many workers run. An
uncompressed text, JSONL or blocks file over ``split_bytes`` is now planned (one sequential pass:
SHA-256 and a newline count, ``corpus/pieces.py``) and read in pieces, each a work item of its own;
a Parquet file in runs of its row groups; a compressed file in zstd copies of its pieces, which the
first pass writes (``corpus/piece_copies.py``).

The input is one uncompressed JSONL file of the first N NSMC review files (14.2 MB each); with
``--parquet`` one Parquet file of their ids and texts; with ``--gzip`` the JSONL file gzipped. For each
size the steps run in this process as a runner calls them, their output consumed as it comes:
``ReadAndClean`` over the whole file; ``pieces.plan`` over it (CPU and ``tracemalloc`` peak); and
``ReadAndClean`` over each piece. Figures are CPU seconds of this process (``time.process_time``),
so neighbours on a shared machine move them little.

value: the longest chain of work in pieces (the plan, then the longest piece), CPU s, at the
largest size; baseline: the whole file's read at that size; ratio = value / baseline. Also each
size's figures, the pieces' total against the whole (the price of the plan and the cuts), and the
records in (the same either way, checked).

    python benchmarks/large_file.py [--quick] [--reviews GLOB | --data DIR] [--sizes 2,4,8]
        [--split-mb 16] [--parquet | --gzip]

Full: 2, 4 and 8 files (28, 57 and 113 MB) at 16 MB pieces, about 2 CPU minutes; ``--quick``: the
embedded sample's 4,000 reviews at 64 kB pieces.
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
import json
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from common import add_data_args, emit, parser, reviews_source

WHO = "large_file"
ROW_GROUP = 10_000  # rows a row group of the Parquet input (--parquet)


def write_input(files: list[str], out: Path) -> int:
    """One uncompressed JSONL file of ``files``' lines (a Parquet file of their rows, in row groups
    of :data:`ROW_GROUP` rows, where ``out`` ends in ``.parquet``): its size in bytes."""
    if out.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        with pq.ParquetWriter(out, pa.schema([("id", pa.string()), ("text", pa.string())])) as writer:
            for path in files:
                with gzip.open(path, "rt", encoding="utf-8") as f:
                    rows = [json.loads(line) for line in f]
                writer.write_table(pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]}),
                                   row_group_size=ROW_GROUP)
        return out.stat().st_size
    with (gzip.open(out, "wb", compresslevel=6) if out.suffix == ".gz" else out.open("wb")) as sink:
        for path in files:
            with gzip.open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    sink.write(chunk)
    return out.stat().st_size


def read_cpu(dofn, work: tuple) -> tuple[float, int]:
    """CPU seconds of ``ReadAndClean`` over one work item, and the records it read."""
    from kolectra.corpus import outputs
    from kolectra.corpus.steps import TALLY

    t0 = time.process_time()
    records = 0
    for out in dofn.process((0, [work])):
        if getattr(out, "tag", None) == TALLY and out.value[0] == outputs.RECORDS_IN:
            records += out.value[1]
    return time.process_time() - t0, records


def measure(path: Path, split_bytes: int, copies: Path) -> dict:
    from kolectra.corpus import inputs, pieces
    from kolectra.corpus.config import default_config
    from kolectra.corpus.steps import ReadAndClean

    cfg = dataclasses.replace(default_config(), split_bytes=split_bytes)
    listed = inputs.identify(str(path))
    dofn = ReadAndClean(cfg, 8192, None)
    dofn.setup()
    tracemalloc.start()
    t0 = time.process_time()
    _, planned = pieces.plan(listed, split_bytes, cfg.format, cfg.max_line_bytes, None, str(copies), "bench")
    plan_cpu = time.process_time() - t0
    plan_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    read_cpu(dofn, (listed, path.name, planned[0]))  # warm: the first read's one-off costs (regexes, imports)
    whole_cpu, whole_records = read_cpu(dofn, (listed, path.name))
    piece_cpu, records = [], 0
    for piece in planned:
        cpu, n = read_cpu(dofn, (listed, path.name, piece))
        piece_cpu.append(cpu)
        records += n
    if records != whole_records:
        sys.exit(f"{WHO}: the pieces read {records} records, the whole file {whole_records}")
    copied = sum(Path(p.copy).stat().st_size for p in planned if p.copy)
    return {
        "file_mb": round(listed.bytes / 1e6, 1),
        "copies_mb": round(copied / 1e6, 1),
        "records": whole_records,
        "pieces": len(planned),
        "whole_cpu_s": round(whole_cpu, 2),
        "plan_cpu_s": round(plan_cpu, 3),
        "plan_cpu_s_per_gb": round(plan_cpu / (listed.bytes / 1e9), 2),
        "plan_peak_mb": round(plan_peak / 1e6, 1),
        "longest_piece_cpu_s": round(max(piece_cpu), 2),
        "longest_chain_cpu_s": round(plan_cpu + max(piece_cpu), 2),
        "pieces_total_cpu_s": round(sum(piece_cpu), 2),
        "total_vs_whole": round((plan_cpu + sum(piece_cpu)) / whole_cpu, 3),
    }


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, "about 2 CPU minutes")
    add_data_args(p, "reviews")
    p.add_argument("--sizes", default="2,4,8", help="review files in the one large file, each size")
    p.add_argument("--split-mb", type=float, default=16.0, help="split_bytes in MB (2^20)")
    p.add_argument("--parquet", action="store_true",
                   help=f"the one file as Parquet (id and text, row groups of {ROW_GROUP:,} rows), not JSONL")
    p.add_argument("--gzip", action="store_true",
                   help="the one file as gzip-compressed JSONL: its pieces are zstd copies the first pass writes")
    args = p.parse_args(argv)
    source = reviews_source(args, WHO)
    files = sorted(glob.glob(source))
    if args.quick:
        sizes, split = [1], 64 << 10
        files = files[:1]
    else:
        sizes, split = [int(s) for s in args.sizes.split(",")], int(args.split_mb * (1 << 20))
        if len(files) < max(sizes):
            sys.exit(f"{WHO}: {len(files)} review file(s) match {source}, the sizes need {max(sizes)}")
    runs = {}
    with tempfile.TemporaryDirectory(prefix="kolectra-bench-large-") as tmp:
        for n in sizes:
            path = Path(tmp) / f"reviews-{n}.{'parquet' if args.parquet else 'jsonl.gz' if args.gzip else 'jsonl'}"
            write_input(files[:n], path)
            runs[n] = measure(path, split, Path(tmp) / f"copies-{n}")
            path.unlink()
            shutil.rmtree(Path(tmp) / f"copies-{n}", ignore_errors=True)
            print(f"{WHO}: {n} file(s): {runs[n]}", file=sys.stderr)
    last = runs[sizes[-1]]
    return emit(WHO, "CPU s of the longest chain of work items over one large file (plan + longest piece)",
                last["longest_chain_cpu_s"], "the whole file as one work item", last["whole_cpu_s"],
                {"sizes": sizes, "split_bytes": split, "source": source, "parquet": args.parquet, "gzip": args.gzip}, runs=runs)


if __name__ == "__main__":
    main()
