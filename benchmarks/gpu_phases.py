"""What runs in :mod:`benchmarks.gpu`'s child processes, one phase each: the step timed and profiled
(:func:`time_variant`, with :mod:`benchmarks.step_bench`'s runners), the embedded sample's examples,
a ``kolectra pretrain`` run and a ``kolectra finetune nsmc`` of it. Each child gets a wall-clock
deadline and prints one JSON line; a step phase also writes its progress to the file named by
:data:`PROGRESS_ENV`, so a phase stopped at its budget still reports what it finished."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SAMPLE_REVIEWS = REPO / "pipeline" / "sample" / "reviews.jsonl.gz"
SAMPLE_NSMC = (REPO / "pipeline" / "sample" / "nsmc_train.txt", REPO / "pipeline" / "sample" / "nsmc_test.txt")

SEQ_LEN = 128
# step variants: the step_bench runners each times, and torch.compile's mode
VARIANTS = {"eager": (("kolectra", "naive_hf"), "default"), "compiled": (("kolectra_compiled",), "default"),
            "cuda_graphs": (("kolectra_compiled",), "reduce-overhead")}
WARMUP, TIMED = 3, 30  # steps: after the first (which compiles), then timed
PROFILED, TOP_KERNELS = 3, 25  # steps under the profiler after the timed ones; kernels listed
# A kernel's kind by its name, first match wins: where the busy time goes at a glance (fused attention,
# FlexAttention's Triton kernels too; cuBLAS/CUTLASS matrix products; Inductor's other generated Triton
# kernels; copies; the rest)
KERNEL_KINDS = (("attention", ("fmha", "flash", "attention", "sdpa")),
                ("matmul", ("gemm", "cutlass", "nvjet", "xmma", "cublas", "aten::mm", "aten::addmm", "aten::bmm")),
                ("triton", ("triton_",)),
                ("copy", ("memcpy", "memset", "copy")))
MARGIN_S = 5  # a child's time to finish and print after its last step
PROGRESS_ENV = "KOLECTRA_GPU_CHECK_PROGRESS"  # the file a step phase reports its progress to
NAME = "gpu-check"  # the artifacts' name in --out (one of each kind)


def kernel_kind(name: str) -> str:
    """One of :data:`KERNEL_KINDS`' names, or ``other``."""
    low = name.lower()
    return next((kind for kind, marks in KERNEL_KINDS if any(m in low for m in marks)), "other")


def kernel_table(kernels: list[tuple[str, float, int]], steps: int, wall_s: float, top: int = TOP_KERNELS) -> dict:
    """Profiled kernels ``(name, total µs, launches)`` over ``steps`` steps of ``wall_s`` seconds each ->
    launches a step, the device's busy milliseconds a step and their share of the step (well under 1:
    the device waits on the host), and the ``top`` kernels by time with their share of the busy time."""
    busy_us = sum(us for _, us, _ in kernels)
    ranked = sorted(kernels, key=lambda k: -k[1])[:top]
    by_kind: dict[str, float] = {}
    for name, us, _ in kernels:
        by_kind[kernel_kind(name)] = by_kind.get(kernel_kind(name), 0.0) + us
    return {"steps": steps, "launches_per_step": round(sum(n for *_, n in kernels) / steps, 1),
            "busy_ms_per_step": round(busy_us / steps / 1e3, 3),
            "busy_share": round(busy_us / 1e6 / (wall_s * steps), 4) if wall_s > 0 else None,
            "ms_per_step_by_kind": {k: round(us / steps / 1e3, 3) for k, us in sorted(by_kind.items(), key=lambda x: -x[1])},
            "top": [{"kernel": name[:120], "ms_per_step": round(us / steps / 1e3, 3),
                     "share": round(us / busy_us, 4) if busy_us else None, "launches_per_step": round(n / steps, 1)}
                    for name, us, n in ranked]}


def kernel_profile(runner, steps: int = PROFILED, graphs: bool = False) -> dict:
    """``steps`` more steps under torch.profiler: on CUDA its kernels (CUPTI), elsewhere its CPU ops
    (to rehearse the phase without a GPU): what bounds the step (issue 45's item 3). ``graphs``: the
    step replays CUDA graphs, whose kernels CUPTI still reports one by one (so no second compile is
    needed to see inside the compiled step), though the host launches each graph once: the kernel
    count is then the graphs' nodes, not host launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = runner.device.type == "cuda"
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            runner.step()
    wall = (time.perf_counter() - t0) / steps
    kind = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    rows = [(e.key, e.self_device_time_total if cuda else e.self_cpu_time_total, e.count)
            for e in prof.key_averages() if e.device_type == kind]
    what = ("CUDA kernels replayed from CUDA graphs (launches_per_step: the graphs' kernel nodes)" if graphs
            else "CUDA kernels" if cuda else "CPU ops (no GPU here)")
    return {**kernel_table(rows, steps, wall), "what": what}


def cache_counts() -> dict:
    """Inductor's and AOTAutograd's cache hits and misses in this process so far (a compile that
    found its graphs in a carried cache, :mod:`benchmarks.compile_cache`, shows hits)."""
    from torch._dynamo.utils import counters

    return {k: v for k, v in {**counters["inductor"], **counters["aot_autograd"]}.items()
            if k.startswith(("fxgraph_cache_", "autograd_cache_"))}


def model_config(preset: str, vocab: int, sets: list[str]):
    """``preset``'s model with ``vocab`` words and the ``model.*`` overrides in ``sets`` (the others are
    the loop's: ``train.compile_mode=whole-step`` is refused on a config that is not CUDA's)."""
    import dataclasses

    from kolectra.core.config import override
    from kolectra.model import presets

    model_sets = [kv for kv in sets if kv.startswith("model.")]
    return dataclasses.replace(override(presets.preset(preset), model_sets).model, vocab_size=vocab)


def loop_config(preset: str, device: str, sets: list[str]):
    """The pretrain loop's config for ``loop_host``: ``preset`` on ``device`` in its precision, ``sets`` applied."""
    from kolectra.core.config import override
    from kolectra.model import presets

    return override(presets.preset(preset), [f"train.device={device}", f"train.bf16={str(device == 'cuda').lower()}",
                                            *sets])


def time_variant(preset: str, variant: str, sets: list[str], shape: list, deadline: float,
                 device: str = "cuda") -> dict:
    """Child: the variant's runners for ``preset``, one after the other, each with its peak memory;
    timed steps stop a few seconds before ``deadline`` (wall clock, ``time.time()``); then, time
    left, a kernel profile of kolectra's step (eager, compiled or replayed from CUDA graphs), and a
    compiled step's cache hits. ``sets``: ``model.*`` overrides (``--set``); ``shape``: (batch,
    vocabulary[, the generator's sampler in place of the device's]); ``device``: to rehearse the phase on
    a CPU. Besides each step's seconds, the host's seconds to queue it (``host_s``)."""
    import torch

    sys.path.insert(0, str(HERE))
    import step_bench  # noqa: PLC0415 - the benchmarks folder's module, on the path just now

    batch, vocab, *sampler = shape
    model_cfg = model_config(preset, vocab, sets)
    names, mode = VARIANTS[variant]
    cuda = device == "cuda"
    out = {}
    for name in names:
        _progress(out, {name: {"status": "stopped in its first step (building, compiling, capturing)",
                               "started_at": time.time()}})
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        runner = step_bench.build_runner(name, model_cfg, SEQ_LEN, batch, bf16=True, device=device, fill=1.0,
                                         seed=0, compile_mode=mode, packed=True, sampler=(sampler or [None])[0])
        first = runner.step()  # a compiled variant compiles here
        cache = cache_counts() if name == "kolectra_compiled" else None
        _progress(out, {name: {"status": "stopped before its timed steps ended", "first_step_s": first}})
        for _ in range(WARMUP):
            runner.step()
        samples, queued = [], len(runner.host)
        while len(samples) < TIMED and time.time() < deadline - MARGIN_S:
            samples.append(runner.step())
        out[name] = {"samples_s": samples, "host_s": runner.host[queued:], "host_ms_by_part": part_medians(runner.parts[queued:]),
                     "first_step_s": first,
                     "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else 0,
                     **({"compile_cache": cache} if cache else {})}
        med = statistics.median(samples) if samples else 0.0
        if name != "naive_hf" and time.time() + PROFILED * 3 * med < deadline - MARGIN_S:
            try:
                out[name]["profile"] = kernel_profile(runner, graphs=mode == "reduce-overhead")
            except Exception as e:  # noqa: BLE001 - the timings stand without it; say why it is missing
                out[name]["profile"] = {"error": f"{type(e).__name__}: {e}"[:300]}
        del runner
        if cuda:
            torch.cuda.empty_cache()
        _progress(out)
    return out


def part_medians(parts: list[dict[str, float]]) -> dict[str, float]:
    """Steps' host seconds by part -> each part's median in milliseconds."""
    return {k: round(statistics.median(p[k] for p in parts) * 1e3, 3) for k in (parts[0] if parts else {})}


class _Timed:
    """Host seconds spent in a callable, summed over calls (what the loop's parts cost to queue)."""

    def __init__(self, fn, totals: dict, key: str):
        self.fn, self.totals, self.key = fn, totals, key

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.totals[self.key] = self.totals.get(self.key, 0.0) + time.perf_counter() - t0


class _TimedBatches:
    """The loop's device batches, the host's time to hand each over counted (``next(run.batches)``)."""

    def __init__(self, batches, totals: dict):
        self.batches, self.next = batches, _Timed(lambda: next(batches), totals, "batches")

    def __next__(self):
        return self.next()

    def __getattr__(self, name):
        return getattr(self.batches, name)


def loop_host(out: str, examples: str, steps: int, sets: list[str], deadline: float, device: str = "cuda",
              preset: str = "small") -> dict:
    """Child: the real ``kolectra pretrain`` loop (``train.start``, ``train_step``) on ``device`` with its
    defaults, in this process, ``steps`` steps after the first (which compiles) and a few warm-up ones,
    with no metrics line among them; the host's seconds a step in each part of ``train_step`` (the
    step function, backward, normalizers, clipping, AdamW, zero_grad, the batches' hand-off, the metric
    sums, the schedule) against the wall seconds a step once the device caught up. On a GPU the parts
    are queueing times: when their sum is near the wall time, the host bounds the loop; the rest of
    the host's time a step (``other``) is the loop's own Python. With ``train.compile_mode=whole-step``
    the step's parts were recorded before the timed steps: ``other`` is then mostly the replay."""
    import dataclasses
    import shutil
    import tempfile

    import torch

    from kolectra.model import optim, rtd, runtime, train
    from kolectra.pipeline.store.factory import open_store

    store = open_store(out)
    ex = store.require(examples, "examples")
    vocab = store.require(ex.parent_of_kind(store, "vocab"), "vocab")
    bf16 = device == "cuda"
    cfg = loop_config(preset, device, sets)
    warm = 5
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=1_000_000, log_every=10_000_000, save_every=0))
    inputs = train.read_inputs(cfg, Path(ex.path), Path(vocab.path))
    dev = runtime.resolve(device, bf16, 0, "")
    work = Path(tempfile.mkdtemp(prefix="kolectra-loop-host-"))  # the run's folder (metrics.jsonl), not the store's
    run = train.start(cfg, inputs, Path(ex.path), work, dev, resume=False)
    t0 = time.perf_counter()
    train.first_step(run, 0)
    first_s = time.perf_counter() - t0
    for step in range(1, 1 + warm):
        train.train_step(run, step)
    dev.synchronize()
    totals: dict[str, float] = {}
    saved = (run.step_fn, run.dev.clip_grads, run.optimizer.step, run.optimizer.zero_grad, run.log.add, run.batches,
             rtd.normalizers, optim.set_lr, torch.Tensor.backward)
    run.step_fn = _Timed(run.step_fn, totals, "step_function")
    run.dev.clip_grads = _Timed(run.dev.clip_grads, totals, "clip_grads")
    run.optimizer.step = _Timed(run.optimizer.step, totals, "optimizer")
    run.optimizer.zero_grad = _Timed(run.optimizer.zero_grad, totals, "zero_grad")
    run.log.add = _Timed(run.log.add, totals, "metric_sums")
    run.batches = _TimedBatches(run.batches, totals)
    rtd.normalizers = _Timed(rtd.normalizers, totals, "normalizers")
    optim.set_lr = _Timed(optim.set_lr, totals, "set_lr")
    backward = torch.Tensor.backward
    torch.Tensor.backward = lambda self, *a, **k: _Timed(backward, totals, "backward")(self, *a, **k)
    done, host = 0, 0.0
    try:
        t0 = time.perf_counter()
        while done < steps and time.time() < deadline - MARGIN_S:
            s0 = time.perf_counter()
            train.train_step(run, 1 + warm + done)
            host += time.perf_counter() - s0
            done += 1
        dev.synchronize()
        wall = time.perf_counter() - t0
    finally:
        (run.step_fn, run.dev.clip_grads, run.optimizer.step, run.optimizer.zero_grad, run.log.add, run.batches,
         rtd.normalizers, optim.set_lr, torch.Tensor.backward) = saved
        dev.close()  # the loader's read-ahead thread, the CPU's thread setting
        shutil.rmtree(work, ignore_errors=True)
    if not done:
        return {"status": "no timed step within the budget", "first_step_s": round(first_s, 2)}
    parts = {k: round(v / done * 1e3, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}
    host_ms = host / done * 1e3
    return {"status": "ok", "steps": done, "first_step_s": round(first_s, 2), "compile_mode": run.compile_mode,
            "wall_ms_per_step": round(wall / done * 1e3, 3), "host_ms_per_step": round(host_ms, 3),
            "host_ms_by_part": {**parts, "other": round(host_ms - sum(parts.values()), 3)},
            "tokens_per_s": round(done * cfg.train.batch_size * inputs.index.max_seq_length / wall, 1)}


def _progress(done: dict, current: dict | None = None) -> None:
    """A step phase's runners so far, and the one under way, into the file :func:`child` names: a phase
    stopped at its budget (a slow compile) still reports what it finished and where it stood."""
    if path := os.environ.get(PROGRESS_ENV):
        Path(path).write_text(json.dumps({**done, **(current or {})}))


def loop_windows(logged: list[dict]) -> tuple[list[dict], float | None]:
    """A run's metrics lines -> its windows after the first (step, tokens/s, MFU) and their median MFU."""
    windows = [{k: line.get(k) for k in ("step", "tokens_per_s", "mfu")} for line in logged[1:]]
    mfus = [w["mfu"] for w in windows if w["mfu"]]
    return windows, (round(statistics.median(mfus), 5) if mfus else None)


def kolectra(*args: str, timeout: float) -> subprocess.CompletedProcess:
    """The ``kolectra`` command of this Python (the installed entry point's own code); past ``timeout``
    seconds it is stopped and returns code 124 with the reason as its last line."""
    try:
        return subprocess.run([sys.executable, "-m", "kolectra.pipeline.cli", *args], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"kolectra {args[0]}: stopped at the phase's budget "
                                                          f"({timeout:.0f} s left)")


def build_examples(out: str, deadline: float) -> dict:
    """Child: the embedded sample -> corpus -> vocab -> examples, each named ``gpu-check`` in ``out``."""
    for stage in (["corpus", "--input", str(SAMPLE_REVIEWS)], ["vocab", "--corpus", NAME, "--vocab-size", "8000"],
                  ["examples", "--corpus", NAME, "--vocab", NAME, "--max-seq-length", str(SEQ_LEN)]):
        r = kolectra(*stage, "--out", out, "--name", NAME, "-q", timeout=max(1.0, deadline - time.time()))
        if r.returncode:
            return {"status": "failed", "stage": stage[0], "error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return {"status": "ok", "examples": NAME}


def run_pretrain(out: str, examples: str, steps: int, sets: list[str], deadline: float, device: str = "cuda",
                 preset: str = "small") -> dict:
    """Child: a real ``kolectra pretrain`` on ``device`` with its defaults (CUDA: compiled, CUDA graphs);
    its record and health. (``device`` and ``preset`` other than CUDA's small: to try the phase elsewhere.)"""
    t0 = time.perf_counter()
    r = kolectra("pretrain", "--examples", examples, "--preset", preset, "--device", device, "--steps", str(steps),
                 "--set", "train.bf16=true", "--set", "train.log_every=50",
                 *[a for kv in sets for a in ("--set", kv)], "--out", out, "--name", NAME,
                 "--force", timeout=max(1.0, deadline - MARGIN_S - time.time()))
    lines = r.stderr.strip().splitlines()
    print(r.stderr, file=sys.stderr)  # the run's own progress, for whoever watches the check
    if r.returncode:
        return {"status": "failed", "error": (lines or ["?"])[-1]}
    from kolectra.model.health import status_text
    from kolectra.pipeline.store.factory import open_store

    art = open_store(out).resolve(NAME, "checkpoint")
    stats, compute = art.manifest.get("stats", {}), art.manifest.get("compute", {})
    logged = [json.loads(ln) for ln in (Path(art.path) / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    last = logged[-1] if logged else {}
    windows, median_mfu = loop_windows(logged)
    first = next((ln for ln in lines if "step 1 took" in ln), None)
    return {"status": "ok", "seconds": round(time.perf_counter() - t0, 1), "first_step_line": first,
            # compute's "step" is how the step ran ("eager" or "compiled (mode)"); stats' "steps" how many
            "step_mode": compute.get("step"), "steps": stats.get("steps"), "wall_seconds": compute.get("wall_seconds"),
            "mfu_whole_run": compute.get("mfu"),  # the first step's compiling included
            # the last logged window: the loop's own pace once compiled (the step's, within 5 %: issue 45)
            "last_window": {k: last.get(k) for k in ("step", "tokens_per_s", "mfu")},
            "windows": windows, "median_window_mfu": median_mfu,
            "final": stats.get("final"), "health": status_text(stats["health"]) if "health" in stats else None}


def run_finetune(out: str, deadline: float, device: str = "cuda") -> dict:
    """Child: ``kolectra finetune nsmc`` of the pretraining phase's checkpoint on the embedded NSMC
    sample (1,800 training reviews, one epoch) on ``device`` with its defaults (CUDA: a compiled
    forward over a few fixed batch widths): its seconds, its compile lines and its scores."""
    t0 = time.perf_counter()
    train, test = SAMPLE_NSMC
    r = kolectra("finetune", "nsmc", "--model", NAME, "--train", str(train), "--test", str(test), "--epochs", "1",
                 "--set", f"device={device}", *(["--set", "bf16=true"] if device == "cuda" else []),
                 "--out", out, "--name", NAME, "--force", timeout=max(1.0, deadline - MARGIN_S - time.time()))
    lines = r.stderr.strip().splitlines()
    if r.returncode:
        return {"status": "failed", "error": (lines or ["?"])[-1]}
    from kolectra.pipeline.store.factory import open_store

    stats = open_store(out).resolve(NAME, "eval").manifest.get("stats", {})
    return {"status": "ok", "seconds": round(time.perf_counter() - t0, 1),
            "compile_lines": [ln for ln in lines if "compil" in ln][:4],
            **{k: stats.get(k) for k in ("accuracy", "dev_accuracy", "train_examples")}}


CHILDREN = {"step": time_variant, "examples": build_examples, "pretrain": run_pretrain, "finetune": run_finetune,
            "loop_host": loop_host}
