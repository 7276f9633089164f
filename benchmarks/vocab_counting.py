"""What bounding the vocab's word table costs, by counting method (issue 42, docs/vocab.md).

At corpus scale a word table cannot hold every word type (Heaps' law: about 107 M types at 34 GB
against ``max_word_types`` = 1 M). This reproduces that regime scaled down: the cap is
``--cap-share`` (default 1/9) of the corpus's types, and each way of keeping a table that small is
measured against the exact, uncapped table by the vocabulary it yields (``morph_wordpiece`` at the
default settings) on the corpus's valid split: [UNK] rate, tokens per eojeol, alphabet size.

- ``exact``: every type, exactly counted (the reference; unbounded memory);
- ``prune``: the stage before issue 42 (stream, prune the rarest past the cap; alphabet from what is left);
- ``top_k``: the stage now: exact counts summed per type, the cap's most frequent kept (:mod:`vocab.count`);
- ``misra_gries``: the heavy-hitter summary with the cap's counters (each count at most N/(k+1) low);
- ``sample``: a seeded sample of documents with about the cap's types (SentencePiece's ``input_sentence_size``).

All but ``prune`` take the alphabet from the exact character table, as the stage does.

    python benchmarks/vocab_counting.py --corpus CORPUS_DIR [--quick] [--cap-share 0.111]

``--quick``: the first 20,000 train documents. The last line is the benchmark's JSON.

``--cost``: instead, what counting costs, each way in a process of its own (CPU seconds of it and its
children; the largest resident set among them, and the sum of every process's peak): the Python
stream of the stage before issue 42 (one process, every type), and the Beam job with 1 and with 2
worker processes at the cap (``--cap-share`` of the stream's types). Each run's table is hashed: the
Beam job's must equal the stream's exact table cut to its ``k`` most frequent (``same_as_exact_top_k``).

``--sizes 2,4,8,16``: instead, the Beam job's peak RSS on the local runner over the first N train
shards, each N in a process of its own, at the stage's defaults (``max_word_types``,
``count_flush_types``), one in-process worker (``--workers 1,2``: also with 2 worker processes, each
process's own peak beside their sum: ``LOCAL_MEMORY.worker_mb``), beside the check's estimate
(``check_mb``: ``vocab/count.py``'s ``local_model``, with the word types it estimated, ``check_types``,
where those said more than the line), beside
what the launcher knows before the job (the shards' gzipped bytes, ``runners.input_bytes``) and the
word types counted (Heaps' law): the figures behind ``vocab/count.py``'s ``LOCAL_MEMORY`` (docs/scale.md,
"Vocabulary at 34 GB"). value: the peak per MB of shards fitted by least squares; baseline: the model's.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
from common import _proc_stat, emit, parser

QUICK_DOCS = 20000
BATCH = 1000  # documents between Misra-Gries reductions


def misra_gries(batches, k: int) -> tuple[Counter, int]:
    """Misra-Gries with batched reductions (Agarwal et al. 2012, mergeable summaries): past ``2k``
    counters, subtract the (k+1)-th largest count from all and drop those at zero. Each reduction
    removes at least (k+1) times what it subtracts, so a count is at most N/(k+1) below the truth.
    Returns the k largest counters and the total subtracted from every surviving count (its error bound)."""
    table: Counter = Counter()
    subtracted = 0
    for batch in batches:
        table.update(batch)
        if len(table) > 2 * k:
            counts = np.fromiter(table.values(), dtype=np.int64, count=len(table))
            c = int(np.partition(counts, -(k + 1))[-(k + 1)])
            table = Counter({w: n - c for w, n in table.items() if n > c})
            subtracted += c
    return Counter(dict(table.most_common(k))), subtracted  # k counters: the summary's size


def sampled(doc_id: str, rate: float) -> bool:
    digest = hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8, key=b"kolectra-vocab-0").digest()
    return int.from_bytes(digest, "big") < rate * 2**64


def table_digest(pairs) -> str:
    """SHA-256 of ``(type key, count)`` pairs in key order: equal tables, equal digests."""
    h = hashlib.sha256()
    for key, n in sorted(pairs):
        h.update(f"{key}\t{n}\n".encode("utf-8"))
    return h.hexdigest()


class PeakWatch(threading.Thread):
    """Every process's peak resident set (``VmHWM``) in this process's tree, read from /proc every
    ``every`` seconds: the last reading of each process (a lower bound of its peak) is kept."""

    def __init__(self, every: float = 0.5):
        super().__init__(daemon=True)
        self.every, self.peaks, self.done = every, {}, threading.Event()

    def run(self):
        while not self.done.wait(self.every):
            self.read()

    def read(self):
        by_parent: dict[int, list[int]] = {}
        for p in (p for p in os.listdir("/proc") if p.isdigit()):
            if (fields := _proc_stat(p)) is not None:
                by_parent.setdefault(int(fields[1]), []).append(int(p))
        todo = [os.getpid()]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/status") as f:
                    hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
                self.peaks[pid] = max(self.peaks.get(pid, 0), hwm)
            except (OSError, StopIteration):
                pass
            todo.extend(by_parent.get(pid, []))

    def by_process(self) -> dict:
        """This process's peak and each other's (the local runner's worker processes), in MB of 10^6
        bytes, as ``corpus/local_memory.py``'s models count them."""
        own = self.peaks.get(os.getpid(), 0)
        others = sorted((kb for pid, kb in self.peaks.items() if pid != os.getpid()), reverse=True)
        return {"launcher_peak_mb": round(own * 1.024e-3), "worker_peaks_mb": [round(kb * 1.024e-3) for kb in others]}

    def stop(self) -> int:
        self.done.set()
        self.join()
        self.read()
        return sum(self.peaks.values())  # KiB


def count_once(how: str, corpus: Path, k: int, cap_share: float, first: int | None = None) -> None:
    """One count in this process (``--count-child``): prints CPU seconds, peak RSS and the table's
    digests; the Beam job over the ``first`` train shards when given, else all of them."""
    from kolectra.corpus import shards
    from kolectra.corpus.runners import input_bytes
    from kolectra.vocab import count, tables, words
    from kolectra.vocab.config import VocabConfig

    watch = PeakWatch()
    watch.start()
    load = os.getloadavg()[0]
    counts: dict = {}
    if how == "stream":
        table, _ = words.count_words(words.iter_docs(corpus, "train"), 10**9)
    else:
        paths = [str(p) for p in shards.shard_paths(corpus, "train")][:first]
        counts["input_mb"] = round(input_bytes(paths) / 1e6, 2)
        # what the check said before the job (count.local_model: the line or the word types, the larger)
        workers = 0 if how == "1" else int(how)
        model = count.local_model(paths, input_bytes(paths), k, workers)
        counts.update(check_mb=round(model.peak_bytes(input_bytes(paths), workers) / 1e6),
                      check_types=model.records or None)
        table, _, summary = count.count_split(paths, k, VocabConfig().count_flush_types, ["--direct_num_workers", how])
        counts.update(shards=len(paths), word_types=summary["word_types"], words=summary["words"])
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    summed = watch.stop()
    pairs = [(tables.type_key(w), n) for w, n in table.items()]
    # MB of 10^6 bytes (ru_maxrss and VmHWM are KiB), as by_process() and LOCAL_MEMORY count them
    out = {"cpu_s": round(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, 2),
           "peak_rss_mb": round(max(own.ru_maxrss, kids.ru_maxrss) * 1.024e-3),
           "peak_rss_all_mb": round(summed * 1.024e-3), "processes": len(watch.peaks), **watch.by_process(),
           "types": len(table),
           "digest": table_digest(pairs), **counts, "load_1m": [round(load, 2), round(os.getloadavg()[0], 2)]}
    if how == "stream":
        out["top_k_digest"] = table_digest(tables.most_frequent(pairs, cap_of(len(table), cap_share)))
    print(json.dumps(out))


def cap_of(types: int, share: float) -> int:
    return max(1000, int(types * share))


def count_cost(corpus: Path, cap_share: float) -> dict:
    out: dict = {}
    for how in ("stream", "1", "2"):
        cap = 10**9 if how == "stream" else cap_of(out["stream"]["types"], cap_share)
        run = subprocess.run([sys.executable, __file__, "--corpus", str(corpus), "--count-child", how,
                              "--count-k", str(cap), "--cap-share", str(cap_share)],
                             check=True, capture_output=True, text=True)
        fig = json.loads(run.stdout.strip().splitlines()[-1])
        if how != "stream":
            fig.update(cap=cap, same_as_exact_top_k=fig["digest"] == out["stream"]["top_k_digest"])
        out[how if how == "stream" else f"beam_{how}_workers"] = fig
        print(how, fig, flush=True)
    return out


def count_sizes(corpus: Path, sizes: list[int], workers: list[str]) -> list[dict]:
    """The Beam job over the first N train shards for each N, each run in a process of its own."""
    from kolectra.vocab.config import VocabConfig

    runs = []
    for n in sizes:
        for how in workers:
            run = subprocess.run([sys.executable, __file__, "--corpus", str(corpus), "--count-child", how,
                                  "--count-k", str(VocabConfig().max_word_types), "--count-shards", str(n)],
                                 check=True, capture_output=True, text=True)
            fig = {"workers": int(how), **json.loads(run.stdout.strip().splitlines()[-1])}
            runs.append(fig)
            print(n, fig, flush=True)
    return runs


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares ``y = a + b x``: (a, b)."""
    b, a = np.polyfit(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), 1)
    return float(a), float(b)


def main() -> None:
    p = parser(__doc__, "about 5 minutes a shard of NSMC reviews on 2 busy cores")
    p.add_argument("--corpus", type=Path, required=True, help="a corpus artifact (kolectra corpus)")
    p.add_argument("--methods", default="exact,prune,top_k,misra_gries,sample", help="which to measure, comma-separated")
    p.add_argument("--cap-share", type=float, default=1 / 9, help="the cap as a share of the exact table's types")
    p.add_argument("--cost", action="store_true", help="measure what counting costs instead (see above)")
    p.add_argument("--count-child", help=argparse.SUPPRESS)
    p.add_argument("--sizes", help="the Beam job's peak over the first N train shards, e.g. 2,4,8,16 (see above)")
    p.add_argument("--workers", default="1", help="with --sizes: worker counts to run each size with, e.g. 1,2")
    p.add_argument("--count-k", type=int, help=argparse.SUPPRESS)
    p.add_argument("--count-shards", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.count_child:
        return count_once(args.count_child, args.corpus, args.count_k, args.cap_share, args.count_shards)
    if args.sizes:
        from kolectra.vocab.count import LOCAL_MEMORY

        runs = count_sizes(args.corpus, [int(n) for n in args.sizes.split(",")], args.workers.split(","))
        one = [r for r in runs if r["workers"] == 1]
        base, per_mb = fit_line([r["input_mb"] for r in one], [r["peak_rss_mb"] for r in one])
        # Heaps' law: word types = K * words ** beta, fitted in log-log
        _, beta = fit_line([np.log(r["words"]) for r in one], [np.log(r["word_types"]) for r in one])
        emit("vocab_count_local_memory", "peak RSS MB per MB of gzipped shards (1 worker, fitted)", round(per_mb, 3),
             "vocab/count.py LOCAL_MEMORY", LOCAL_MEMORY.per_mb, config={"corpus": str(args.corpus)},
             fit={"base_mb": round(base, 1), "per_mb": round(per_mb, 3), "heaps_beta": round(beta, 3)},
             model={"base_mb": LOCAL_MEMORY.base_mb, "per_mb": LOCAL_MEMORY.per_mb}, runs=runs)
        return
    if args.cost:
        cost = count_cost(args.corpus, args.cap_share)
        emit("vocab_count_cost", "stream CPU s / Beam job's (1 worker)",
             round(cost["stream"]["cpu_s"] / cost["beam_1_workers"]["cpu_s"], 3), "python stream (before issue 42)",
             1.0, config={"corpus": str(args.corpus)}, runs=cost)
        return
    from kolectra.vocab import export, report, tables, words
    from kolectra.vocab.build import learn_vocab
    from kolectra.vocab.config import VocabConfig

    cfg = VocabConfig(report_baseline=False)
    splitter = words.WordSplitter()
    ids, per_doc = [], []  # one pass over the documents; only their ids and words are kept
    for d in itertools.islice(words.iter_docs(args.corpus, "train"), QUICK_DOCS if args.quick else None):
        ids.append(str(d["id"]))
        per_doc.append(words.doc_words(d, splitter)[0])
    exact: Counter = Counter()
    for found in per_doc:
        exact.update(found)
    chars = tables.char_counts(exact)
    k = cap_of(len(exact), args.cap_share)
    n_words = sum(exact.values())
    pruned: Counter = Counter()  # words.count_words(docs, k), from the words already split
    for found in per_doc:
        pruned.update(found)
        if len(pruned) > k:
            words.prune(pruned, k * 3 // 4)
    mg, subtracted = misra_gries((Counter(w for f in per_doc[i:i + BATCH] for w in f)
                                  for i in range(0, len(per_doc), BATCH)), k)
    # the sample rate that gives about k types, by Heaps' law with the measured exponent 0.75
    rate = min(1.0, (k / len(exact)) ** (1 / 0.75))
    sample: Counter = Counter()
    for doc_id, found in zip(ids, per_doc):
        if sampled(doc_id, rate):
            sample.update(found)
    methods = {"exact": (exact, chars), "prune": (pruned, None),
               "top_k": (Counter(dict(tables.most_frequent(((tables.type_key(w), n) for w, n in exact.items()), k))),
                         chars),
               "misra_gries": (mg, chars), "sample": (sample, chars)}
    methods["top_k"] = (Counter({tables.word_type(key): n for key, n in methods["top_k"][0].items()}), chars)
    valid = list(words.iter_docs(args.corpus, "valid"))
    out = {}
    for name, (table, table_chars) in ((m, methods[m]) for m in args.methods.split(",")):
        t0 = time.process_time()
        vocab, stats = learn_vocab(cfg, table, cfg.recipe, show_progress=False, chars=table_chars)
        learn_cpu = time.process_time() - t0
        fig = report.measure({name: export.make_tokenizer(vocab)}, iter(valid), show_words=0)["recipes"][name]
        out[name] = {"word_types": len(table), "words_kept": sum(table.values()) if name != "sample" else None,
                     "alphabet": stats["alphabet"], "unk_rate": fig["unk_rate"],
                     "tokens_per_eojeol": round(fig["tokens_per_eojeol"], 4), "learn_cpu_s": round(learn_cpu, 1)}
        print(name, out[name], flush=True)
    if "misra_gries" in out:
        out["misra_gries"].update(bound_n_over_k1=n_words // (k + 1), subtracted=subtracted)
    if "sample" in out:
        out["sample"]["rate"] = round(rate, 4)
    # the figure: exact's tokens per eojeol over top_k's (1.0: the cap costs nothing; needs both measured)
    ratio = out["exact"]["tokens_per_eojeol"] / out["top_k"]["tokens_per_eojeol"] \
        if {"exact", "top_k"} <= out.keys() else 0.0
    emit("vocab_counting_methods", "exact's tokens/eojeol over top_k's", round(ratio, 4), "exact table", 1.0, config={"corpus": str(args.corpus), "train_documents": len(ids), "train_words": n_words,
                      "word_types": len(exact), "cap": k, "cap_share": round(args.cap_share, 4),
                      "vocab_size": cfg.vocab_size, "recipe": cfg.recipe}, methods=out)


if __name__ == "__main__":
    main()
