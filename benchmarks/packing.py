"""Benchmark: packed rows (``packing=isolated``, the default) against one sequence a row (``none``).

    python benchmarks/packing.py [--quick] [--reviews GLOB | --data DIR | --corpus DIR --vocab DIR]
                                 [--preset tiny|small] [--batch-size N]

Both artifacts come from the same reviews and vocab (the examples stage itself, default Beam
options); the two figures, side by side in one run:

- the padding share of each artifact (its ``stats.json``);
- non-padding tokens trained per second (the headline): the pretraining step as the trainer runs
  it on the CPU (:func:`model.rtd.electra_step` + backward + fused AdamW, with the CPU device's
  placement: its dropout, sampler and allocator settings), fed by each artifact's loader. The
  packed step also builds the per-sequence attention bias and positions from ``doc_ids``. The two
  steps alternate (packed, unpacked, packed, ...) on one model each, the medians are compared,
  and the per-round ratios' quartiles show the spread.

``value`` is the packed step's non-padding tokens/s, ``baseline`` the unpacked one's. The step
costs about the same either way (static shapes: the same B x L positions are computed), so
the ratio is mostly the share of real tokens, which is what packing buys.

``--quick``: the first 20,000 reviews (the embedded sample's 4,000 without ``--reviews`` or
``--data``), ``tiny`` preset, 5 timed rounds (about a minute on 2 cores).
Full: all reviews, ``small`` preset, 7 timed rounds; about 15 minutes on 2 cores for the 662,404
NSMC reviews (a step of the ``small`` preset at batch 32 takes about 38 s there).
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from common import add_data_args, emit, parser, reviews_source
from examples import QUICK_REVIEWS, reviews, train_vocab, write_corpus


def build_examples(corpus_dir: Path, vocab_dir: Path, out: Path, packing: str) -> dict:
    from kolectra.corpus.examples import build
    from kolectra.corpus.examples_config import ExamplesConfig

    out.mkdir(parents=True)
    return build(ExamplesConfig(packing=packing), corpus_dir, vocab_dir, out).stats


class Trainer:
    """One model, optimizer and loader: the CPU trainer's step on one examples artifact."""

    def __init__(self, examples_dir: Path, preset: str, batch_size: int):
        import torch

        from kolectra.model import objectives, presets, rtd
        from kolectra.model.data import ExampleLoader
        from kolectra.model.device import Device
        from kolectra.model.electra import ElectraPair
        from kolectra.model.train import build_optimizer

        cfg = presets.preset(preset)
        self.loader = ExampleLoader(examples_dir, batch_size=batch_size, seed=0)
        vocab = self.loader.index.vocab_size
        self.sp = rtd.Specials(vocab_size=vocab)
        self.obj, self.rtd, self.torch = cfg.objective, rtd, torch
        torch.manual_seed(0)
        self.dev = Device()
        self.model = self.dev.place(ElectraPair(dataclasses.replace(cfg.model, vocab_size=vocab), vocab, 0).train())
        self.opt = build_optimizer(self.model, cfg.train, fused=True)
        self.step_fn = objectives.step_function(cfg.objective.objective)

    def step(self) -> tuple[float, int]:
        """(seconds, non-padding tokens) of one optimizer step."""
        torch = self.torch
        b = {k: torch.from_numpy(v) for k, v in next(self.loader).items()}
        t0 = time.perf_counter()
        norm = self.rtd.normalizers(b["input_ids"], self.sp, self.obj.mask_prob)
        out = self.step_fn(self.model, b["input_ids"], b["token_type_ids"], self.sp, self.obj, norm, b.get("doc_ids"))
        out.loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0, int((b["input_ids"] != 0).sum())

    def close(self) -> None:
        self.loader.close()
        self.dev.close()


def main() -> None:
    p = parser(__doc__, "about 15 minutes on 2 cores for the NSMC reviews")
    add_data_args(p, "reviews")
    p.add_argument("--corpus", type=Path, help="a corpus artifact (default: written here from the reviews)")
    p.add_argument("--vocab", type=Path, help="a vocab artifact (default: trained here)")
    p.add_argument("--preset", help="pretraining preset (default: tiny with --quick, else small)")
    p.add_argument("--batch-size", type=int, default=32, help="rows a step (default 32)")
    p.add_argument("--rounds", type=int, help="timed rounds (default: 5 with --quick, else 7)")
    args = p.parse_args()
    from kolectra.core.stage import progress

    preset = args.preset or ("tiny" if args.quick else "small")
    rounds = args.rounds or (5 if args.quick else 7)
    with tempfile.TemporaryDirectory(prefix="kolectra-bench-packing-") as tmp:
        tmp = Path(tmp)
        docs = None
        if args.corpus is None or args.vocab is None:
            docs = reviews(args, QUICK_REVIEWS if args.quick else None, "benchmarks/packing.py")
            progress(f"bench: {len(docs)} reviews")
        corpus_dir = args.corpus or write_corpus(docs, tmp / "corpus")
        vocab_dir = args.vocab or train_vocab(docs, tmp / "vocab")
        stats = {packing: build_examples(corpus_dir, vocab_dir, tmp / packing, packing) for packing in ("isolated", "none")}
        trainers = {packing: Trainer(tmp / packing, preset, args.batch_size) for packing in stats}
        times = {k: [] for k in trainers}
        tokens = {k: [] for k in trainers}
        for r in range(rounds + 1):  # round 0 warms up (allocations, lazy init)
            for name, trainer in trainers.items():
                s, n = trainer.step()
                if r:
                    times[name].append(s)
                    tokens[name].append(n)
        for trainer in trainers.values():
            trainer.close()
    rate = {k: statistics.median(n / s for n, s in zip(tokens[k], times[k])) for k in trainers}
    per_round = sorted((a / sa) / (b / sb) for a, sa, b, sb in zip(tokens["isolated"], times["isolated"],
                                                                    tokens["none"], times["none"]))
    emit("packing", "non-padding tokens/s", round(rate["isolated"]), "one sequence a row (packing=none)",
         round(rate["none"]),
         {"reviews": len(docs) if docs else None, "corpus": str(args.corpus or f"{reviews_source(args, 'benchmarks/packing.py')} (punctuation sentences)"),
          "preset": preset, "batch_size": args.batch_size, "seq_len": 128, "rounds": rounds, "quick": args.quick,
          "statistic": "median", "interleaved": True, "device": "cpu"},
         padding_share={k: s["padding_share"] for k, s in stats.items()},
         examples={k: s["examples"] for k, s in stats.items()}, sequences=stats["isolated"]["sequences"],
         step_seconds={k: round(statistics.median(v), 4) for k, v in times.items()},
         ratio_per_round_quartiles=[round(q, 3) for q in statistics.quantiles(per_round, n=4)] if len(per_round) > 1
         else per_round)


if __name__ == "__main__":
    main()
