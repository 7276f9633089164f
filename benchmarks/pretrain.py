"""Benchmark: kolectra's pretraining step against a naive step from stock Hugging Face modules.

    python benchmarks/pretrain.py [--quick] [--preset small++|small|base|mini] [--device cpu|cuda] [--peak-tflops X]
                                  [--batch-size N] [--vocab-size V] [--compile [--compile-mode default|reduce-overhead]]

``--preset mini`` measures the preset every CPU study and run uses (4 layers of 128, generator a
quarter as wide, vocabulary 8,000, batch 32, sequence 128) in fp32 and bf16, on one thread and on
all cores (``--quick``: one thread, 3 rounds): steps/s, tokens/s and MFU against the best matmul the CPU runs with the same threads in
the same precision, each beside the naive step; ``bf16_over_fp32`` is kolectra's bf16 steps/s over
its fp32 steps/s at each thread count. The headline is kolectra's fp32 steps/s on one thread (how
studies run: one core each). The rest of this text is about the default, ``small++``.

Same run, same machine, same small++-like model (KoELECTRA-Small-v3 shapes, vocabulary 35,000),
batch 8, sequence 128, in fp32 and with bf16 autocast; the two steps are interleaved and the
medians compared, each step in a process of its own (see :mod:`benchmarks.step_bench`). The headline value
is kolectra's fp32 steps per second, the baseline the naive step's; the bf16 figures, tokens/s
and useful FLOP/s (MFU when a peak figure is known: ``--peak-tflops`` or a CUDA device in the
datasheet table in ``model/device.py``) ride along, and on the CPU each step's matmul share and the speedup ceiling it
implies (:mod:`benchmarks.step_bench`), and MFU against the best 2,048³ matmul the CPU runs in the same
precision (no datasheet peak fits a CPU: clocks and vector units vary by SKU and VM), and the
minor page faults per step of each (memory taken back from the kernel: ``model/cpu_memory.py``).
``--compile`` adds kolectra's step under ``torch.compile`` (what ``train.compile=true`` runs) to
the same interleaved rotation: ``speedup_compiled`` and ``ratio_bf16_compiled`` against the same
naive step, its compile time apart (Inductor needs a C++ compiler on CPU).
``--naive-keeps-memory`` gives the naive step's process kolectra's allocator settings too
(:mod:`model.cpu_memory`), which kolectra's CPU trainer sets for itself: the speedup then leaves
out what those settings add.
``--quick``: 2 layers instead of 12, 2 rounds instead of 11 and a 1,024³ matmul for the CPU's
peak, well under a minute on 2 cores (plus compiling); its times are in docs/benchmarks.md.
Full size (12 layers, 11 rounds): about 5 minutes on 2 cores (plus compiling with ``--compile``).
No data is read: the batches are random token ids.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import torch
from common import emit, parser
from step_bench import compare, preset_model

from kolectra.model import config, presets
from kolectra.model.device import gpu_peak_tflops


def peak_tflops(device: str, precision: str, given: float) -> float:
    """``given``, else a known GPU's datasheet peak (the table the trainer's MFU uses); 0 on a CPU."""
    if given:
        return given
    if device == "cuda":
        return gpu_peak_tflops(torch.cuda.get_device_name(0), bf16=precision == "bf16")
    return 0.0


def measured_matmul_peak(precision: str, n: int = 2048, reps: int = 20, threads: int = 0) -> float:
    """The best FLOP/s of an n x n x n matmul on the CPU in ``precision`` (with ``threads`` torch
    threads, else the current number): a practical peak for MFU where no datasheet figure applies (a
    CPU's clock and vector units vary by SKU and VM)."""
    if threads:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return measured_matmul_peak(precision, n, reps)
        finally:
            torch.set_num_threads(before)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


def main() -> None:
    p = parser(__doc__, "about 5 minutes on 2 cores")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where both steps run (default cpu)")
    p.add_argument("--peak-tflops", type=float, default=0.0,
                   help="peak of one device for MFU (default 0: the table for known GPUs, a measured matmul on CPU)")
    p.add_argument("--batch-size", type=int, default=None, help="sequences a step (default 8; mini: its preset's 32)")
    p.add_argument("--seq-len", type=int, default=128, help="tokens a sequence (default 128)")
    p.add_argument("--vocab-size", type=int, default=35000,
                   help="vocabulary of small++, small and base (default 35,000, KoELECTRA's; mini keeps its 8,000)")
    p.add_argument("--compile", action="store_true", help="also time kolectra's step under torch.compile")
    p.add_argument("--compile-mode", default="default", choices=list(config.COMPILE_MODES),
                   help="torch.compile's mode with --compile (default: default; reduce-overhead: CUDA graphs, "
                        "--device cuda only)")
    p.add_argument("--naive-keeps-memory", action="store_true",
                   help="the naive step's process gets kolectra's allocator settings too (CPU)")
    p.add_argument("--preset", default="small++", choices=["small++", "small", "base", "mini"],
                   help="small++ (default: KoELECTRA-Small-v3 shapes), small or base (ELECTRA's shapes: for a GPU, "
                        "with --batch-size 128 or 256), all with --vocab-size; or mini (the CPU studies' "
                        "preset, fp32 and bf16 on one thread and all cores)")
    args = p.parse_args()
    if args.compile_mode == "reduce-overhead" and not (args.compile and args.device == "cuda"):
        p.error("--compile-mode reduce-overhead records CUDA graphs: it needs --compile and --device cuda")
    if args.preset == "mini":
        if args.device != "cpu" or args.compile:
            p.error("--preset mini measures the CPU in eager mode: leave out --device cuda and --compile")
        return mini_main(args)
    args.batch_size = args.batch_size or 8
    if args.device == "cpu" and args.quick:
        layers, rounds = 2, 2
    elif args.device == "cpu":
        layers, rounds = None, 11
    else:
        layers, rounds = None, 30
    model_cfg = preset_model(args.preset, args.vocab_size, layers)
    peak_n = 1024 if args.quick else 2048  # the quick peak: 8x fewer FLOPs a matmul
    results = {}
    for precision in ("fp32", "bf16"):
        # the peak before and after the steps, the better of the two: a slow phase of a shared
        # machine would otherwise inflate MFU
        peak_before = measured_matmul_peak(precision, peak_n) if args.device == "cpu" else 0.0
        r = compare(model_cfg, seq_len=args.seq_len, batch_size=args.batch_size, rounds=rounds,
                    warmup=2 if args.device == "cuda" else 1, bf16=precision == "bf16", device=args.device,
                    compile=args.compile, naive_keeps_memory=args.naive_keeps_memory, compile_mode=args.compile_mode)
        peak = peak_tflops(args.device, precision, args.peak_tflops) * 1e12
        mfu = {k: v / peak for k, v in r["useful_flops_per_s"].items()} if peak else None
        if args.device == "cpu":
            # no datasheet peak for a CPU: MFU against the best matmul this machine ran just now
            cpu_peak = max(peak_before, measured_matmul_peak(precision, peak_n))
            results_extra = {"measured_matmul_peak_flops": cpu_peak,
                             "mfu_of_measured_peak": {k: v / cpu_peak for k, v in r["useful_flops_per_s"].items()}}
        else:
            results_extra = {}
        keep = ("steps_per_s", "tokens_per_s", "useful_flops_per_s", "speedup", "speedup_compiled", "compile_s",
                "matmul_share", "speedup_ceiling", "top_other_ops", "speedup_per_round_quartiles",
                "minor_faults_per_step")
        results[precision] = {k: r[k] for k in keep if k in r}
        results[precision]["mfu"] = mfu
        results[precision].update(results_extra)
        compiled = f", compiled {r['speedup_compiled']:.2f}x" if args.compile else ""
        if r["speedup_ceiling"]:
            compiled += (f" (matmuls {r['matmul_share']['kolectra']:.0%} of kolectra's step, ceiling"
                         f" {r['speedup_ceiling']:.2f}x)")
        print(f"{precision}: kolectra {r['steps_per_s']['kolectra']:.3f} steps/s, naive {r['steps_per_s']['naive_hf']:.3f}"
              f" steps/s, speedup {r['speedup']:.2f}x (rounds' quartiles"
              f" {', '.join(f'{q:.2f}' for q in r['speedup_per_round_quartiles'])}){compiled}; page faults"
              f" per step {', '.join(f'{k} {v:.0f}' for k, v in r['minor_faults_per_step'].items())}",
              file=sys.stderr)
    fp32 = results["fp32"]["steps_per_s"]
    emit("pretrain", "steps/s", fp32["kolectra"], "naive_hf_step", fp32["naive_hf"],
         {"model": "small++-like" if args.preset == "small++" else args.preset, "layers": model_cfg.layers,
          "vocab_size": args.vocab_size, "batch_size": args.batch_size,
          "seq_len": args.seq_len, "device": args.device, "rounds": rounds, "quick": args.quick,
          "interleaved": True, "isolated": True, "statistic": "median", "compile": args.compile,
          "compile_mode": args.compile_mode,
          "naive_keeps_memory": args.naive_keeps_memory, "matmul_peak_n": peak_n},
         results=results, ratio_bf16=results["bf16"]["speedup"],
         **({"ratio_compiled": results["fp32"]["speedup_compiled"],
             "ratio_bf16_compiled": results["bf16"]["speedup_compiled"]} if args.compile else {}))


def mini_main(args) -> None:
    """``--preset mini``: both precisions on one thread and on all cores, MFU against the matmul peak
    measured with the same threads and precision."""
    mini = presets.mini()
    model_cfg = dataclasses.replace(mini.model, vocab_size=8000)
    batch = args.batch_size or mini.train.batch_size
    rounds, peak_n = (3, 1024) if args.quick else (11, 2048)
    cores = os.cpu_count() or 1
    # --quick: one thread only (each measurement starts two step processes: most of a quick run)
    thread_counts = [1] if args.quick else list(dict.fromkeys((1, cores)))
    results = {}
    for threads in thread_counts:
        for precision in ("fp32", "bf16"):
            peak_before = measured_matmul_peak(precision, peak_n, threads=threads)
            r = compare(model_cfg, seq_len=args.seq_len, batch_size=batch, rounds=rounds, warmup=1,
                        bf16=precision == "bf16", device="cpu", threads=threads)
            peak = max(peak_before, measured_matmul_peak(precision, peak_n, threads=threads))
            key = f"{precision}_{threads}t"
            results[key] = {"threads": threads, "precision": precision, "measured_matmul_peak_flops": peak,
                            "mfu_of_measured_peak": {k: v / peak for k, v in r["useful_flops_per_s"].items()},
                            **{k: r[k] for k in ("steps_per_s", "tokens_per_s", "useful_flops_per_s", "speedup",
                                                 "matmul_share", "speedup_per_round_quartiles")}}
            print(f"mini {key}: kolectra {r['steps_per_s']['kolectra']:.2f} steps/s "
                  f"(MFU {results[key]['mfu_of_measured_peak']['kolectra']:.0%} of a {peak / 1e9:.0f} GFLOP/s matmul), "
                  f"naive {r['steps_per_s']['naive_hf']:.2f}, speedup {r['speedup']:.2f}x", file=sys.stderr)
    bf16_over_fp32 = {f"{t}t": results[f"bf16_{t}t"]["steps_per_s"]["kolectra"] / results[f"fp32_{t}t"]["steps_per_s"]["kolectra"]
                      for t in thread_counts}
    one = results["fp32_1t"]["steps_per_s"]
    emit("pretrain_mini", "steps/s", one["kolectra"], "naive_hf_step", one["naive_hf"],
         {"preset": "mini", "vocab_size": 8000, "batch_size": batch, "seq_len": args.seq_len, "rounds": rounds,
          "quick": args.quick, "threads": thread_counts, "interleaved": True, "isolated": True,
          "statistic": "median", "matmul_peak_n": peak_n},
         results=results, bf16_over_fp32=bf16_over_fp32)


if __name__ == "__main__":
    main()
