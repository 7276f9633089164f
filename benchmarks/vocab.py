"""Benchmark of the vocab stage: vocabulary build throughput against HF ``tokenizers``.

Figure: training words per second through a whole vocabulary build at the default size (35,000,
``min_frequency`` 2, 3,000 alphabet characters) on NSMC movie reviews —
kolectra's ``morph_wordpiece`` (stream the corpus into the morpheme-annotated word table, then
the pure-Python morpheme-constrained learner, :mod:`vocab.trainer`) against the HF
``tokenizers`` ``WordPieceTrainer`` (Rust, multi-threaded) on the same texts with the same
normaliser and pre-tokeniser. The baseline cannot do what ours does (it has no hook to keep
merges inside morphemes), so the ratio says what the constraint costs in build time; the
quality side (share of cuts on morpheme boundaries, tokens per eojeol, against plain WordPiece)
is printed in the same line under ``quality``. Kiwi's morpheme analysis is the corpus stage's
work and is not timed (give ``--corpus`` a corpus artifact to skip it).

CPU seconds (this process, the HF trainer's threads included) are reported beside the wall
times, since a shared machine disturbs them less: ``cpu_ratio`` is HF's CPU over ours for the
same build. ``breakdown`` splits both into the work they share (reading and parsing the corpus
documents) and the rest: for ours, counting the word table (the runtime pre-tokeniser per
document, plus the morpheme cuts of every word: work HF does not do) and learning; for
``wordpiece_unconstrained``, the same learner without the morpheme rule, which separates what
the rule costs from what a pure-Python learner costs against HF's Rust. The learner is one
process by nature: a sequence of merges, each depending on the last (HF's trainer, in Rust, runs
threads inside its one process). The count is the stage's own (:mod:`vocab.count`): the corpus is
written in 4 train shards, as the corpus stage writes it, and from 8 MB of them runs of shards are
counted in processes of their own, whose CPU time the figures include; the 20,000 reviews of
``--quick`` stay in one process.

    python benchmarks/vocab.py [--quick] [--reviews GLOB | --data DIR | --corpus CORPUS_DIR]

``--quick``: the first 20,000 reviews of ``--reviews`` (or ``--data``), else the embedded sample's
4,000 (about a minute on 2 cores). Full: every review given, about 10 minutes on 2 cores for the
662,404 NSMC reviews (Kiwi's analysis about 5 of them, untimed; both builds and the quality
figures the rest).
"""

from __future__ import annotations

import gzip
import json
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
    from kolectra.vocab import build, count

    table, counts, _ = count.count_split(corpus_dir, "train", cfg.max_word_types, build._cpus())
    vocab, _ = build.learn_vocab(cfg, table, cfg.recipe)
    return vocab, counts


def breakdown(cfg, corpus_dir: Path) -> dict:
    """CPU seconds of the build's parts, each timed alone: reading the documents (which both
    builds do), counting the word table from them, learning with the morpheme rule (the stage's
    recipe) and without it (plain WordPiece, the same pure-Python learner)."""
    from kolectra.core.config import override
    from kolectra.vocab import build, words

    _, read_cpu, docs = timed(lambda: list(words.iter_docs(corpus_dir, "train")))
    _, count_cpu, (table, _) = timed(words.count_words, docs, cfg.max_word_types)
    _, learn_cpu, _ = timed(build.learn_vocab, cfg, table, cfg.recipe)
    _, plain_cpu, _ = timed(build.learn_vocab, override(cfg, ["recipe=wordpiece"]), table, "wordpiece")
    return {"read_documents_cpu_s": round(read_cpu, 2), "count_words_cpu_s": round(count_cpu, 2),
            "learn_cpu_s": round(learn_cpu, 2), "learn_unconstrained_cpu_s": round(plain_cpu, 2)}


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
    from kolectra.vocab import export, report, words
    from kolectra.vocab.build import learn_vocab

    table, _ = words.count_words(words.iter_docs(corpus_dir, "train"), cfg.max_word_types)
    toks = {r: export.make_tokenizer(learn_vocab(override(cfg, [f"recipe={r}"]), table, r)[0])
            for r in ("morph_wordpiece", "wordpiece")}
    m = report.measure(toks, words.iter_docs(corpus_dir, "valid"), show_words=0)["recipes"]
    keys = ("unk_rate", "tokens_per_eojeol", "morph_boundary_share", "words_kept_whole")
    return {r: {k: fig[k] for k in keys} for r, fig in m.items()}


def main() -> None:
    p = parser(__doc__, "about 10 minutes on 2 cores for the NSMC reviews")
    add_data_args(p, "reviews")
    p.add_argument("--corpus", type=Path, help="an existing corpus artifact instead of the reviews: skips the Kiwi "
                   "analysis (e.g. artifacts/corpus/nsmc-1a2b3c; default: written here from the reviews)")
    args = p.parse_args()
    from kolectra.vocab.config import VocabConfig

    cfg = VocabConfig()
    with tempfile.TemporaryDirectory() as tmp:
        if args.corpus:
            corpus_dir, source = args.corpus, str(args.corpus)
        else:
            docs = reviews(args, QUICK_REVIEWS if args.quick else None, "benchmarks/vocab.py")
            print(f"analysing {len(docs)} reviews with Kiwi (not timed)", file=sys.stderr, flush=True)
            corpus_dir, source = write_corpus(docs, Path(tmp) / "corpus"), f"{reviews_source(args, 'benchmarks/vocab.py')} ({len(docs)} reviews)"
            del docs
        # interleaved, ours - HF - HF - ours, each side the mean of its two runs: the load moves
        ours_a, ours_cpu_a, (vocab, counts) = timed(kolectra_build, cfg, corpus_dir)
        theirs_a, theirs_cpu_a, hf = timed(hf_build, cfg, corpus_dir)
        theirs_b, theirs_cpu_b, _ = timed(hf_build, cfg, corpus_dir)
        ours_b, ours_cpu_b, _ = timed(kolectra_build, cfg, corpus_dir)
        ours, theirs = (ours_a + ours_b) / 2, (theirs_a + theirs_b) / 2
        ours_cpu, theirs_cpu = (ours_cpu_a + ours_cpu_b) / 2, (theirs_cpu_a + theirs_cpu_b) / 2
        print(f"kolectra morph_wordpiece: {len(vocab)} entries in {ours:.2f} s ({ours_cpu:.2f} CPU s); "
              f"HF WordPieceTrainer: {hf.get_vocab_size()} entries in {theirs:.2f} s ({theirs_cpu:.2f} CPU s)",
              file=sys.stderr)
        parts = breakdown(cfg, corpus_dir)
        qual = quality(cfg, corpus_dir)
    n = counts["words"]
    # what HF does beyond reading the documents (its counting and merging, in Rust, threaded)
    parts["hf_beyond_reading_cpu_s"] = round(theirs_cpu - parts["read_documents_cpu_s"], 2)
    emit("vocab_build_throughput", "train words/s", round(n / ours, 1), "hf_tokenizers_wordpiece_trainer",
         round(n / theirs, 1),
         config={"quick": args.quick, "corpus": source, "train_documents": counts["documents"], "train_words": n,
                 "word_types": counts["word_types"], "recipe": cfg.recipe, "vocab_size": cfg.vocab_size,
                 "min_frequency": cfg.min_frequency, "limit_alphabet": cfg.limit_alphabet,
                 "vocab_entries": {"kolectra": len(vocab), "hf": hf.get_vocab_size()}},
         seconds={"kolectra": round(ours, 2), "hf": round(theirs, 2)},
         cpu_seconds={"kolectra": round(ours_cpu, 2), "hf": round(theirs_cpu, 2)},
         cpu_ratio=round(theirs_cpu / ours_cpu, 3) if ours_cpu else None,
         breakdown=parts, workers="the count: a run of shards per process from 8 MB of them; the learner: one "
         "process by nature, each merge depends on the last", quality=qual)


if __name__ == "__main__":
    main()
