"""Benchmark of the examples stage and the pretraining loader.

Figures, all on NSMC movie reviews (``--reviews GLOB`` or ``--data DIR``; see ``benchmarks/common.py``):

- headline: tokens/s of the examples stage's Beam job (:func:`corpus.examples.build`, default
  runner options: in-process FnApiRunner, worker processes by input size) against a plain
  single-process loop over the same pure core (read documents, ``encode_batch_fast``
  ``batch_documents`` at a time, :func:`pack_document`, :func:`fill_rows`, :func:`encode_rows`,
  one Arrow file a shard) — what the stage would be without Beam. Both write the same rows.
  The aim (issue 19) is at least 0.9 of the plain loop per worker: ``ratio_per_worker`` is
  the ratio over the number of Beam workers. On a shared machine the wall clock says little
  about a worker's share of the cores, so ``cpu_ratio`` compares CPU seconds (all processes,
  the workers included): the plain loop's over Beam's, the work Beam adds per unit of output.
  The plain loop runs twice, before and after the Beam runs (the mean is the baseline).
- fixed costs and 2 workers: the same job on the first 50 documents of each shard with 1 and 2 workers
  (``fixed_cost_cpu_s``: Beam's graph and runner, the tokenizer load; with 2, two worker
  processes that start Python and import Beam), and the whole job again with
  ``--direct_num_workers=2``: ``speedup_2_workers_cpu_bound`` = 2 x CPU(1 worker) / CPU(2
  workers), the speedup two idle cores would give, and ``..._steady`` the same without the fixed
  costs; ``cpu_ratio_steady`` compares the plain loop with Beam's 1-worker run less its fixed
  cost. Both Beam runs must write the same examples. A first, untimed run on those 50 documents
  pays the imports Beam makes on its first job in a process, which the CLI pays once per command.
- ``loader``: batches/s of :class:`model.data.ExampleLoader` (memory-mapped, shuffled, with
  prefetch) at the ``small`` preset's batch (128 x 128) against the steps/s the trainer
  consumes at that preset on this machine's CPU (:func:`model.rtd.electra_step` + backward +
  AdamW on real batches). The aim is a loader at least 20x faster than the trainer.

Inputs: ``--corpus`` / ``--vocab`` artifact directories, or (default) a corpus written here from
the reviews — sentence spans from a punctuation splitter rather than Kiwi, since the examples
stage reads only sentences (never morphemes) and Kiwi would dominate the set-up time — and a
WordPiece vocab trained here with HF ``tokenizers`` on kolectra's normaliser and pre-tokeniser.

    python benchmarks/examples.py [--quick] [--reviews GLOB | --data DIR | --corpus DIR --vocab DIR]
                                  [--beam-arg=--direct_num_workers=2]

``--quick``: the first 20,000 reviews (the embedded sample's 4,000 without ``--reviews`` or
``--data``), 2 timed trainer steps of 8 examples (scaled to 128); about a minute on 2 cores.
Full: all reviews, 3 timed trainer steps of the full 128 examples; about 10 minutes on 2 cores
for the 662,404 NSMC reviews.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from common import add_data_args, emit, parser, reviews_source, timed
from common import reviews as common_reviews

from kolectra.core.tokens import SPECIALS

QUICK_REVIEWS = 20_000
CORPUS_SHARDS = 4  # as the corpus stage's default
_SENTENCE_END = re.compile(r"(?<=[.!?…~])\s+")


def beam_workers(beam_args: list[str], corpus_dir: Path) -> int:
    """The worker processes the stage runs with these options (as :func:`corpus.examples.build`)."""
    from apache_beam.options.pipeline_options import DirectOptions

    from kolectra.corpus import shards
    from kolectra.corpus.runners import input_bytes, pipeline_options

    paths = [str(p) for p in shards.shard_paths(corpus_dir, "train")]
    return pipeline_options(list(beam_args), input_bytes(paths)).view_as(DirectOptions).direct_num_workers or 1


def reviews(args, limit: int | None, who: str = "benchmarks/examples.py") -> list[tuple[str, str]]:
    return common_reviews(args, limit, who)


def write_corpus(docs: list[tuple[str, str]], corpus_dir: Path) -> Path:
    """Store-format train shards (sentence spans from punctuation, no morphemes)."""
    from kolectra.corpus import shards

    (corpus_dir / shards.DATA_DIR).mkdir(parents=True)
    files = [gzip.open(corpus_dir / shards.DATA_DIR / f"train-{i:05d}-of-{CORPUS_SHARDS:05d}.jsonl.gz", "wt",
                       encoding="utf-8", compresslevel=1) for i in range(CORPUS_SHARDS)]
    for n, (doc_id, text) in enumerate(docs):
        spans, start = [], 0
        for m in _SENTENCE_END.finditer(text):
            spans.append([start, m.start()])
            start = m.end()
        spans.append([start, len(text)])
        files[n % CORPUS_SHARDS].write(json.dumps({"id": doc_id, "source": "nsmc", "text": text, "sentences": spans,
                                                   "morphs": []}, ensure_ascii=False) + "\n")
    for f in files:
        f.close()
    return corpus_dir


def train_vocab(docs: list[tuple[str, str]], vocab_dir: Path, vocab_size: int = 32_000) -> Path:
    from tokenizers import Tokenizer, models, trainers

    from kolectra.vocab import words

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = words.runtime_normalizer()
    tok.pre_tokenizer = words.runtime_pre_tokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIALS),
                                        show_progress=False)
    tok.train_from_iterator((t for _, t in docs), trainer=trainer)
    vocab_dir.mkdir(parents=True)
    tok.save(str(vocab_dir / "tokenizer.json"))
    return vocab_dir


def plain_loop(cfg, corpus_dir: Path, vocab_dir: Path, out_dir: Path) -> dict:
    """The baseline: one process, no Beam, the same pure functions and the same rows (the
    default ``packing=isolated``): read documents, ``encode_batch_fast`` ``batch_documents`` at a
    time, :func:`pack_document`, :func:`fill_rows`, :func:`encode_rows`, one Arrow file a shard."""
    from kolectra.corpus import shards
    from kolectra.corpus.examples import load_tokenizer
    from kolectra.corpus.examples_format import arrow_bytes
    from kolectra.corpus.packing import (
        Sequences,
        doc_rng,
        encode_rows,
        fill_rows,
        ids_dtype,
        one_per_row,
        pack_document,
    )

    tok = load_tokenizer(vocab_dir)
    dtype = ids_dtype(tok.get_vocab_size())
    out_dir.mkdir(parents=True)
    tokens = examples = 0
    for i, path in enumerate(shards.shard_paths(corpus_dir, cfg.split)):
        pairs, lines, ks, batch = [], [], [], []

        def flush():
            flat = [s for _, _, ss in batch for s in ss]
            encs = tok.encode_batch_fast(flat, add_special_tokens=False)
            k = 0
            for line, doc_id, ss in batch:
                doc = pack_document([e.ids for e in encs[k:k + len(ss)]], cfg, doc_rng(cfg.seed, doc_id))[0]
                pairs.extend(doc)
                lines.extend([line] * len(doc))
                ks.extend(range(len(doc)))
                k += len(ss)
            batch.clear()

        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                doc = json.loads(line)
                batch.append((line_no, str(doc["id"]), shards.sentences(doc)))
                if len(batch) == cfg.batch_documents:
                    flush()
        if batch:
            flush()
        seqs = Sequences.from_pairs(pairs, lines, ks, dtype)
        place = (fill_rows if cfg.packing == "isolated" else lambda n, _: one_per_row(n))(seqs.lengths(), cfg.max_seq_length)
        ids, types, docs = encode_rows(seqs, place, cfg.max_seq_length, dtype)
        (out_dir / f"shard-{i:05d}.arrow").write_bytes(arrow_bytes(ids, types, docs))
        tokens += int((ids != 0).sum())
        examples += len(ids)
    return {"tokens": tokens, "examples": examples}


def beam_run(cfg, corpus_dir: Path, vocab_dir: Path, out_dir: Path, beam_args: list[str]) -> tuple[float, float, dict]:
    """(wall, CPU seconds, stats) of one run of the stage's Beam job."""
    from kolectra.corpus.examples import build

    out_dir.mkdir(parents=True)
    wall, cpu, art = timed(build, cfg, corpus_dir, vocab_dir, out_dir, beam_args)
    return wall, cpu, art.stats


def head_corpus(corpus_dir: Path, n: int, dest: Path) -> Path:
    """A corpus of the first ``n`` lines of each train shard of ``corpus_dir`` (the fixed-cost runs)."""
    from kolectra.corpus import shards

    (dest / shards.DATA_DIR).mkdir(parents=True)
    for path in shards.shard_paths(corpus_dir, "train"):
        with gzip.open(path, "rt", encoding="utf-8") as f, \
                gzip.open(dest / shards.DATA_DIR / path.name, "wt", encoding="utf-8", compresslevel=1) as out:
            for _, line in zip(range(n), f):
                out.write(line)
    return dest


def loader_rate(examples_dir: Path, batch_size: int, batches: int) -> float:
    from kolectra.model.data import ExampleLoader

    loader = ExampleLoader(examples_dir, batch_size=batch_size, seed=0)
    next(loader)  # page in, start the prefetch thread
    t0 = time.perf_counter()
    for _ in range(batches):
        next(loader)
    rate = batches / (time.perf_counter() - t0)
    loader.close()
    return rate


def trainer_rate(examples_dir: Path, vocab_size: int, steps: int, micro_batch: int) -> tuple[float, dict]:
    """Steps/s of a real RTD training step at the ``small`` preset on CPU, fed by the loader.

    Timed on ``micro_batch`` examples a step and scaled to the preset's batch: CPU time of a
    step grows linearly with the batch (the quick run cannot afford full 128-example steps)."""
    import dataclasses

    import torch

    from kolectra.model import presets, rtd
    from kolectra.model.data import ExampleLoader
    from kolectra.model.electra import ElectraPair
    from kolectra.model.train import build_optimizer

    cfg = presets.preset("small")
    sp = rtd.Specials(vocab_size=vocab_size)
    torch.manual_seed(0)
    model = ElectraPair(dataclasses.replace(cfg.model, vocab_size=vocab_size), vocab_size, sp.pad_id).train()
    opt = build_optimizer(model, cfg.train)
    loader = ExampleLoader(examples_dir, batch_size=micro_batch, seed=0)
    t0 = 0.0
    for i in range(steps + 1):  # the first step warms up (allocations, lazy init)
        if i == 1:
            t0 = time.perf_counter()
        b = next(loader)
        doc = torch.from_numpy(b["doc_ids"]) if "doc_ids" in b else None
        loss = rtd.electra_step(model, torch.from_numpy(b["input_ids"]), torch.from_numpy(b["token_type_ids"]),
                                sp, cfg.objective, doc_BL=doc).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    loader.close()
    rate = steps / (time.perf_counter() - t0) * micro_batch / cfg.train.batch_size
    return rate, {"preset": "small", "batch_size": cfg.train.batch_size, "measured_micro_batch": micro_batch,
                  "timed_steps": steps, "torch_threads": torch.get_num_threads()}


def main() -> None:
    p = parser(__doc__, "about 10 minutes on 2 cores for the NSMC reviews")
    add_data_args(p, "reviews")
    p.add_argument("--corpus", type=Path, help="a corpus artifact (default: written here from the reviews)")
    p.add_argument("--vocab", type=Path, help="a vocab artifact (default: trained here)")
    p.add_argument("--beam-arg", action="append", default=[],
                   help="a Beam pipeline option for the stage (repeatable; e.g. --beam-arg=--direct_num_workers=2)")
    p.add_argument("--max-seq-length", type=int, default=128, help="row length in tokens (default 128)")
    args = p.parse_args()

    from kolectra.core.stage import progress
    from kolectra.corpus.examples_config import ExamplesConfig

    limit = QUICK_REVIEWS if args.quick else None
    with tempfile.TemporaryDirectory(prefix="kolectra-bench-examples-") as tmp:
        tmp = Path(tmp)
        docs = None
        if args.corpus is None or args.vocab is None:
            docs = reviews(args, limit)
            progress(f"bench: {len(docs)} reviews")
        corpus_dir = args.corpus or write_corpus(docs, tmp / "corpus")
        vocab_dir = args.vocab or train_vocab(docs, tmp / "vocab")
        cfg = ExamplesConfig(max_seq_length=args.max_seq_length, allow_other_corpus_vocab=args.vocab is None)

        workers = beam_workers(args.beam_arg, corpus_dir)
        two_args = [a for a in args.beam_arg if not a.startswith("--direct_num_workers")] + ["--direct_num_workers=2"]
        # a first Beam job in a process imports parts of Beam lazily: pay that before timing anything
        head = head_corpus(corpus_dir, 50, tmp / "head")
        beam_run(cfg, head, vocab_dir, tmp / "warm-up", args.beam_arg)
        # interleaved: Beam, plain, Beam with 2 workers, plain again (the load moves)
        beam_s, beam_cpu, stats = beam_run(cfg, corpus_dir, vocab_dir, tmp / "beam", args.beam_arg)
        *plain_a, plain = timed(plain_loop, cfg, corpus_dir, vocab_dir, tmp / "plain")
        beam2_s, beam2_cpu, stats2 = beam_run(cfg, corpus_dir, vocab_dir, tmp / "beam2", two_args)
        *plain_b, _ = timed(plain_loop, cfg, corpus_dir, vocab_dir, tmp / "plain2")
        plain_s, plain_cpu = (plain_a[0] + plain_b[0]) / 2, (plain_a[1] + plain_b[1]) / 2
        _, fixed_cpu, _ = beam_run(cfg, head, vocab_dir, tmp / "fixed1", args.beam_arg)
        _, fixed2_cpu, _ = beam_run(cfg, head, vocab_dir, tmp / "fixed2", two_args)
        if plain["tokens"] != stats["tokens"] or plain["examples"] != stats["examples"]:
            sys.exit(f"benchmarks/examples.py: the baseline wrote other examples ({plain} vs {stats})")
        if stats2 != stats:
            sys.exit(f"benchmarks/examples.py: 2 workers wrote other examples ({stats2} vs {stats})")

        from kolectra.model.data import read_index

        index = read_index(tmp / "beam")
        batch = 128
        loader_bps = loader_rate(tmp / "beam", batch, 200 if args.quick else 1000)
        trainer_sps, trainer_cfg = trainer_rate(tmp / "beam", index.vocab_size, 2 if args.quick else 3,
                                                8 if args.quick else batch)

    value = stats["tokens"] / beam_s
    baseline = plain["tokens"] / plain_s
    emit("examples_build", "tokens/s", round(value), "plain single-process loop", round(baseline),
         {"reviews": len(docs) if docs else None, "corpus": str(args.corpus or f"{reviews_source(args, 'benchmarks/examples.py')} (punctuation sentences)"),
          "max_seq_length": cfg.max_seq_length, "beam_args": args.beam_arg, "quick": args.quick,
          "examples": stats["examples"], "tokens": stats["tokens"], "padding_share": stats["padding_share"],
          "packing": cfg.packing, "beam_seconds": round(beam_s, 2), "plain_seconds": round(plain_s, 2),
          "workers": workers},
         ratio_per_worker=round(value / baseline / workers, 3),
         cpu_seconds={"beam": round(beam_cpu, 2), "plain": round(plain_cpu, 2), "beam_2_workers": round(beam2_cpu, 2),
                      "plain_runs": [round(plain_a[1], 2), round(plain_b[1], 2)]},
         cpu_ratio=round(plain_cpu / beam_cpu, 3),
         fixed_cost_cpu_s={"1_worker": round(fixed_cpu, 2), "2_workers": round(fixed2_cpu, 2)},
         cpu_ratio_steady=round(plain_cpu / (beam_cpu - fixed_cpu), 3) if beam_cpu > fixed_cpu else None,
         beam_2_workers_seconds=round(beam2_s, 2),
         speedup_2_workers=round(beam_s / beam2_s, 3),
         speedup_2_workers_cpu_bound=round(2 * beam_cpu / beam2_cpu, 3),
         speedup_2_workers_cpu_bound_steady=round(2 * (beam_cpu - fixed_cpu) / (beam2_cpu - fixed2_cpu), 3)
         if beam2_cpu > fixed2_cpu else None,
         loader={"unit": "batches/s", "value": round(loader_bps, 1), "batch_size": batch,
                 "seq_len": index.max_seq_length,
                 "baseline": {"name": "trainer steps/s at the small preset (CPU)", "value": round(trainer_sps, 4),
                              **trainer_cfg},
                 "ratio": round(loader_bps / trainer_sps, 1), "aim": 20})


if __name__ == "__main__":
    main()
