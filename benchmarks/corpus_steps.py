"""The corpus job's per-document work, step by step: CPU seconds per MB of review text of each step
``kolectra corpus --preset production`` runs on a document, each step alone in one process on the
same documents, outside Beam: reading (gunzip, the file's sha256, JSON, ids), the cleaning rules
(Unicode, HTML, personal data, repeats), the filters, the id's personal-data check, the exact-dedup
key and chunks, MinHash (signature, band keys), Kiwi (``tokenize(split_sents=True)`` alone, as
``corpus/segment.py`` calls it: the analyser and kiwipiepy's wrapper), the spans kolectra makes of Kiwi's sentences (``corpus/segment.py``), and
placing and writing the shard lines. Each step's time is the smallest of ``--repeats`` runs of
process CPU time (Kiwi's: one run, after a warm-up), with the analysing worker's garbage-collector
setting (``corpus/runners.py: tune_gc``).

What Beam adds (its graph, the shuffles, near-dup's joins and star rounds) and what is fixed (Kiwi's
load, 1-3 CPU s) are not here: ``benchmarks/corpus.py`` measures the whole job, and
docs/benchmarks.md ("The data stages' CPU, step by step") compares the two.

value: the share of the per-document CPU time that is Kiwi's own step; baseline: 1.0 (Kiwi alone);
``config.steps``: each step's CPU s, CPU s per MB of text, and share.

Full size: the first ``--records`` reviews (default 100,000, 8.7 MB of text) of ``--reviews GLOB``
or ``--data DIR``; about 15 minutes on 2 cores. ``--quick``: the first 10,000 (the embedded sample's
4,000 without ``--reviews``/``--data``), about a minute.
Usage: ``python benchmarks/corpus_steps.py [--quick] [--reviews GLOB | --data DIR] [--records N] [--repeats N]``.
"""

from __future__ import annotations

import gc
import glob
import gzip
import sys
import time

from common import add_data_args, emit, parser, reviews_source

WHO = "benchmarks/corpus_steps.py"


def main(argv: list[str] | None = None) -> dict:
    ap = parser(__doc__, "about 15 minutes on 2 cores")
    add_data_args(ap, "reviews")
    ap.add_argument("--records", type=int, default=None, help="the first N reviews (default: 100,000; --quick 10,000)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each step but Kiwi's; the smallest counts (default 3)")
    args = ap.parse_args(argv)
    files = sorted(glob.glob(reviews_source(args, WHO)))  # stops here, naming the argument, without data
    limit = args.records or (10_000 if args.quick else 100_000)

    from kolectra.corpus import filters, neardup, outputs, reader, webtext  # noqa: PLC0415 - after the data check
    from kolectra.corpus import text as text_rules  # noqa: PLC0415
    from kolectra.corpus.config import production_config  # noqa: PLC0415
    from kolectra.corpus.runners import tune_gc  # noqa: PLC0415
    from kolectra.corpus.segment import Segmenter, spans_from_sentences  # noqa: PLC0415

    tune_gc()
    cfg = production_config()
    steps: dict[str, float] = {}

    def step(name: str, fn, repeats: int = args.repeats):
        best, out = float("inf"), None
        for _ in range(repeats):
            gc.collect()
            t0 = time.process_time()
            out = fn()
            best = min(best, time.process_time() - t0)
        steps[name] = best
        return out

    def read():
        recs = []
        for path in files:
            for rec in reader.read_file(path, path, cfg.format, cfg.text_field, cfg.id_field, cfg.max_line_bytes, {}):
                if len(recs) == limit:
                    return recs
                recs.append(rec)
        return recs

    recs = [r for r in step("read", read) if "text" in r]
    texts = [r["text"] for r in recs]
    text_mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    rules = dict(strip_html=cfg.strip_html, mask_pii=cfg.mask_pii, max_repeat=cfg.max_repeat, language=cfg.language)
    cleaned = step("clean", lambda: [text_rules.clean(t, **rules) for t in texts])
    judged = step("filters", lambda: [filters.judge(t, cfg) for t in cleaned])
    step("id_check", lambda: [webtext.mask_pii(r["id"], cfg.language) for r in recs])
    kept = [(r, t) for r, (t, reason) in zip(recs, judged) if reason is None]

    def keyed():
        items = []
        for r, t in kept:
            key = outputs.text_key(t)
            outputs.bucket_of(key, 64)
            items.append((key, r["source"], r["line"], r["id"], t))
        return items

    items = step("dedup_keys", keyed)
    chunks = step("dedup_chunks", lambda: [outputs.pack_chunk(items[i:i + 2048]) for i in range(0, len(items), 2048)])

    def first_copies():
        best: dict = {}
        for chunk in map(outputs.unpack_chunk, chunks):
            for doc in chunk:
                if doc[0] not in best or doc[1:3] < best[doc[0]][1:3]:
                    best[doc[0]] = doc
        return sorted(best.values(), key=lambda d: d[1:3])

    docs = step("exact_dedup", first_copies)
    bands, rows = neardup.bands_rows(cfg.near_dup_threshold)
    perms = neardup.permutations(cfg.seed, bands * rows)
    sigs = step("minhash_signature", lambda: [neardup.signature(d[4], perms) for d in docs])
    step("minhash_band_keys", lambda: [(neardup.band_keys(s, bands, rows), neardup.sig_bytes(s)) for s in sigs])

    analyser = Segmenter(1)
    split = analyser.kiwi.tokenize
    for d in docs[:200]:  # Kiwi's lazy first analyses: one-off costs, not per document
        split(d[4], split_sents=True)
    analysed = step("kiwi", lambda: [split(d[4], split_sents=True) for d in docs], repeats=1)
    spans = step("spans", lambda: [spans_from_sentences(d[4], s) for d, s in zip(docs, analysed)])

    def placed():
        out = []
        for d, (sentences, morphs) in zip(docs, spans):
            doc = {"id": d[3], "source": d[1], "line": d[2], "text": d[4], "sentences": sentences, "morphs": morphs}
            outputs.split_of(d[4], cfg.seed, cfg.valid_fraction)
            outputs.sample_rank(doc, cfg.seed)
            outputs.shard_of(d[0], 1)
            out.append(((d[1], d[2]), outputs.document_json(doc)))
        return out

    lines = step("place", placed)
    packed = step("shard_chunks", lambda: [outputs.pack_chunk(lines[i:i + 512]) for i in range(0, len(lines), 512)])

    def write():
        ordered = sorted(x for chunk in packed for x in outputs.unpack_chunk(chunk))
        return gzip.compress("".join(line + "\n" for _, line in ordered).encode("utf-8"), 6)

    step("write_shard", write)
    total = sum(steps.values())
    config = {
        "inputs": [f.rsplit("/", 1)[-1] for f in files] if len(files) <= 8 else f"{len(files)} files",
        "records": len(recs), "kept": len(kept), "unique": len(docs), "text_mb": round(text_mb, 4),
        "preset": "production_config", "repeats": args.repeats,
        "steps": {k: {"cpu_s": round(v, 4), "cpu_s_per_mb": round(v / text_mb, 4), "share": round(v / total, 4)}
                  for k, v in steps.items()},
        "total_cpu_s_per_mb": round(total / text_mb, 4),
        "without_kiwi_cpu_s_per_mb": round((total - steps["kiwi"]) / text_mb, 4),
    }
    for k, v in steps.items():
        print(f"{WHO}: {k:18s} {v:8.3f} CPU s {v / text_mb:7.3f} s/MB {100 * v / total:5.1f} %", file=sys.stderr)
    return emit("corpus_steps", "share of the per-document CPU in Kiwi", round(steps["kiwi"] / total, 4),
                "Kiwi alone", 1.0, config)


if __name__ == "__main__":
    main(sys.argv[1:])
