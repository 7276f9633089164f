"""Step-time comparison: kolectra's RTD step against a straightforward Hugging Face one.

For ``benchmarks/pretrain.py``. The naive step is what one writes first with transformers'
stock pieces: BERT-style Bernoulli masking (a data-dependent number of masked tokens), the
generator's full ``forward(labels=...)`` (vocabulary logits at every position), sampling with
softmax + ``torch.multinomial`` on the boolean-indexed masked rows, the discriminator's
``forward(labels=...)`` (boolean-indexed loss) and 2-D attention masks. Ours: static N slots,
generator head only at those slots, one softmax for the loss and the sample, gather/weight
losses, a 4-D bias (:mod:`model.rtd`), fused AdamW, and on the CPU the trainer's cheaper dropout
(:mod:`model.cpu_dropout`), inverse-CDF sampler and allocator settings (:mod:`model.cpu_memory`).
Both train the same :class:`ElectraPair` (same initial weights, same optimizer settings) on the
same random batches, in the same precision. ``naive_keeps_memory=True`` gives the naive step's
process the same allocator settings, to tell what they add from what the step's design does.

Timing on a shared machine is noisy, so the two are interleaved step by step (A B A B ...) and
the medians compared. Each runs in a process of its own, so that neither's allocations change
how the other's are served (glibc's heap is per process; see :func:`compare`). With
``compile=True`` a third runner, kolectra's step under ``torch.compile`` (``train.compile=true``:
one graph, no breaks, Inductor's fused kernels and its own vectorised RNG for dropout and the
Gumbel noise), joins the rotation; its compile time is reported apart. ``compile_mode`` is
``train.compile_mode`` (``reduce-overhead``: CUDA graphs, on CUDA), through the trainer's own
wrapper (:func:`kolectra.model.device.compiled`).

On the CPU one more step of each runner runs under ``torch.profiler`` to split it into matrix
products and the rest: ``matmul_share`` per runner, and ``speedup_ceiling``, the speedup kolectra's
step would reach if everything in it but its matmuls took no time (naive median / kolectra's
matmul seconds), and ``top_other_ops``, the largest of the rest by op. When the ceiling sits
close to the speedup, the step is bound by the CPU's matmul throughput, which the two steps
share, not by anything a rewrite of the step could remove.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import statistics
import time

# The profiler's CUDA probe logs "gpuGetDeviceCount failed" on machines without a GPU; the runner
# processes inherit this before their torch starts.
os.environ.setdefault("KINETO_LOG_LEVEL", "5")
import torch  # noqa: E402

from kolectra.model import config, cpu_memory, presets, rtd
from kolectra.model.device import compiled
from kolectra.model.electra import ElectraPair, train_flops_per_sequence
from kolectra.model.runtime import resolve
from kolectra.model.train import build_optimizer


def naive_step(model: ElectraPair, ids_BL, types_BL, sp: rtd.Specials, obj: config.ObjectiveConfig,
               doc_BL=None) -> torch.Tensor:
    # packed rows (``doc_BL``) are read as one sequence a row: what a first version does (same FLOPs)
    attn_BL = (ids_BL != sp.pad_id).long()
    special = ~rtd.candidates(ids_BL, sp)
    chosen = torch.bernoulli(torch.full(ids_BL.shape, obj.mask_prob, device=ids_BL.device)).bool() & ~special
    to_mask = chosen & torch.bernoulli(torch.full(ids_BL.shape, obj.mask_token_prob, device=ids_BL.device)).bool()
    masked = ids_BL.masked_fill(to_mask, sp.mask_id)
    labels = ids_BL.masked_fill(~chosen, -100)
    gen = model.generator(input_ids=masked, attention_mask=attn_BL, token_type_ids=types_BL, labels=labels)
    with torch.no_grad():
        probs = torch.softmax(gen.logits[chosen].float() / obj.temperature, dim=-1)
        sampled = torch.multinomial(probs, 1).squeeze(-1)
    disc_in = ids_BL.clone()
    disc_in[chosen] = sampled
    disc = model.discriminator(input_ids=disc_in, attention_mask=attn_BL, token_type_ids=types_BL,
                               labels=(disc_in != ids_BL).long())
    return gen.loss + obj.disc_weight * disc.loss


def ours_step(model, ids_BL, types_BL, sp, obj, doc_BL=None) -> torch.Tensor:
    return rtd.electra_step(model, ids_BL, types_BL, sp, obj, doc_BL=doc_BL).loss


# GEMM kernels as torch's CPU profiler names them (self time: the kernel itself, not its callers).
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm"})


def step_profile(runner: "Runner") -> dict[str, float]:
    """Share of one profiled CPU step per torch op (self times: an op's own kernels, not its callees)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        runner.step()
    events = prof.key_averages()
    total = max(sum(e.self_cpu_time_total for e in events), 1e-9)
    return {e.key: e.self_cpu_time_total / total for e in events}


def matmul_share(profile: dict[str, float]) -> float:
    return sum(v for k, v in profile.items() if k in MATMUL_OPS)


def top_ops(profile: dict[str, float], n: int = 8) -> dict[str, float]:
    """The ``n`` largest shares besides the matmuls: where the rest of a step goes."""
    rest = sorted(((v, k) for k, v in profile.items() if k not in MATMUL_OPS), reverse=True)[:n]
    return {k: round(v, 4) for v, k in rest}


class Runner:
    """One implementation's model, optimizer and step; ``step()`` returns its wall seconds and
    records the minor page faults it took in ``faults`` (memory the allocator had to take back
    from the kernel: :mod:`model.cpu_memory`)."""

    def __init__(self, step_fn, model, batches, sp, obj, bf16: bool, fused: bool):
        self.step_fn, self.model, self.batches, self.sp, self.obj = step_fn, model, batches, sp, obj
        self.opt = build_optimizer(model, config.TrainConfig(), fused=fused)
        # host: each step's seconds to queue it; parts: its forward, backward, optimizer and zero_grad's shares
        self.bf16, self.i, self.faults, self.host, self.parts = bf16, 0, [], [], []
        self.device = next(model.parameters()).device

    def step(self) -> float:
        ids, types, doc = self.batches[self.i % len(self.batches)]
        self.i += 1
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
        ctx = torch.autocast(self.device.type, dtype=torch.bfloat16) if self.bf16 else contextlib.nullcontext()
        with ctx:
            loss = self.step_fn(self.model, ids, types, self.sp, self.obj, doc)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        self.opt.step()
        t3 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        # the host's time to queue the step: on a GPU, near the step's own time when the host bounds it
        t4 = time.perf_counter()
        self.host.append(t4 - t0)
        self.parts.append({"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2, "zero_grad": t4 - t3})
        float(loss.detach())  # both sides wait for the step to finish
        dt = time.perf_counter() - t0
        self.faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        return dt


def preset_model(preset: str, vocab_size: int, layers: int | None = None) -> config.ModelConfig:
    """A preset's model shapes (small++: KoELECTRA-Small-v3's, generator as wide as the discriminator)
    with ``vocab_size``, and ``layers`` in both networks when given."""
    m = dataclasses.replace(presets.preset(preset).model, vocab_size=vocab_size)
    if layers:
        m = dataclasses.replace(m, layers=layers, generator_layers=layers)
    return m


def _batches(V: int, sp: rtd.Specials, seq_len: int, batch_size: int, fill: float, seed: int, device: str,
             packed: bool = False):
    """Four random batches ``(ids, token types, doc ids or None)``: one pair of segments a row filled to
    ``fill``, or with ``packed`` the trainer's packed rows (``packing=isolated``): three sequences a row
    ([CLS] ... [SEP] each, lengths drawn per row), numbered 1-3, padding (0) after them."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    n = max(4, int(seq_len * fill))
    for _ in range(4):
        ids = torch.randint(5, V, (batch_size, seq_len), generator=g)
        if not packed:
            ids[:, 0], ids[:, n // 2], ids[:, n - 1], ids[:, n:] = sp.cls_id, sp.sep_id, sp.sep_id, sp.pad_id
            types = torch.zeros_like(ids)
            types[:, n // 2 + 1:n] = 1
            batches.append((ids.to(device), types.to(device), None))
            continue
        doc = torch.zeros_like(ids)
        for row in range(batch_size):
            # two cuts in the row's real tokens, each sequence at least 4 tokens long
            cuts = sorted((torch.randperm(n - 11, generator=g)[:2] + 4).tolist())
            bounds = [0, cuts[0], max(cuts[1], cuts[0] + 4), n]
            for k, (a, b) in enumerate(zip(bounds, bounds[1:]), 1):
                ids[row, a], ids[row, b - 1], doc[row, a:b] = sp.cls_id, sp.sep_id, k
        ids[:, n:] = sp.pad_id
        batches.append((ids.to(device), torch.zeros_like(ids).to(device), doc.to(device)))
    return batches


STEPS = ("kolectra", "naive_hf", "kolectra_compiled")


def build_runner(name: str, model_cfg: config.ModelConfig, seq_len: int, batch_size: int, bf16: bool,
                 device: str, fill: float, seed: int, naive_keeps_memory: bool = False, threads: int = 0,
                 compile_mode: str = "default", packed: bool = False, sampler: str | None = None) -> Runner:
    """One of :data:`STEPS` with its own model (same initial weights for all), optimizer and batches;
    ``threads`` > 0 sets the process's torch threads (both steps alike); ``packed``: the trainer's
    packed rows (:func:`_batches`), whose attention takes the device's mask form (model/attention.py);
    ``sampler``: the generator's sampler (``model.rtd.SAMPLERS``) in place of the device's."""
    if threads > 0:
        torch.set_num_threads(threads)
    V = model_cfg.vocab_size
    sp = rtd.Specials(vocab_size=V)
    dev = resolve(device)
    naive = name == "naive_hf"
    fn = naive_step if naive else compiled(ours_step, compile_mode) if name == "kolectra_compiled" else ours_step
    torch.manual_seed(seed)
    model = ElectraPair(model_cfg, V, sp.pad_id)
    # kolectra's models go where the trainer puts them (on the CPU with its cheaper dropout and
    # sampler) and get its optimizer; the naive step keeps torch's default AdamW (a per-tensor loop)
    model = (model.to(device) if naive else dev.place(model)).train()
    if sampler is not None:
        model.sampler = sampler
    if naive and naive_keeps_memory and device == "cpu":
        cpu_memory.keep_freed()
    batches = _batches(V, sp, seq_len, batch_size, fill, seed, device, packed)
    return Runner(fn, model, batches, sp, config.ObjectiveConfig(), bf16, fused=not naive and dev.fused_optimizer)


def _runner_answers(name: str, kwargs: dict) -> dict:
    """A runner's commands: "step" (seconds), "profile" (op shares), "faults" (page faults so far)."""
    runner = build_runner(name, **kwargs)
    return {"step": runner.step, "profile": lambda: step_profile(runner), "faults": lambda: runner.faults}


def _serve(conn, build, args: tuple) -> None:
    """A process of its own answering commands until "stop": ``build(*args)`` (a module-level
    function, so it pickles) returns {command: callable}."""
    try:
        answers = build(*args)
        conn.send(("ready", None))
        while (cmd := conn.recv()) != "stop":
            conn.send(("ok", answers[cmd]()))
    except Exception:  # noqa: BLE001 - the parent re-raises it with the child's traceback
        import traceback  # noqa: PLC0415 - only on failure

        conn.send(("error", traceback.format_exc()))


PRELOAD = ("torch", "transformers", "kolectra.model.electra", "kolectra.model.train")


class Served:
    """The parent's handle on what :func:`_serve` runs in a process of its own (forked from a fork
    server that has imported torch): each timed thing apart, so no one's allocations change how
    another's are served (also used by ``benchmarks/objectives.py``)."""

    def __init__(self, build, *args):
        import multiprocessing as mp  # noqa: PLC0415 - only when a served benchmark starts

        # A fork server: one process imports torch, transformers and kolectra's model (about 8 CPU
        # seconds) and each served process forks from it, a fresh heap each. Spawned processes paid
        # that import one by one: ten of them were most of objectives.py --quick. (Not "__main__":
        # the server runs it without the benchmarks folder on sys.path, so its own imports fail.)
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(list(PRELOAD))
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, build, args), daemon=True)
        self.proc.start()
        self._answer()

    def _answer(self):
        kind, value = self.conn.recv()
        if kind == "error":
            raise RuntimeError(f"benchmark process failed:\n{value}")
        return value

    def ask(self, cmd: str):
        self.conn.send(cmd)
        return self._answer()

    def close(self) -> None:
        self.conn.send("stop")
        self.proc.join(timeout=30)


def compare(model_cfg: config.ModelConfig, seq_len: int = 128, batch_size: int = 8, rounds: int = 5,
            warmup: int = 1, bf16: bool = False, device: str = "cpu", fill: float = 0.9, seed: int = 0,
            compile: bool = False, naive_keeps_memory: bool = False, threads: int = 0,
            compile_mode: str = "default") -> dict:
    """Median seconds per training step of both implementations, interleaved; ``fill`` = non-padding share.

    Each runner lives in a process of its own (:class:`Served`), stepped in turn by this one. In one
    process the two would share glibc's heap, and one step's allocations decide whether the
    other's large tensors come from reused memory or from fresh pages: on this project's VM that
    moved the naive step's speed by 20-35 % depending on what ran beside it.
    """
    V = model_cfg.vocab_size
    sp = rtd.Specials(vocab_size=V)
    obj = config.ObjectiveConfig()
    kwargs = dict(model_cfg=model_cfg, seq_len=seq_len, batch_size=batch_size, bf16=bf16, device=device,
                  fill=fill, seed=seed, naive_keeps_memory=naive_keeps_memory, threads=threads,
                  compile_mode=compile_mode)
    names = STEPS if compile else STEPS[:2]
    runners = {name: Served(_runner_answers, name, kwargs) for name in names}
    try:
        compile_s = runners["kolectra_compiled"].ask("step") if compile else None  # the first call compiles
        times = {name: [] for name in runners}
        for r in range(warmup + rounds):
            order = list(runners) if r % 2 == 0 else list(runners)[::-1]  # A B C, C B A, ... against drift
            for name in order:
                dt = runners[name].ask("step")
                if r >= warmup:
                    times[name].append(dt)
        # the timed rounds' page faults (before the profiled step adds one more)
        faults = {name: statistics.median(r.ask("faults")[-rounds:]) for name, r in runners.items()}
        profiles = {name: r.ask("profile") for name, r in runners.items()} if device == "cpu" else None
    finally:
        for r in runners.values():
            r.close()
    med = {name: statistics.median(ts) for name, ts in times.items()}
    shares = {name: matmul_share(prof) for name, prof in profiles.items()} if profiles else None
    batches = _batches(V, sp, seq_len, batch_size, fill, seed, "cpu")
    tokens = sum(int((b[0] != sp.pad_id).sum()) for b in batches) / len(batches)
    flops = batch_size * train_flops_per_sequence(model_cfg, V, seq_len, rtd.num_slots(obj.mask_prob, seq_len))
    return {"seconds_per_step": med, "steps_per_s": {k: 1.0 / v for k, v in med.items()},
            "tokens_per_s": {k: tokens / v for k, v in med.items()},
            "useful_flops_per_s": {k: flops / v for k, v in med.items()},
            "speedup": med["naive_hf"] / med["kolectra"], "flops_per_step": flops, "samples": times,
            "minor_faults_per_step": faults,
            # the two steps of a round ran back to back: their ratios show how far drift reaches
            "speedup_per_round_quartiles": statistics.quantiles(
                [n / k for n, k in zip(times["naive_hf"], times["kolectra"])], n=4, method="inclusive"),
            "matmul_share": shares, "top_other_ops": {k: top_ops(v) for k, v in profiles.items()} if profiles else None,
            "speedup_ceiling": med["naive_hf"] / (med["kolectra"] * shares["kolectra"]) if shares else None,
            **({"speedup_compiled": med["naive_hf"] / med["kolectra_compiled"],
                "compile_s": compile_s} if compile else {})}
