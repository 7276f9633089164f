"""Near-duplicate removal in Beam stages (``corpus/neardup_beam.py``) against the exact in-memory
method (``neardup.find_near_duplicates``) on the NSMC review shards: the same drops?, and does any
element grow with the input?

For 1, 2, 4 (and 8) shards: the reviews (NFC, stripped, empty and exact-duplicate texts left out,
the first copy by (shard, line) kept, as the corpus job's exact dedup does) go through
``NearDedup`` alone on the in-process FnApiRunner (one worker) with a probe on every step's
outputs (``benchmarks/element_sizes.py``), and through the exact method in memory.

Reported per size: documents, drops of each method, precision and recall of the staged drops
against the exact ones (a drop counts when the same document is dropped; ``same_kept`` when it is
dropped for the same kept copy), the largest element of any step and the step that emits it, the
largest element of the previous layout (the ``ToList`` of every verified edge, pickled as it held them,
and a band element carrying the whole signature), CPU seconds of the Beam run and of the exact
method. value: the staged method's largest element at the largest size, in bytes; baseline:
the previous layout's ``ToList`` element at that size; ratio = value / baseline, here lower is better.

``--quick``: 1 and 2 shards (about 3 CPU minutes; needs ``--reviews`` or
``--data``); full: 1, 2, 4 and 8 shards.
Usage: ``python benchmarks/neardup.py [--quick] [--reviews GLOB | --data DIR] [--sizes 1,2,4]``.
"""

from __future__ import annotations

import glob
import gzip
import json
import pickle
import resource
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

import apache_beam as beam
import element_sizes
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from common import add_data_args, emit, parser, require_data

from kolectra.corpus import neardup, neardup_beam, outputs
from kolectra.corpus.build import dedup_buckets
from kolectra.corpus.config import CorpusConfig

THRESHOLD = 0.8  # --preset production's near_dup_threshold
SEED = 0


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def review_files(doc: str, full: str, who: str, argv: list[str] | None) -> list[str]:
    """The review files a near-dup study reads: ``--sizes N`` of them, else 1 with ``--quick`` and 8
    without (the arguments of :mod:`neardup_bits` and :mod:`neardup_keys`); ``--quick`` without
    ``--reviews``/``--data`` reads the embedded sample (``pipeline/sample/reviews.jsonl.gz``)."""
    import glob

    from common import add_data_args, parser, reviews_source

    ap = parser(doc, full)
    add_data_args(ap, "reviews")
    ap.add_argument("--sizes", type=int, default=None, help="review files to read (default 1 quick, 8 full)")
    args = ap.parse_args(argv)
    return sorted(glob.glob(reviews_source(args, who)))[: args.sizes or (1 if args.quick else 8)]


def unique_reviews(files: list[str]) -> dict[tuple[str, int], str]:
    """``{(file name, line): text}``: non-empty texts, the first copy of each."""
    texts, seen = {}, set()
    for path in files:
        name = Path(path).name
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line, row in enumerate(f, 1):
                text = unicodedata.normalize("NFC", json.loads(row).get("text") or "").strip()
                if text and text not in seen:
                    seen.add(text)
                    texts[(name, line)] = text
    return texts


def _read(path: str):
    """A file's documents as NearDedup takes them: lists of (text key, document), as the corpus
    job's are (up to 1,024 a list)."""
    docs = []
    with open(path, encoding="utf-8") as f:
        for row in f:
            doc = json.loads(row)
            docs.append((outputs.text_key(doc["text"]), doc))
            if len(docs) == 1024:
                yield docs
                docs = []
    if docs:
        yield docs


def staged(texts: dict, tmp: Path) -> tuple[dict, dict, float]:
    """NearDedup on ``texts`` in one in-process worker: ({dropped: kept}, {step output: largest
    element}, CPU seconds)."""
    paths = []
    for name in sorted({s for s, _ in texts}):
        path = tmp / f"{name}.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for (s, line), text in texts.items():
                if s == name:
                    f.write(json.dumps({"source": s, "line": line, "text": text}, ensure_ascii=False) + "\n")
        paths.append(str(path))
    sink = tmp / "dropped.jsonl"
    # as many groups as the corpus job would have dedup groups for these files (their JSONL bytes)
    groups = dedup_buckets(sum(Path(path).stat().st_size for path in paths), CorpusConfig.dedup_group_bytes)
    t0 = cpu()
    p = beam.Pipeline(runner=FnApiRunner())
    near = (p | "Files" >> beam.Create(paths) | "Read" >> beam.FlatMap(_read)
            | "NearDedup" >> neardup_beam.NearDedup(THRESHOLD, SEED, {s for s, _ in texts}, groups=groups))
    _ = (near[neardup_beam.SAMPLES]
         | "Drops" >> beam.Map(lambda rd: json.dumps([rd[1]["source"], rd[1]["line"], *rd[1]["kept"]]))
         | "Collect" >> beam.combiners.ToList()
         | "Write" >> beam.Map(lambda rows: sink.write_text("\n".join(sorted(rows)))))
    element_sizes.attach(p, "NearDedup")
    result = p.run()
    result.wait_until_finish()
    seconds = cpu() - t0
    drops = {}
    for row in sink.read_text().splitlines():
        s, line, ks, kl = json.loads(row)
        drops[(s, line)] = (ks, kl)
    return drops, element_sizes.largest(result), seconds


def exact(texts: dict) -> tuple[dict, int, int, float]:
    """The in-memory method: ({dropped: kept}, the previous layout's ToList element and band element in pickled
    bytes, CPU seconds)."""
    t0 = cpu()
    drops = neardup.find_near_duplicates(texts, THRESHOLD, SEED)
    seconds = cpu() - t0
    # the previous Beam layout held every distinct verified edge in one ToList element
    bands, rows = neardup.bands_rows(THRESHOLD)
    perms = neardup.permutations(SEED, bands * rows)
    buckets: dict = {}
    band_element = 0
    for key, text in texts.items():
        sig = neardup.signature(text, perms)
        member = (key, neardup.sig_bytes(sig))
        for b in neardup.band_keys(sig, bands, rows):
            buckets.setdefault(b, []).append(member)
        if not band_element:  # a band element as it was: ("band:hexhash", ((source, line), signature))
            band_element = len(pickle.dumps((f"0:{'0' * 16}", member), protocol=pickle.HIGHEST_PROTOCOL))
    edges = sorted({e for m in buckets.values() if len(m) > 1 for e in neardup.verified_edges(m, THRESHOLD)})
    return drops, len(pickle.dumps(edges, protocol=pickle.HIGHEST_PROTOCOL)), band_element, seconds


def compare(drops: dict, ref: dict) -> dict:
    hits = set(drops) & set(ref)
    return {"precision": len(hits) / len(drops) if drops else 1.0, "recall": len(hits) / len(ref) if ref else 1.0,
            "same_kept": sum(drops[k] == ref[k] for k in hits), "only_staged": sorted(set(drops) - hits)[:5],
            "only_exact": sorted(set(ref) - hits)[:5]}


def main(argv: list[str] | None = None) -> dict:
    ap = parser(__doc__, "about 30 minutes on 2 idle cores")
    add_data_args(ap, "reviews")
    ap.add_argument("--sizes", default=None, help="numbers of shards, comma-separated (default 1,2 quick, 1,2,4,8 full)")
    args = ap.parse_args(argv)
    files = sorted(glob.glob(require_data(args, "reviews", "benchmarks/neardup.py")))
    sizes = [int(n) for n in (args.sizes or ("1,2" if args.quick else "1,2,4,8")).split(",")]
    rows = []
    for n in sizes:
        texts = unique_reviews(files[:n])
        ref, tolist, band_element, exact_s = exact(texts)
        with tempfile.TemporaryDirectory() as tmp:
            drops, sizes_by_step, beam_s = staged(texts, Path(tmp))
        step, top = max(sizes_by_step.items(), key=lambda kv: kv[1])
        row = {"shards": n, "documents": len(texts), "exact_drops": len(ref), "staged_drops": len(drops),
               **compare(drops, ref), "largest_element_bytes": top, "largest_step": step,
               "previous_tolist_bytes": tolist, "previous_band_element_bytes": band_element,
               "beam_cpu_s": round(beam_s, 1), "exact_cpu_s": round(exact_s, 1),
               "largest_by_step": sizes_by_step}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "largest_by_step"}, ensure_ascii=False), file=sys.stderr)
    last = rows[-1]
    return emit("neardup_largest_element", "bytes", last["largest_element_bytes"], "the previous layout's ToList of all edges",
                last["previous_tolist_bytes"], {"threshold": THRESHOLD, "rounds": neardup_beam.ROUNDS, "sizes": sizes},
                rows=rows,
                started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


if __name__ == "__main__":
    main()
