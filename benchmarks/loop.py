"""The pretraining loop against its bare step: what the loop around the step costs (issue 45).

    python benchmarks/loop.py [--quick] [--presets tiny,mini] [--examples DIR --tokenizer DIR]

Two processes of their own per preset (``step_bench.Served``), stepped in turn:

- ``loop``: the real loop, :func:`kolectra.model.train.start` and :func:`~kolectra.model.train.train_loop`
  on an examples artifact: the loader and its read-ahead thread, the device batches, the learning-rate
  schedule, the step's normalizers, clipping, the metric sums, the progress bar, and a metrics line
  (read back, TensorBoard, the health check) at every ``log_every`` steps;
- ``step``: ``step_bench``'s runner, the same model (same initial weights, the trainer's placement
  and fused AdamW) and the same batches, read from the same artifact beforehand (already tensors):
  forward, backward, optimizer step, and nothing else.

A round is one log window (``log_every`` steps) of each, in alternating order; the figure is the
median over rounds of CPU seconds per step (all the process's threads: the read-ahead thread's work
counts), the only measure that means much on the project's shared 2-core machines. ``ratio`` is the
step's seconds over the loop's (1.0: the loop costs nothing beyond its step; the JSON line's value is
the last preset's loop steps per CPU second, its baseline the bare step's). The loop also clips the
gradients (the bare step does not), which is training work, not overhead; it is in the gap.

Inputs: ``--examples`` and ``--tokenizer`` (an examples artifact and its vocabulary's directory), or
else the embedded sample is made into both once (``kolectra corpus``, ``vocab``, ``examples``, about
40 s) in ``--work`` and reused. ``--quick``: ``tiny`` and ``mini``, 3 rounds of 10 steps (a metrics line every 10: about a
minute once the inputs exist); full: 8 rounds of the presets' own ``log_every`` (10 and 50).
"""

from __future__ import annotations

import dataclasses
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SAMPLE_REVIEWS, emit, parser
from step_bench import Runner, Served


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _config(preset: str, threads: int, log_every: int):
    from kolectra.model import presets

    cfg = presets.preset(preset)
    # many steps: the schedule stays in its warm-up/decay shape whatever the number of rounds
    return dataclasses.replace(cfg, train=dataclasses.replace(
        cfg.train, steps=1_000_000, cpu_threads=threads, save_every=0, log_every=log_every or cfg.train.log_every))


def _loop_answers(preset: str, examples: str, tokenizer: str, out: str, threads: int, log_every: int) -> dict:
    """The real loop of ``kolectra pretrain`` on ``preset``: "window" runs the next log window."""
    from kolectra.model import runtime, train

    cfg = _config(preset, threads, log_every)
    inputs = train.read_inputs(cfg, Path(examples), Path(tokenizer))
    dev = runtime.resolve("cpu", cfg.train.bf16, threads, "")
    Path(out).mkdir(parents=True, exist_ok=True)
    run = train.start(cfg, inputs, Path(examples), Path(out), dev, resume=False)
    n, at = cfg.train.log_every, [0]

    def window() -> tuple[float, float]:
        c0, t0 = cpu_s(), time.perf_counter()
        train.train_loop(run, Path(out), range(at[0], at[0] + n))
        at[0] += n
        return (cpu_s() - c0) / n, (time.perf_counter() - t0) / n

    return {"window": window}


def _step_answers(preset: str, examples: str, tokenizer: str, threads: int, log_every: int) -> dict:
    """``step_bench``'s runner of the loop's model on the loop's first batches: "window" runs as many steps."""
    import torch

    from kolectra.model import data, objectives, runtime, train
    from kolectra.model.electra import ElectraPair

    cfg = _config(preset, threads, log_every)
    inputs = train.read_inputs(cfg, Path(examples), Path(tokenizer))
    dev = runtime.resolve("cpu", cfg.train.bf16, threads, "")
    dev.seed(cfg.seed)
    sp = inputs.specials
    model = dev.place(ElectraPair(inputs.model_cfg, sp.vocab_size, sp.pad_id, cfg.objective.objective)).train()
    loader = data.ExampleLoader(Path(examples), cfg.train.batch_size, cfg.seed, prefetch=0)
    batches = [next(loader) for _ in range(8)]
    batches = [tuple(torch.from_numpy(b[k]) if k in b else None for k in ("input_ids", "token_type_ids", "doc_ids"))
               for b in batches]
    fn = objectives.step_function(cfg.objective.objective)

    def step(m, ids, types, sp_, obj, doc):
        return fn(m, ids, types, sp_, obj, None, doc).loss

    runner = Runner(step, model, batches, sp, cfg.objective, cfg.train.bf16, fused=dev.fused_optimizer)
    n = cfg.train.log_every

    def window() -> tuple[float, float]:
        c0, t0 = cpu_s(), time.perf_counter()
        for _ in range(n):
            runner.step()
        return (cpu_s() - c0) / n, (time.perf_counter() - t0) / n

    return {"window": window}


def sample_inputs(work: Path) -> tuple[str, str]:
    """The embedded sample as an examples artifact and its vocabulary, made once in ``work``."""
    store = work / "store"
    found = sorted(store.glob("examples/loop-*")), sorted(store.glob("vocab/loop-*"))
    if not (found[0] and found[1]):
        for stage in (["corpus", "--input", str(SAMPLE_REVIEWS)], ["vocab", "--corpus", "loop", "--vocab-size", "8000"],
                      ["examples", "--corpus", "loop", "--vocab", "loop", "--max-seq-length", "128"]):
            subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *stage, "--out", str(store),
                            "--name", "loop", "-q"], check=True)
        found = sorted(store.glob("examples/loop-*")), sorted(store.glob("vocab/loop-*"))
    return str(found[0][-1]), str(found[1][-1])


def main() -> None:
    p = parser(__doc__, "about 5 minutes on 2 cores")
    p.add_argument("--presets", default="tiny,mini", help="comma-separated presets (default tiny,mini)")
    p.add_argument("--examples", default=None, help="an examples artifact's directory (default: the sample's)")
    p.add_argument("--tokenizer", default=None, help="its vocabulary artifact's directory")
    p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "kolectra-bench-loop"),
                   help="where the sample's inputs are made once and the loop writes its metrics")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--log-every", type=int, default=None,
                   help="steps a window (a metrics line each); default the preset's (tiny 10, mini 50); --quick 10")
    p.add_argument("--rounds", type=int, default=None, help="log windows timed per runner (default 8; --quick 3)")
    args = p.parse_args()
    work = Path(args.work)
    examples, tokenizer = ((args.examples, args.tokenizer) if args.examples and args.tokenizer
                           else sample_inputs(work))
    presets = [s for s in args.presets.split(",") if s]
    rounds = args.rounds or (3 if args.quick else 8)
    log_every = args.log_every or (10 if args.quick else 0)
    results = {}
    for preset in presets:
        runners = {"loop": Served(_loop_answers, preset, examples, tokenizer, str(work / f"out-{preset}"), args.threads,
                                  log_every),
                   "step": Served(_step_answers, preset, examples, tokenizer, args.threads, log_every)}
        try:
            for r in runners.values():  # warm-up: a window each (the loop's first step is timed and synchronised)
                r.ask("window")
            taken = {name: [] for name in runners}
            for i in range(rounds):
                for name in (list(runners) if i % 2 == 0 else list(runners)[::-1]):
                    taken[name].append(runners[name].ask("window"))
        finally:
            for r in runners.values():
                r.close()
        med = {name: {"cpu_ms_per_step": round(1e3 * statistics.median(c for c, _ in v), 2),
                      "wall_ms_per_step": round(1e3 * statistics.median(w for _, w in v), 2)} for name, v in taken.items()}
        loop_ms, step_ms = med["loop"]["cpu_ms_per_step"], med["step"]["cpu_ms_per_step"]
        results[preset] = {**med, "ratio": round(step_ms / loop_ms, 3), "overhead_ms": round(loop_ms - step_ms, 2),
                           "loop_steps_per_cpu_s": round(1e3 / loop_ms, 2), "step_steps_per_cpu_s": round(1e3 / step_ms, 2),
                           "per_round_ratio": [round(s[0] / lo[0], 3) for lo, s in zip(taken["loop"], taken["step"])]}
        print(f"{preset}: loop {loop_ms} CPU ms/step, bare step {step_ms} (ratio {results[preset]['ratio']}, "
              f"overhead {results[preset]['overhead_ms']} ms); per round {results[preset]['per_round_ratio']}",
              flush=True)
    last = results[presets[-1]]
    emit("loop", "steps_per_cpu_s", last["loop_steps_per_cpu_s"], "bare step", last["step_steps_per_cpu_s"], {"presets": presets, "rounds": rounds, "threads": args.threads, "log_every": log_every or "preset's",
                                            "examples": examples}, per_preset=results)


if __name__ == "__main__":
    main()
