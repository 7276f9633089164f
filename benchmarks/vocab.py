"""Benchmark of the vocab stage: vocabulary build throughput against HF ``tokenizers``.

Figure: training words per second through a whole vocabulary build at the default size (35,000,
``min_frequency`` 2, 3,000 alphabet characters) on NSMC movie reviews —
kolectra's ``morph_wordpiece`` (the Beam word count of :mod:`vocab.count` over the corpus shards,
then the morpheme-constrained learner, :mod:`vocab.trainer`, numpy and Python) against the HF
``tokenizers`` ``WordPieceTrainer`` (Rust, multi-threaded) on the same texts with the same
normaliser and pre-tokeniser. The baseline cannot do what ours does (it has no hook to keep
merges inside morphemes), so the ratio says what the constraint costs in build time; the
quality side (share of cuts on morpheme boundaries, tokens per eojeol, against plain WordPiece)
is printed in the same line under ``quality``. Kiwi's morpheme analysis is the corpus stage's
work and is not timed (give ``--corpus`` a corpus artifact to skip it).

Each side runs in a process of its own (``--side``), twice, interleaved (ours, HF, HF, ours):
``cpu_seconds`` are that process's and its children's (Beam's workers, HF's threads), ``peak_rss_mb``
its largest resident set (its own or a worker's, whichever is larger), since a shared machine
disturbs both less than the wall time. ``learner`` compares the learners alone on the same word
counts: ours on the counted table against HF's trainer fed the same words as often as counted
(its own counting of them included, which favours ours slightly). ``breakdown`` splits our build
into reading the documents, counting, and learning with and without the morpheme rule.

    python benchmarks/vocab.py [--quick] [--reviews GLOB | --data DIR | --corpus CORPUS_DIR]
    python benchmarks/vocab.py --learner [--table FILE] [--repeats N] [--corpus CORPUS_DIR | ...]

``--learner``: the learners alone at any size (the issue-42 figure is on all 8 review files, 879,096
types): the word table is counted once (or read from ``--table``, a pickle this mode wrote
before), then ours (the stage's recipe) and HF's trainer (:func:`hf_learn`) learn from it in
processes of their own, alternated ``--repeats`` times each; each reports the learning's CPU
seconds (its threads included) and its peak resident set, with the table alone's beside it.

``--quick``: the first 20,000 reviews of ``--reviews`` (or ``--data``), else the embedded sample's
4,000 (about a minute on 2 cores). Full: every review given, about 10 minutes on 2 cores for the
662,404 NSMC reviews (Kiwi's analysis about 5 of them, untimed; both builds and the quality
figures the rest).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import pickle
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from common import add_data_args, emit, parser, reviews, reviews_source, timed

from kolectra.core.tokens import SPECIALS

QUICK_REVIEWS = 20000
TRAIN_SHARDS = 4


def write_corpus(docs: list[tuple[str, str]], corpus_dir: Path) -> Path:
    """A corpus artifact's data files (store format) with real Kiwi morphemes; every 20th doc is valid,
    the train documents in :data:`TRAIN_SHARDS` contiguous shards (the corpus stage's default count)."""
    from kiwipiepy import Kiwi

    from kolectra.corpus import shards

    kiwi = Kiwi()
    (corpus_dir / shards.DATA_DIR).mkdir(parents=True)
    path = corpus_dir / shards.DATA_DIR
    valid = gzip.open(path / "valid-00000-of-00001.jsonl.gz", "wt", encoding="utf-8")
    train = [gzip.open(path / f"train-{i:05d}-of-{TRAIN_SHARDS:05d}.jsonl.gz", "wt", encoding="utf-8")
             for i in range(TRAIN_SHARDS)]
    for n, ((doc_id, text), tokens) in enumerate(zip(docs, kiwi.tokenize(t for _, t in docs))):
        morphs = [[t.start, t.start + t.len, t.tag] for t in tokens]
        f = valid if n % 20 == 19 else train[n * TRAIN_SHARDS // len(docs)]
        f.write(json.dumps({"id": doc_id, "source": "nsmc", "text": text, "sentences": [[0, len(text)]],
                            "morphs": morphs}, ensure_ascii=False) + "\n")
    for f in (valid, *train):
        f.close()
    return corpus_dir


def kolectra_build(cfg, corpus_dir: Path):
    from kolectra.corpus import shards
    from kolectra.vocab import build, count

    paths = [str(p) for p in shards.shard_paths(corpus_dir, "train")]
    table, chars, counts = count.count_split(paths, cfg.max_word_types, cfg.count_flush_types)
    vocab, _ = build.learn_vocab(cfg, table, cfg.recipe, show_progress=False, chars=chars)
    return vocab, counts


def breakdown(cfg, corpus_dir: Path) -> dict:
    """CPU seconds of the build's parts, each timed alone: reading the documents, counting the word
    table (the Beam job, which reads them itself), learning with the morpheme rule (the stage's
    recipe) and without it (plain WordPiece, the same learner); and HF's trainer on the
    same counts (:func:`hf_learn`)."""
    from kolectra.core.config import override
    from kolectra.corpus import shards
    from kolectra.vocab import build, count, words

    _, read_cpu, _ = timed(lambda: sum(1 for _ in words.iter_docs(corpus_dir, "train")))
    paths = [str(p) for p in shards.shard_paths(corpus_dir, "train")]
    _, count_cpu, (table, chars, _) = timed(count.count_split, paths, cfg.max_word_types, cfg.count_flush_types)
    _, learn_cpu, _ = timed(lambda: build.learn_vocab(cfg, table, cfg.recipe, False, chars))
    plain = override(cfg, ["recipe=wordpiece"])
    _, plain_cpu, _ = timed(lambda: build.learn_vocab(plain, table, "wordpiece", False, chars))
    _, hf_cpu, _ = timed(hf_learn, cfg, table)
    return {"read_documents_cpu_s": round(read_cpu, 2), "count_words_cpu_s": round(count_cpu, 2),
            "learn_cpu_s": round(learn_cpu, 2), "learn_unconstrained_cpu_s": round(plain_cpu, 2),
            "hf_learn_same_counts_cpu_s": round(hf_cpu, 2)}


def hf_learn(cfg, table):
    """HF's WordPieceTrainer on the word table: every word as often as counted (words hold no
    whitespace, so splitting on it gives them back), without the morpheme cuts."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    merged: dict[str, int] = {}
    for (word, _), n in table.items():
        merged[word] = merged.get(word, 0) + n
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    specials = list(SPECIALS) + [f"[unused{i}]" for i in range(cfg.num_unused)]
    trainer = trainers.WordPieceTrainer(vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency,
                                        limit_alphabet=cfg.limit_alphabet, special_tokens=specials,
                                        show_progress=False)
    tok.train_from_iterator((" ".join([w] * n) for w, n in merged.items()), trainer=trainer)
    return tok


def hf_build(cfg, corpus_dir: Path):
    from tokenizers import Tokenizer, models, trainers

    from kolectra.vocab import words

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = words.runtime_normalizer()
    tok.pre_tokenizer = words.runtime_pre_tokenizer()
    specials = list(SPECIALS) + [f"[unused{i}]" for i in range(cfg.num_unused)]
    trainer = trainers.WordPieceTrainer(vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency,
                                        limit_alphabet=cfg.limit_alphabet, special_tokens=specials,
                                        show_progress=False)
    tok.train_from_iterator((d["text"] for d in words.iter_docs(corpus_dir, "train")), trainer=trainer)
    return tok


def quality(cfg, corpus_dir: Path) -> dict:
    """The vocab report's headline figures, ours against plain WordPiece (held-out split)."""
    from kolectra.core.config import override
    from kolectra.corpus import shards
    from kolectra.vocab import count, export, report, words
    from kolectra.vocab.build import learn_vocab

    paths = [str(p) for p in shards.shard_paths(corpus_dir, "train")]
    table, chars, _ = count.count_split(paths, cfg.max_word_types, cfg.count_flush_types)
    toks = {r: export.make_tokenizer(learn_vocab(override(cfg, [f"recipe={r}"]), table, r, False, chars)[0])
            for r in ("morph_wordpiece", "wordpiece")}
    m = report.measure(toks, words.iter_docs(corpus_dir, "valid"), show_words=0)["recipes"]
    keys = ("unk_rate", "tokens_per_eojeol", "morph_boundary_share", "words_kept_whole")
    return {r: {k: fig[k] for k in keys} for r, fig in m.items()}


def side(name: str, corpus_dir: Path) -> None:
    """One build in this process (``--side``): prints its entries, words, CPU seconds and peak RSS."""
    from kolectra.vocab.config import VocabConfig

    cfg = VocabConfig()
    wall, cpu, out = timed(kolectra_build if name == "ours" else hf_build, cfg, corpus_dir)
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    entries, counts = (len(out[0]), out[1]) if name == "ours" else (out.get_vocab_size(), {})
    print(json.dumps({"entries": entries, "counts": counts, "wall_s": wall, "cpu_s": cpu,
                      "peak_rss_mb": round(max(own.ru_maxrss, kids.ru_maxrss) / 1024, 1)}))


def learn_side(name: str, table_file: Path) -> None:
    """One learner in this process (``--side learn-ours|learn-hf``) on the pickled table: its CPU
    seconds and peak RSS, and the RSS with the table alone loaded."""
    from kolectra.vocab import build
    from kolectra.vocab.config import VocabConfig

    cfg = VocabConfig()
    with open(table_file, "rb") as f:
        table, chars, _ = pickle.load(f)
    loaded = _rss_mb("VmRSS")
    _reset_peak_rss()  # the unpickling's peak is no learner's
    if name == "learn-ours":
        _, cpu, (vocab, _) = timed(build.learn_vocab, cfg, table, cfg.recipe, False, chars)
    else:
        _, cpu, tok = timed(hf_learn, cfg, table)
        vocab = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    print(json.dumps({"cpu_s": round(cpu, 2), "entries": len(vocab), "table_rss_mb": loaded,
                      "peak_rss_mb": _rss_mb("VmHWM"),
                      "vocab_sha256": hashlib.sha256("\n".join(vocab).encode()).hexdigest()}))


def _rss_mb(field: str) -> float | None:
    """This process's resident set (``VmRSS``) or its peak (``VmHWM``) in MB, from /proc (Linux)."""
    try:
        with open("/proc/self/status") as f:
            return next(round(int(line.split()[1]) / 1024, 1) for line in f if line.startswith(field + ":"))
    except (OSError, StopIteration):
        return None


def _reset_peak_rss() -> None:
    """Set ``VmHWM`` back to the current resident set (Linux 4.0+; elsewhere it keeps the load's peak)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def learner_only(cfg, corpus_dir: Path | None, table_file: Path, repeats: int, source: str) -> None:
    """``--learner``: the word table counted once (kept in ``table_file``), then the two learners in
    processes of their own, alternated (ours, HF, HF, ours, ...)."""
    from kolectra.corpus import shards
    from kolectra.vocab import count

    if not table_file.exists():
        paths = [str(p) for p in shards.shard_paths(corpus_dir, "train")]
        print(f"counting the words of {len(paths)} shard(s) (not timed)", file=sys.stderr, flush=True)
        table, chars, counts = count.count_split(paths, cfg.max_word_types, cfg.count_flush_types)
        with open(table_file, "wb") as f:
            pickle.dump((dict(table), dict(chars), counts), f, protocol=pickle.HIGHEST_PROTOCOL)
        del table, chars
    with open(table_file, "rb") as f:
        counts = pickle.load(f)[2]
    runs: dict[str, list[dict]] = {"ours": [], "hf": []}
    for r in range(repeats):
        for name in ("ours", "hf") if r % 2 == 0 else ("hf", "ours"):
            out = subprocess.run([sys.executable, __file__, "--side", f"learn-{name}", "--table", str(table_file)],
                                 check=True, capture_output=True, text=True)
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"{name}: {runs[name][-1]}", file=sys.stderr, flush=True)
    if len({r["vocab_sha256"] for r in runs["ours"]}) != 1:
        raise SystemExit("benchmarks/vocab.py: our learner gave different vocabularies on the same table")
    cpu = {k: sum(r["cpu_s"] for r in rs) / len(rs) for k, rs in runs.items()}
    peak = {k: max((r["peak_rss_mb"] for r in rs if r["peak_rss_mb"] is not None), default=None) for k, rs in runs.items()}
    types = counts["word_types_kept"]
    emit("vocab_learner_throughput", "word types / learning CPU s", round(types / cpu["ours"], 1),
         "hf_tokenizers_wordpiece_trainer", round(types / cpu["hf"], 1),
         config={"corpus": source, "word_types": types, "train_words": counts["words"], "recipe": cfg.recipe,
                 "cross_morph": cfg.cross_morph, "vocab_size": cfg.vocab_size, "min_frequency": cfg.min_frequency,
                 "limit_alphabet": cfg.limit_alphabet, "repeats": repeats},
         cpu_seconds={k: [r["cpu_s"] for r in rs] for k, rs in runs.items()},
         cpu_ratio=round(cpu["hf"] / cpu["ours"], 3),
         peak_rss_mb=peak, table_rss_mb=runs["ours"][0]["table_rss_mb"],
         vocab_entries={k: rs[0]["entries"] for k, rs in runs.items()},
         method="each learner in a process of its own on the same pickled table, alternated; CPU s of the "
         "learning alone (all threads); peak RSS while learning (VmHWM reset after the table was loaded), "
         "the table's RSS beside it")


def run_side(name: str, corpus_dir: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--side", name, "--corpus", str(corpus_dir)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = parser(__doc__, "about 10 minutes on 2 cores for the NSMC reviews")
    add_data_args(p, "reviews")
    p.add_argument("--corpus", type=Path, help="an existing corpus artifact instead of the reviews: skips the Kiwi "
                   "analysis (e.g. artifacts/corpus/nsmc-1a2b3c; default: written here from the reviews)")
    p.add_argument("--learner", action="store_true", help="the learners alone, ours against HF's on one word "
                   "table, each in processes of their own (see above)")
    p.add_argument("--table", type=Path, help="with --learner: keep the counted word table in this file and read it "
                   "from there when it exists (default: a temporary file; e.g. --table /tmp/table8.pkl)")
    p.add_argument("--repeats", type=int, default=2, help="with --learner: runs of each learner (default 2)")
    p.add_argument("--side", choices=("ours", "hf", "learn-ours", "learn-hf"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side in ("learn-ours", "learn-hf"):
        return learn_side(args.side, args.table)
    if args.side:
        return side(args.side, args.corpus)
    from kolectra.vocab.config import VocabConfig

    cfg = VocabConfig()
    with tempfile.TemporaryDirectory() as tmp:
        if args.learner and args.table and args.table.exists():
            return learner_only(cfg, None, args.table, args.repeats, f"the word table in {args.table}")
        if args.corpus:
            corpus_dir, source = args.corpus, str(args.corpus)
        else:
            docs = reviews(args, QUICK_REVIEWS if args.quick else None, "benchmarks/vocab.py")
            print(f"analysing {len(docs)} reviews with Kiwi (not timed)", file=sys.stderr, flush=True)
            corpus_dir, source = write_corpus(docs, Path(tmp) / "corpus"), f"{reviews_source(args, 'benchmarks/vocab.py')} ({len(docs)} reviews)"
            del docs
        if args.learner:
            return learner_only(cfg, corpus_dir, args.table or Path(tmp) / "table.pkl", args.repeats, source)
        # interleaved, ours - HF - HF - ours, each side the mean of its two runs: the load moves
        runs = {"ours": [run_side("ours", corpus_dir)], "hf": [run_side("hf", corpus_dir)]}
        runs["hf"].append(run_side("hf", corpus_dir))
        runs["ours"].append(run_side("ours", corpus_dir))
        mean = {s: {k: sum(r[k] for r in rs) / 2 for k in ("wall_s", "cpu_s")} | {"peak_rss_mb": max(r["peak_rss_mb"] for r in rs)}
                for s, rs in runs.items()}
        ours, theirs = mean["ours"], mean["hf"]
        print(f"kolectra morph_wordpiece: {runs['ours'][0]['entries']} entries, {ours['cpu_s']:.2f} CPU s, "
              f"{ours['peak_rss_mb']} MB peak; HF WordPieceTrainer: {runs['hf'][0]['entries']} entries, "
              f"{theirs['cpu_s']:.2f} CPU s, {theirs['peak_rss_mb']} MB peak", file=sys.stderr)
        parts = breakdown(cfg, corpus_dir)
        qual = quality(cfg, corpus_dir)
    counts = runs["ours"][0]["counts"]
    n = counts["words"]
    # what HF does beyond reading the documents (its counting and merging, in Rust, threaded)
    parts["hf_beyond_reading_cpu_s"] = round(theirs["cpu_s"] - parts["read_documents_cpu_s"], 2)
    learner = {"ours_cpu_s": parts["learn_cpu_s"], "hf_cpu_s": parts["hf_learn_same_counts_cpu_s"],
               "ratio": round(parts["hf_learn_same_counts_cpu_s"] / parts["learn_cpu_s"], 3)}
    emit("vocab_build_throughput", "train words/s", round(n / ours["wall_s"], 1), "hf_tokenizers_wordpiece_trainer",
         round(n / theirs["wall_s"], 1),
         config={"quick": args.quick, "corpus": source, "train_documents": counts["documents"], "train_words": n,
                 "word_types": counts["word_types"], "recipe": cfg.recipe, "vocab_size": cfg.vocab_size,
                 "min_frequency": cfg.min_frequency, "limit_alphabet": cfg.limit_alphabet,
                 "vocab_entries": {"kolectra": runs["ours"][0]["entries"], "hf": runs["hf"][0]["entries"]}},
         seconds={"kolectra": round(ours["wall_s"], 2), "hf": round(theirs["wall_s"], 2)},
         cpu_seconds={"kolectra": round(ours["cpu_s"], 2), "hf": round(theirs["cpu_s"], 2)},
         cpu_ratio=round(theirs["cpu_s"] / ours["cpu_s"], 3) if ours["cpu_s"] else None,
         peak_rss_mb={"kolectra": ours["peak_rss_mb"], "hf": theirs["peak_rss_mb"]},
         learner=learner, breakdown=parts, workers="the count: a Beam job (the local runner's worker processes "
         "from 4 MB of shards); the learner: one process by nature, each merge depends on the last", quality=qual)


if __name__ == "__main__":
    main()
