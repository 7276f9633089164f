"""What a worker unpickles for each of near-dup's Beam steps as the input files grow: 1,000, 10,000
and 100,000 synthetic crawl paths (``crawl/2026-11/part-NNNNNN.jsonl.gz``), the sources' ranks
given as a PCollection as the corpus job's listing gives them.

For every ParDo under ``NearDedup`` in the pipeline proto Beam hands the runner: its pickled DoFn's
bytes, and what unpickling it holds (``tracemalloc``). Baseline: the table of every source the
steps held before (``CompactIds``: the names sorted and a name -> rank dict), built here the same
way and measured the same way, once for each of the two steps that held it.

value: the largest step's held MB at 100,000 files; baseline: the table's MB at 100,000 files.

    python benchmarks/neardup_names.py [--quick]

Full: about 7 CPU s; ``--quick``: 1,000 and 10,000 files.
"""

from __future__ import annotations

import tracemalloc

import apache_beam as beam
from apache_beam.internal import pickler
from apache_beam.portability.api import beam_runner_api_pb2
from common import cpu_seconds, emit, parser

from kolectra.corpus import neardup_beam


def names(n: int) -> list[str]:
    return [f"crawl/2026-11/part-{i:06d}.jsonl.gz" for i in range(n)]


def held(build) -> tuple[object, int]:
    tracemalloc.start()
    obj = build()
    now, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return obj, now


def steps(n: int) -> dict[str, tuple[int, int]]:
    """{step: (pickled bytes, bytes held once unpickled)} of NearDedup's ParDos at ``n`` files."""
    p = beam.Pipeline()
    ranked = p | "Listing" >> beam.Create(list(enumerate(names(n))))
    _ = p | beam.Create([]) | "NearDedup" >> neardup_beam.NearDedup(0.8, 0, ranked)
    out = {}
    for t in p.to_runner_api().components.transforms.values():
        if t.unique_name.startswith("NearDedup/") and t.spec.urn == "beam:transform:pardo:v1":
            fn = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload).do_fn.payload
            out[t.unique_name] = (len(fn), held(lambda fn=fn: pickler.loads(fn))[1])
    return out


def table(n: int) -> int:
    def build():
        ordered = sorted(set(names(n)))
        return ordered, {s: i for i, s in enumerate(ordered)}
    return held(build)[1]


def main(argv: list[str] | None = None) -> dict:
    args = parser(__doc__, "about 7 CPU s").parse_args(argv)
    t0 = cpu_seconds()
    rows = []
    for n in (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000):
        measured = steps(n)
        name, (pickled, bytes_held) = max(measured.items(), key=lambda kv: kv[1][1])
        rows.append({"files": n, "largest_step": name, "pickled_bytes": pickled, "held_mb": round(bytes_held / 1e6, 3),
                     "all_steps_held_mb": round(sum(h for _, h in measured.values()) / 1e6, 3),
                     "table_mb_before": round(table(n) / 1e6, 3)})
        print(rows[-1])
    last = rows[-1]
    return emit("neardup_names", "MB a near-dup step holds at the most files", last["held_mb"],
                "the table of sources the steps held", last["table_mb_before"],
                {"cpu_s": round(cpu_seconds() - t0, 1)}, rows=rows)


if __name__ == "__main__":
    main()
