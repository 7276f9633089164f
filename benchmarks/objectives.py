"""Benchmark: the cost of each pretraining objective and recipe against ELECTRA's, side by side.

    python benchmarks/objectives.py [--quick] [--device cpu|cuda] [--threads N] [--arms A,B,...]

Every arm (a ``kolectra study`` arm: an objective with optional recipe switches, e.g. ``hybrid``,
``mlm+mask0.3``, ``electra+gen1.0``) is built at the ``mini`` shape (8k vocabulary, sequences of
128) with the trainer's own pieces: the device's placement (on the CPU its sampler and dropout),
fused AdamW, the objective's step function with its scheduled values (:func:`model.objectives.knobs`)
computed on the device. The arms are stepped in turn, round after round (order reversed every other
round, against drift on a shared machine), and each arm's median step time gives its tokens/s. Beside
it, each arm's training FLOPs per step by the trainer's count (what sets its steps in a study) and
both as ratios to ELECTRA's: ``time_ratio`` = step time / ELECTRA's, ``flops_ratio`` = FLOPs /
ELECTRA's. A ``time_ratio`` well above ``flops_ratio`` says the arm spends time the FLOPs count
does not see (softmaxes, sampling, the copy mixture), which an equal-FLOPs study does not charge it.

The headline ``value`` is the tokens/s of the slowest of the RTD family's new objectives (hybrid,
corrective, mlm_then_rtd), ``baseline`` ELECTRA's; every arm's figures are in ``results``.
``--quick``: batch 16 and 8 timed rounds, about a minute on 2 cores with one thread; the full
size: batch 32 (``mini``'s) and 15 rounds, about 2 minutes. No data is read: the batches are random token ids.
Each arm runs in a process of its own (``step_bench.Served``: forked from a server that imported
torch once), as ``pretrain.py``'s steps do: in one process the
arms would share glibc's heap, and one arm's allocations would decide whether another's large
tensors come from reused memory or fresh pages (in a first one-process version ELECTRA with a
temperature schedule, the same step plus a softmax, timed 21 % faster than ELECTRA).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time

import torch
from common import emit, parser
from step_bench import Served

from kolectra.core.config import override
from kolectra.model import objectives, presets, rtd
from kolectra.model.electra import ElectraPair, flops_by_part
from kolectra.model.runtime import resolve
from kolectra.model.train import build_optimizer
from kolectra.pipeline.study.plan import arm_sets

ARMS = ("electra", "hybrid", "corrective", "mlm_then_rtd", "mlm", "mlm+mask0.3", "electra+mask0.25",
        "electra+gen0.5", "electra+gen1.0", "electra+temp2")
NEW = ("hybrid", "corrective", "mlm_then_rtd")


class Arm:
    """One arm's model, optimizer, batches and step (as the trainer runs it, without the loader)."""

    def __init__(self, arm: str, dev, vocab: int, seq_len: int, batch_size: int, steps: int, seed: int):
        self.name = arm
        self.cfg = override(presets.mini(), arm_sets(arm))
        self.cfg.validate()
        self.obj, self.dev = self.cfg.objective, dev
        self.sp = rtd.Specials(vocab_size=vocab)
        torch.manual_seed(seed)
        model_cfg = dataclasses.replace(self.cfg.model, vocab_size=vocab)
        self.model = dev.place(ElectraPair(model_cfg, vocab, self.sp.pad_id, self.obj.objective)).train()
        self.opt = build_optimizer(self.model, self.cfg.train, fused=dev.fused_optimizer)
        self.fn = objectives.step_function(self.obj.objective)
        self.steps = steps
        scheduled = objectives.knobs(self.obj, torch.zeros(()), steps) is not None
        self.step_t = torch.zeros((), device=dev.torch_device) if scheduled else None
        g = torch.Generator().manual_seed(seed)
        self.batches = []
        for _ in range(4):
            ids = torch.randint(self.sp.first_regular_id, vocab, (batch_size, seq_len), generator=g)
            ids[:, 0], ids[:, seq_len // 2], ids[:, -1] = self.sp.cls_id, self.sp.sep_id, self.sp.sep_id
            types = torch.zeros_like(ids)
            types[:, seq_len // 2 + 1:] = 1
            self.batches.append((ids.to(dev.torch_device), types.to(dev.torch_device)))
        n = rtd.num_slots(self.obj.mask_prob, seq_len)
        self.parts = flops_by_part(model_cfg, vocab, seq_len, n, self.obj.objective)
        self.flops_per_step = batch_size * sum(self.parts.values())
        self.tokens_per_step = batch_size * seq_len  # no padding in these rows
        self.i = 0

    def step(self) -> float:
        ids, types = self.batches[self.i % len(self.batches)]
        self.i += 1
        self.dev.synchronize()
        t0 = time.perf_counter()
        knobs = objectives.knobs(self.obj, self.step_t, self.steps) if self.step_t is not None else None
        with self.dev.autocast():
            out = self.fn(self.model, ids, types, self.sp, self.obj, None, None, knobs)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if self.step_t is not None:
            self.step_t.add_(1.0)
        float(out.loss.detach())  # wait for the step to finish
        return time.perf_counter() - t0


def _arm_answers(arm: str, kwargs: dict) -> dict:
    """An arm's commands, served in a process of its own (:class:`benchmarks.step_bench.Served`)."""
    dev = resolve(kwargs.pop("device"), kwargs.pop("bf16"), kwargs.pop("threads"))
    run = Arm(arm, dev, **kwargs)
    facts = {"objective": run.obj.objective, "flops_per_step": run.flops_per_step, "parts": run.parts,
             "tokens_per_step": run.tokens_per_step, "study_batch": run.cfg.train.batch_size,
             "threads": torch.get_num_threads()}
    return {"step": run.step, "facts": lambda: facts}


def main() -> None:
    p = parser(__doc__, "about 2 minutes on 2 cores")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where the steps run (default cpu)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads on the CPU (default 1; 0: torch's)")
    p.add_argument("--arms", default=",".join(ARMS), help=f"study arms to time (default {','.join(ARMS)})")
    p.add_argument("--batch-size", type=int, default=None, help="rows a step (default 32; --quick 16)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds (default 15; --quick 8)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast, as train.bf16")
    args = p.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    if "electra" not in arms:
        arms.insert(0, "electra")  # the baseline
    batch = args.batch_size or (16 if args.quick else 32)
    rounds = args.rounds or (8 if args.quick else 15)
    warmup = 1 if args.device == "cpu" else 3
    vocab, seq_len = 8000, 128
    t0 = time.perf_counter()
    kwargs = dict(device=args.device, bf16=args.bf16, threads=args.threads, vocab=vocab, seq_len=seq_len,
                  batch_size=batch, steps=warmup + rounds + 1, seed=0)
    runners: dict[str, Served] = {}
    try:
        for a in arms:
            runners[a] = Served(_arm_answers, a, dict(kwargs))
        facts = {a: r.ask("facts") for a, r in runners.items()}
        times: dict[str, list[float]] = {a: [] for a in arms}
        for r in range(warmup + rounds):
            order = arms if r % 2 == 0 else arms[::-1]
            for a in order:
                dt = runners[a].ask("step")
                if r >= warmup:
                    times[a].append(dt)
    finally:
        for r in runners.values():
            r.close()
    med = {a: statistics.median(ts) for a, ts in times.items()}
    base = facts["electra"]
    results = {}
    for a, f in facts.items():
        flops, total = f["flops_per_step"], sum(f["parts"].values())
        results[a] = {
            "objective": f["objective"], "seconds_per_step": med[a], "tokens_per_s": f["tokens_per_step"] / med[a],
            "flops_per_step": flops, "flops_per_s": flops / med[a],
            "time_ratio": med[a] / med["electra"], "flops_ratio": flops / base["flops_per_step"],
            # each timed round's step time over ELECTRA's in the same round: how far drift reaches
            "time_ratio_quartiles": statistics.quantiles([t / e for t, e in zip(times[a], times["electra"])], n=4,
                                                         method="inclusive") if rounds > 1 else None,
            "flops_share": {k: round(v / total, 4) for k, v in f["parts"].items() if v},
            # what a study at 7.2e13 FLOPs gives the arm: mini's batch of 32, whatever batch was timed here
            "study_steps_at_7.2e13": round(7.2e13 / (f["study_batch"] * total))}
        print(f"{a:>18}: {results[a]['tokens_per_s']:8,.0f} tok/s, {flops:.3e} FLOPs/step, "
              f"time x{results[a]['time_ratio']:.2f}, FLOPs x{results[a]['flops_ratio']:.2f} of ELECTRA's",
              file=sys.stderr)
    new = [a for a in arms if a in NEW]
    slowest = min(new, key=lambda a: results[a]["tokens_per_s"]) if new else "electra"
    emit("objectives", "tokens/s", results[slowest]["tokens_per_s"], "electra", results["electra"]["tokens_per_s"],
         {"shape": "mini", "vocab_size": vocab, "seq_len": seq_len, "batch_size": batch, "rounds": rounds,
          "warmup_rounds": warmup, "device": args.device, "threads": facts["electra"]["threads"], "bf16": args.bf16,
          "quick": args.quick, "arms": arms, "statistic": "median", "interleaved": True, "headline": slowest},
         results=results, timed_wall_s=round(time.perf_counter() - t0, 1))


if __name__ == "__main__":
    main()
