"""The prepared GPU check (issue 45): kolectra's pretraining step on the GPU this machine has, and a
short real run, in one command that prints one JSON line within a time budget (8 minutes).

    python benchmarks/gpu.py [--budget-s 465] [--steps 300] [--out ROOT] [--examples REF] [--peak-tflops X]
                             [--phases base/cuda_graphs,...] [--batch base=512] [--set model.KEY=VALUE ...]

It installs nothing and reaches nothing outside the machine: it needs kolectra installed (``pip
install -e .`` with a CUDA build of torch) and a GPU. On a machine where torch sees no CUDA device it
exits 1 with one line and measures nothing. Phases, each in a process of its own (a fresh CUDA
context, its own peak memory, and a hard stop at its share of the budget):

1. The step alone, bf16 autocast, sequence 128, random token ids in the trainer's packed rows (three
   sequences a row, so the attention mask takes the device's form: ``model/attention.py``;
   :mod:`benchmarks.step_bench`'s runners: the trainer's own model, fused AdamW and step function;
   the naive step reads a packed row as one sequence, as a first version would): ``small`` (batch 128,
   vocabulary 8,000) and ``base`` (batch 256, vocabulary 35,000), the shapes of docs/benchmarks.md's
   H200 figures; each eager beside the naive Hugging Face step, and compiled with CUDA graphs
   (``reduce-overhead``, what ``train.compile=auto`` picks on CUDA); compiled without them (Inductor's
   ``default`` mode, ``*/compiled``) only when ``--phases`` names it (its cold compiles do not fit the
   8 minutes beside the others). Per variant: median milliseconds (p10, p90), tokens/s, MFU by the trainer's own FLOPs
   count (:func:`kolectra.model.electra.train_flops_per_sequence`) over the GPU's dense bf16
   datasheet peak (:data:`kolectra.model.device.GPU_PEAK_TFLOPS`; an unknown GPU gets MFU null and a
   note, unless ``--peak-tflops``), peak memory, and the first step's seconds (compiling). Time left
   in the phase, kolectra's step is profiled for 3 more steps: kernels a step, the GPU's busy share
   of the step, and the 15 kernels that take most of its time (what bounds the step; with CUDA graphs
   CUPTI still reports each replayed kernel, so the CUDA-graph phase profiles the trainer's compiled
   step without compiling it again). A phase stopped at its budget (a slow compile) reports the
   runners it finished and the step the last one stood in.
2. Examples: the embedded sample (``pipeline/sample/reviews.jsonl.gz``) through ``kolectra corpus``,
   ``vocab`` (8,000) and ``examples`` (128) into ``--out`` (default: a temporary store), unless
   ``--examples REF`` names an examples artifact already in ``--out``.
3. ``kolectra pretrain --preset small --device cuda --steps 300 --set train.bf16=true``, on the
   device's defaults (compiled, CUDA graphs): steps/s after the first step, MFU, the first step's
   seconds and the run's health line (``ok``, ``not_learning`` or ``unchecked: ...``).
4. Only when ``--phases`` names it: ``kolectra finetune nsmc`` of that checkpoint on the embedded NSMC
   sample, one epoch on the device's defaults (CUDA: a compiled forward over fixed batch widths).
5. Only when ``--phases`` names it, ``loop_host``: the pretraining loop itself (``train.start``,
   ``train_step``, ``small`` on the examples, the device's defaults) in the phase's process, 100
   steps after the first and 5 warm-up ones, with each part of a step timed on the host (the step
   function, backward, normalizers, clipping, AdamW, ``zero_grad``, the batches, the metric sums,
   the schedule, the loop's own Python) against the wall time a step: on a host-bound GPU step, where
   the loop's time beyond its step goes (:func:`gpu_phases.loop_host`).

Each step variant also reports the host's time to queue a step (``host_ms``: forward, backward,
AdamW and ``zero_grad`` queued, before the result is read back) and its parts (``host_ms_by_part``):
near ``ms``, the host bounds the step.

``--compile-cache DIR`` carries Inductor's compile cache from one lent machine to the next
(:mod:`benchmarks.compile_cache`): the parts in DIR, if any, are unpacked into the cache every phase
compiles with (``TORCHINDUCTOR_CACHE_DIR``, else one folder a machine under the temporary folder, so
a second call on the same machine finds the first one's too), and the cache is packed back into
``--compile-cache-out`` (default DIR) after the phases, in parts of 15 MiB; each compiled step
reports its cache hits and misses.

``--phases`` runs some of them (a second look within the lent GPU's minutes, e.g.
``--phases base/cuda_graphs``); ``--set model.KEY=VALUE`` changes the model in every phase, e.g.
``model.attention_dropout=0``, under which CUDA takes FlexAttention's block mask instead of SDPA's
boolean one (FlexAttention has no dropout); ``--batch base=512`` another batch for a preset's step
(issue 45: a larger ``base`` batch where memory allows). The pretraining phase's ``loop_vs_step``
is the loop's MFU (the median of its logged windows after the first) over ``small``'s step with CUDA
graphs (target 0.95).

The phases' own code, what runs in each child process, is :mod:`benchmarks.gpu_phases`.

Budget: each phase gets at most its cap and never more than what leaves the later phases their
minimum (:func:`phase_budget`); a phase that would not fit is skipped and says so in the JSON.
The headline value is the ``base`` step's MFU with CUDA graphs; the baseline the naive HF step's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if __package__:  # imported as benchmarks.gpu (the tests)
    from . import compile_cache, gpu_phases
else:  # run as a script: its folder is on the path
    import compile_cache
    import gpu_phases
SEQ_LEN, VARIANTS, WARMUP, TIMED = gpu_phases.SEQ_LEN, gpu_phases.VARIANTS, gpu_phases.WARMUP, gpu_phases.TIMED

# preset -> (batch, vocabulary): docs/benchmarks.md's H200 shapes and issue 45's targets
SHAPES = {"small": (128, 8000), "base": (256, 35000)}
# phase -> (cap, minimum) seconds. A cold compile of the CUDA-graph step took over 75 s on the H200 (both
# presets, 2026-11-28), 22-51 s with Inductor's cache warm from an earlier phase (docs/benchmarks.md).
PHASES = {**{f"{p}/{v}": ((150, 60) if v != "eager" else (40, 20)) for p in SHAPES for v in VARIANTS},
          "examples": (90, 30), "pretrain": (150, 90), "loop_host": (150, 60), "finetune": (150, 60)}
LOOP_HOST_STEPS = 100  # the loop_host phase's timed steps
BUDGET_S = 465  # of the 8 minutes: the rest for starting torch here and printing
STDERR_TAIL = 2000  # characters of a failed phase's stderr kept in the JSON (a lent GPU is not there to rerun on)
NO_GPU = ("gpu.py: no CUDA device here (torch {torch}, CUDA build {cuda}): this check measures a GPU and has "
          "nothing to measure on this machine")


# ---- pure pieces (unit-tested with made-up timings) ---------------------------------------------------
def phase_budget(cap: float, minimum: float, left: float, later_minimums: float) -> float | None:
    """Seconds a phase may take: its cap, or less so the later phases keep their minimums; None when
    not even its own minimum fits."""
    budget = min(cap, left - later_minimums)
    return budget if budget >= minimum else None


def mfu(flops_per_step: float, seconds_per_step: float, peak_flops: float | None) -> float | None:
    """Model FLOPs utilisation: useful FLOPs per second over the device's peak; None without a peak."""
    if not peak_flops or seconds_per_step <= 0:
        return None
    return flops_per_step / seconds_per_step / peak_flops


def peak_bf16(device_name: str, given_tflops: float = 0.0) -> tuple[float | None, str | None]:
    """(peak FLOP/s, note): ``given_tflops``, else the datasheet's dense bf16 peak for the GPU's name
    (H100 SXM and H200 989 TFLOP/s, A100 312); an unknown GPU: (None, a note saying why MFU is null)."""
    from kolectra.model.device import gpu_peak_tflops

    if given_tflops:
        return given_tflops * 1e12, f"peak {given_tflops:g} TFLOP/s from --peak-tflops"
    tflops = gpu_peak_tflops(device_name, bf16=True)
    if tflops:
        return tflops * 1e12, None
    return None, (f"no datasheet bf16 peak known for {device_name!r} (model/device.py, GPU_PEAK_TFLOPS): MFU is "
                  "null; pass --peak-tflops to give one")


def step_figures(samples_s: list[float], flops_per_step: float, tokens_per_step: int,
                 peak_flops: float | None) -> dict:
    """A variant's timed steps -> median ms, p10/p90 ms, tokens/s and MFU (at the median)."""
    med = statistics.median(samples_s)
    q = statistics.quantiles(samples_s, n=10, method="inclusive") if len(samples_s) > 1 else [med] * 9
    share = mfu(flops_per_step, med, peak_flops)
    return {"ms": round(med * 1e3, 3), "p10_ms": round(q[0] * 1e3, 3), "p90_ms": round(q[-1] * 1e3, 3),
            "steps": len(samples_s), "tokens_per_s": round(tokens_per_step / med, 1),
            "mfu": None if share is None else round(share, 4)}


def variant_result(raw: dict, flops_per_step: float, tokens_per_step: int, peak_flops: float | None) -> dict:
    """One phase's raw runner output (``runner -> {samples_s, first_step_s, peak_memory_bytes}``) ->
    the figures per runner; a runner without samples keeps its error or status."""
    out = {}
    for name, r in raw.items():
        if not r.get("samples_s"):
            out[name] = {"status": "no timed step within the budget",
                         **{k: v for k, v in r.items() if k != "samples_s"}}
            continue
        out[name] = {**step_figures(r["samples_s"], flops_per_step, tokens_per_step, peak_flops),
                     # the host's time to queue a step: near "ms", the host bounds the step
                     **({"host_ms": round(statistics.median(r["host_s"]) * 1e3, 3)} if r.get("host_s") else {}),
                     **({"host_ms_by_part": r["host_ms_by_part"]} if r.get("host_ms_by_part") else {}),
                     "first_step_s": round(r["first_step_s"], 2),
                     "peak_memory_gb": round(r["peak_memory_bytes"] / 1e9, 2),
                     **({"profile": r["profile"]} if "profile" in r else {})}
    return out


def headline(steps: dict) -> tuple[float | None, float | None]:
    """(base's MFU with CUDA graphs, the naive HF step's MFU at the same shape), None where missing."""
    base = steps.get("base", {})
    graphs = base.get("cuda_graphs", {}).get("kolectra_compiled", {})
    naive = base.get("eager", {}).get("naive_hf", {})
    return graphs.get("mfu"), naive.get("mfu")


def loop_vs_step(steps: dict, pretrain: dict | None) -> float | None:
    """The pretraining loop's MFU, the median of its logged windows after the first (which compiles),
    else its last window's, over the bare step's at the same shape (``small``, CUDA graphs, what the
    loop runs): issue 45 asks for at least 0.95. A median, since the H200's windows swung by 20 %."""
    step = steps.get("small", {}).get("cuda_graphs", {}).get("kolectra_compiled", {}).get("mfu")
    pretrain = pretrain or {}
    loop = pretrain.get("median_window_mfu") or (pretrain.get("last_window") or {}).get("mfu")
    return round(loop / step, 3) if loop and step else None


def report(device: str, peak_flops: float | None, notes: list[str], steps: dict, phases: dict,
           pretrain: dict | None, budget_s: float, shapes: dict = SHAPES) -> dict:
    """The JSON the check prints (benchmarks' common shape: benchmark, unit, value, baseline, ratio,
    config; ``machine`` and the load are added by :func:`common.emit`)."""
    value, baseline = headline(steps)
    if pretrain is not None:
        pretrain = {**pretrain, "loop_vs_step": loop_vs_step(steps, pretrain)}
    return {"benchmark": "gpu_check", "unit": "MFU (base, bf16, CUDA graphs)", "value": value,
            "baseline": {"name": "naive_hf_step (base, bf16, eager)", "value": baseline},
            "ratio": value / baseline if value and baseline else None,
            "config": {"device": device, "seq_len": SEQ_LEN, "shapes": {p: {"batch": b, "vocab_size": v}
                                                                        for p, (b, v) in shapes.items()},
                       "precision": "bf16 autocast", "warmup_steps": WARMUP, "timed_steps": TIMED,
                       "budget_s": budget_s, "peak_flops": peak_flops, "statistic": "median"},
            "steps": steps, "pretrain": pretrain, "phases": phases, "notes": notes}


# ---- running the phases -------------------------------------------------------------------------
def stopped(progress: dict, budget_s: float, now: float) -> dict:
    """A step phase's progress file, read after the phase was stopped -> its runners: the finished ones
    as they were, the one under way with its status (and how long it had been in its first step)."""
    out = {}
    for name, r in progress.items():
        if "started_at" in r:
            r = {k: v for k, v in r.items() if k != "started_at"} | {"in_first_step_s": round(now - r["started_at"], 1)}
        out[name] = r if "samples_s" in r else {**r, "phase_budget_s": round(budget_s, 1)}
    return out




def child(kind: str, args: list, budget_s: float) -> dict:
    """Run one phase in a process of its own, stopped at ``budget_s`` (its own imports included: the
    child gets the wall-clock deadline); its last stdout line is JSON."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import gpu_phases; "
            "print(json.dumps(gpu_phases.CHILDREN[sys.argv[2]](*json.loads(sys.argv[3]))))")
    with tempfile.NamedTemporaryFile(suffix=".json") as progress:
        try:
            r = subprocess.run([sys.executable, "-c", code, str(HERE), kind, json.dumps([*args, time.time() + budget_s])],
                               capture_output=True, text=True, timeout=budget_s,
                               env={**os.environ, gpu_phases.PROGRESS_ENV: progress.name})
        except subprocess.TimeoutExpired:
            so_far = Path(progress.name).read_text()
            if so_far:  # a step phase: what it finished, and the runner it was stopped in
                return stopped(json.loads(so_far), budget_s, time.time())
            return {"status": f"stopped at its budget of {budget_s:.0f} s"}
    if r.returncode:  # the last line names the error; the tail is for whoever reads the JSON afterwards
        return {"status": "failed", "error": (r.stderr.strip().splitlines() or ["?"])[-1],
                "stderr_tail": r.stderr.strip()[-STDERR_TAIL:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


ORDER = [f"{pr}/{v}" for pr in SHAPES for v in VARIANTS] + ["examples", "pretrain", "loop_host", "finetune"]
# what runs without --phases: Inductor's default mode (no CUDA graphs) is left to --phases, since its
# cold compiles would not fit the 8 minutes beside the CUDA-graph ones the trainer uses; fine-tuning
# (its compiled batch widths) and the loop's host time by part likewise only when named
DEFAULT = [name for name in ORDER if not name.endswith("/compiled") and name not in ("finetune", "loop_host")]


def phase_order(phases: str | None, have_examples: bool) -> list[str]:
    """The phases to run, in :data:`ORDER`: :data:`DEFAULT`, or those named (``finetune`` pretrains first,
    ``pretrain`` builds its examples first unless ``--examples`` names them); an unknown name exits
    with the known ones."""
    wanted = DEFAULT if phases is None else [x.strip() for x in phases.split(",") if x.strip()]
    if unknown := [x for x in wanted if x not in ORDER]:
        sys.exit(f"gpu.py: unknown phase(s) {', '.join(unknown)}; known: {', '.join(ORDER)}")
    if "finetune" in wanted:  # it fine-tunes the checkpoint this run trains
        wanted = [*wanted, "pretrain"]
    if ("pretrain" in wanted or "loop_host" in wanted) and not have_examples:
        wanted = [*wanted, "examples"]
    return [x for x in ORDER if x in wanted and not (x == "examples" and have_examples)]


def require_cuda() -> str:
    """The GPU's name; on a machine without CUDA, exit 1 with one line (nothing is measured)."""
    import torch

    if not torch.cuda.is_available():
        sys.exit(NO_GPU.format(torch=torch.__version__, cuda=torch.version.cuda or "none"))
    return torch.cuda.get_device_name(0)


# The loop's settings --set may change besides the model's (the check sets the device, precision and steps)
LOOP_SETS = ("train.compile", "train.compile_mode")


def main(argv: list[str] | None = None) -> dict:
    from kolectra.core.config import ConfigError

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget-s", type=float, default=BUDGET_S, help=f"seconds for everything (default {BUDGET_S})")
    p.add_argument("--steps", type=int, default=300, help="steps of the kolectra pretrain run (default 300)")
    p.add_argument("--out", default=None, help="artifact root for the examples and the run (default: a temporary one)")
    p.add_argument("--examples", default=None, help="an examples artifact in --out to train on (default: build one "
                                                     "from the embedded sample)")
    p.add_argument("--peak-tflops", type=float, default=0.0, help="the GPU's bf16 peak when it is not in the table")
    p.add_argument("--phases", default=None, help=f"comma-separated phases to run, of {', '.join(ORDER)} (default: all but */compiled)")
    p.add_argument("--batch", action="append", default=[], metavar="PRESET=N",
                   help="another batch for a preset's step phases, e.g. base=512 (default: small=128, base=256)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting for every phase, e.g. model.attention_dropout=0 (FlexAttention on CUDA); train.* "
                        "keys reach the pretrain and loop_host phases, e.g. train.compile_mode=whole-step")
    p.add_argument("--sampler", choices=("gumbel", "inverse_cdf"), default=None,
                   help="the generator's sampler in the step phases (default: the device's)")
    p.add_argument("--compile-cache", type=Path, default=None, metavar="DIR",
                   help="unpack Inductor's cache from DIR's parts (if any) before the phases and pack it back after")
    p.add_argument("--compile-cache-out", type=Path, default=None, metavar="DIR",
                   help="where the packed cache's parts go (default: --compile-cache's DIR)")
    args = p.parse_args(argv)
    order = phase_order(args.phases, bool(args.examples))
    shapes = dict(SHAPES)
    for kv in args.batch:
        preset, _, n = kv.partition("=")
        if preset not in SHAPES or not n.isdigit() or int(n) < 1:
            p.error(f"--batch {kv}: expected PRESET=N with PRESET one of {', '.join(SHAPES)}")
        shapes[preset] = (int(n), SHAPES[preset][1])
    if bad := [kv for kv in args.sets if not kv.startswith("model.") and kv.partition("=")[0] not in LOOP_SETS]:
        p.error(f"--set takes model.* settings and {', '.join(LOOP_SETS)} only: {', '.join(bad)}")
    try:  # a wrong key or value fails here, not in every phase
        gpu_phases.model_config("small", 8000, args.sets)
        gpu_phases.loop_config("small", "cuda", args.sets)
    except ConfigError as e:
        p.error(str(e))
    device = require_cuda()
    sys.path.insert(0, str(HERE))
    from common import emit  # noqa: PLC0415 - the benchmarks folder's module

    from kolectra.model.electra import train_flops_per_sequence
    from kolectra.model.rtd import num_slots

    peak, note = peak_bf16(device, args.peak_tflops)
    notes = [note] if note else []
    deadline = time.perf_counter() + args.budget_s
    out = args.out or tempfile.mkdtemp(prefix="kolectra-gpu-check-")
    cache = None
    if args.compile_cache is not None:  # every phase's process (kolectra's too) inherits the variable
        cache_dir, unpacked = compile_cache.use(args.compile_cache)
        cache = {"dir": str(cache_dir), "unpacked": unpacked}
    steps, phases, pretrain, finetune, loop, examples = {}, {}, None, None, None, args.examples
    for i, name in enumerate(order):
        cap, minimum = PHASES[name]
        budget = phase_budget(cap, minimum, deadline - time.perf_counter(), sum(PHASES[n][1] for n in order[i + 1:]))
        if budget is None:
            phases[name] = {"status": "skipped: no time left in the budget"}
            continue
        t0 = time.perf_counter()
        if "/" in name:
            preset, variant = name.split("/")
            batch, vocab = shapes[preset]
            flops = batch * train_flops_per_sequence(gpu_phases.model_config(preset, vocab, args.sets), vocab, SEQ_LEN,
                                                     num_slots(0.15, SEQ_LEN))
            raw = child("step", [preset, variant, args.sets, [batch, vocab, *([args.sampler] if args.sampler else [])]],
                        budget)
            figures = variant_result(raw, flops, batch * SEQ_LEN, peak) if "status" not in raw else raw
            steps.setdefault(preset, {})[variant] = figures
        elif name == "examples":
            r = child("examples", [out], budget)
            examples = r.get("examples")
            phases[name] = r
        elif name == "loop_host":
            loop = (child("loop_host", [out, examples, LOOP_HOST_STEPS, args.sets], budget) if examples
                    else {"status": "skipped: no examples"})
        elif name == "finetune":
            ok = (pretrain or {}).get("status") == "ok"
            finetune = child("finetune", [out], budget) if ok else {"status": "skipped: no checkpoint"}
        elif examples is None:
            pretrain = {"status": "skipped: no examples"}
        else:
            pretrain = child("pretrain", [out, examples, args.steps, args.sets], budget)
        phases.setdefault(name, {})["seconds"] = round(time.perf_counter() - t0, 1)
        phases[name]["budget_s"] = round(budget, 1)
        print(f"gpu.py: {name} done in {phases[name]['seconds']} s", file=sys.stderr)
    if cache is not None:
        cache["packed"] = compile_cache.keep(cache_dir, args.compile_cache_out or args.compile_cache)
    r = report(device, peak, notes, steps, phases, pretrain, args.budget_s, shapes)
    r["config"]["sets"] = args.sets
    if args.sampler:
        r["config"]["sampler"] = args.sampler
    if cache is not None:
        r["config"]["compile_cache"] = cache
    return emit(r["benchmark"], r["unit"], r["value"], r["baseline"]["name"], r["baseline"]["value"], r["config"],
                steps=r["steps"], pretrain=r["pretrain"], finetune=finetune, loop_host=loop, phases=r["phases"],
                notes=r["notes"])


if __name__ == "__main__":
    main()
