"""The one place that knows which accelerator a training run is on (cpu, cuda or xla).

Pretraining (:mod:`kolectra.model.train`) and fine-tuning (:mod:`kolectra.finetune.loop`) both
get a device from :func:`kolectra.model.runtime.resolve`. The training loop talks to a :class:`Device` only: move a batch there, open the autocast
context, average gradients across ranks, mark the end of a step, read metrics back at log time.
On XLA, ``step_done`` cuts the lazily traced graph (one compiled program per step, reused while
shapes stay static); on CPU and CUDA it does nothing. The XLA side lives in :mod:`model.xla`,
which imports ``torch_xla`` only when asked for; :func:`kolectra.model.runtime.resolve` picks one.

Two hooks keep the host out of the device's way on every accelerator: ``batches`` turns the
examples loader into an iterator of device batches (on XLA torch-xla's background device
loader; elsewhere a plain upload), and ``read_back`` hands metric tensors to a callback once
their values exist (on XLA a step closure, elsewhere at once). On the CPU, ``place`` also swaps in
kolectra's cheaper dropout (:mod:`model.cpu_dropout`, for Hugging Face task models too: their 2-D
padding masks reach it as additive masks) and has the allocator keep freed memory for the next
step (:mod:`model.cpu_memory`). ``static_shapes`` tells a loop whether to pad every batch to one
width (XLA).

Data parallelism: under ``torchrun`` (RANK / WORLD_SIZE / LOCAL_RANK in the environment, read by
:mod:`model.launcher`) the device joins a process group (gloo on CPU, nccl on CUDA) and
``all_reduce_grads`` averages the gradients in one flat collective after the backward passes of a step. That is plain synchronous
data parallelism, the same maths as DDP without its hooks, so the loop keeps calling the
generator and discriminator directly.
"""

from __future__ import annotations

import contextlib
import random
import re
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from kolectra.core.errors import EnvironmentProblem, UserInputError
from kolectra.core.stage import progress
from kolectra.model import cpu_memory, rank_failures, step_graph
from kolectra.model.launcher import check_rendezvous, launcher_rank_and_world, local_rank, not_one_of_tasks

# Dense peak TFLOP/s of one GPU from its vendor's datasheet: (bf16 tensor cores, float32 as TF32
# tensor cores, which CudaDevice turns on); SXM parts unless named. Matched as whole words of the
# name torch reports, the more specific first (an "H100 PCIe" is also an "H100"); "RTX A1000" is
# no "A100", "L40" no "L4". A GPU not listed, or a MIG slice of one, has no peak here: MFU is then
# left out unless train.peak_tflops gives one.
GPU_PEAK_TFLOPS = (("GH200", 989.0, 494.0), ("H200 NVL", 835.0, 417.0), ("H200", 989.0, 494.0),
                   ("H100 NVL", 835.0, 417.0), ("H100 PCIe", 756.0, 378.0), ("H100", 989.0, 494.0),
                   ("A100", 312.0, 156.0), ("L40S", 362.0, 183.0), ("L40", 181.0, 90.5), ("L4", 121.0, 60.0))


def gpu_peak_tflops(name: str, bf16: bool) -> float:
    """The datasheet peak of the GPU called ``name`` (as torch names it) in the step's precision; 0 if unknown."""
    if re.search(r"\bMIG\b", name):  # a slice: its share of the whole GPU is not in the name
        return 0.0
    for key, bf16_peak, tf32_peak in GPU_PEAK_TFLOPS:
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", name, re.IGNORECASE):
            return bf16_peak if bf16 else tf32_peak
    return 0.0


def slow_cpu_bf16_note() -> str | None:
    """A warning when this CPU has no native bf16 (AVX-512 BF16 or AMX): oneDNN then has no bf16
    kernels and matmuls fall back to a reference loop, tens of times slower than fp32 (an
    AVX2-only EPYC with torch 2.9, measured when this was written)."""
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():  # noqa: SLF001 - torch has no public query for native bf16
        return None
    return ("WARNING: bf16 was asked for, but this CPU has no native bf16 (AVX-512 BF16 or AMX): its bf16 "
            "matmuls run tens of times slower than float32. Set bf16=false on this machine.")


class Device:
    name = "cpu"
    backend = "gloo"
    # The generator's sampler (model/rtd.py): on the CPU, drawing a Gumbel noise value per
    # vocabulary entry (35k per masked slot) cost more than the rest of the generator's head;
    # the inverse CDF draws one uniform per slot from the same distribution.
    sampler = "inverse_cdf"
    # AdamW as one fused kernel over all parameters (CPU and CUDA; 5x faster than the per-tensor
    # loop for a small model on the CPU, benchmarks/pretrain.py).
    fused_optimizer = True
    # Whether every batch must have the same shape (XLA compiles one program per shape): then
    # fine-tuning pads its batches to max_length instead of to their longest row.
    static_shapes = False
    # The form of packed rows' attention mask (model/attention.py): a dense float bias, which the
    # CPU's eager attention formula adds (model/cpu_dropout.py) and XLA's static program keeps.
    attention = "bias"
    # torch.compile's mode for a training step when the config leaves it at "auto"; None = eager.
    # The CPU stays eager: Inductor compiled mini's step for 148 s on the Intel VM for 1.06-1.16x
    # (docs/benchmarks.md), and XLA compiles the step itself.
    compile_default: str | None = None

    def __init__(self, bf16: bool = False, cpu_threads: int = 0, xla_cache_dir: str = ""):
        self.bf16 = bf16
        self._batches: list[Batches] = []
        self.torch_device = torch.device("cpu")
        self._threads_before = torch.get_num_threads()
        if cpu_threads > 0:
            torch.set_num_threads(cpu_threads)
        self.rank, self.world_size = launcher_rank_and_world()
        self._own_group = False
        if self.world_size > 1 and not dist.is_initialized():
            check_rendezvous(self.world_size)  # env://'s own words were an internal error
            dist.init_process_group(self.backend)
            self._own_group = True

    @classmethod
    def rank_and_world(cls, xla_cache_dir: str = "") -> tuple[int, int]:
        """This process's (rank, number of ranks) in a data-parallel run on this device, known before
        the device is built: the store decides from it, before training starts, which process reserves
        and publishes a build and which follow it (``pipeline/store/followers.py``). CPU and CUDA: the
        launcher's (``torchrun``); a task of ``srun`` or ``mpirun`` without it is refused."""
        not_one_of_tasks()
        return launcher_rank_and_world()

    @property
    def chips(self) -> int:
        """How many devices run the step, each with the peak of :meth:`peak_flops` (or
        ``train.peak_tflops``), for MFU: one per rank here; on XLA every device of the mesh."""
        return self.world_size

    @property
    def is_main(self) -> bool:
        """Rank 0 writes metrics, checkpoints' shared state and the export."""
        return self.rank == 0

    def close(self) -> None:
        """Give the process back its thread setting and spare memory (stages share one process in
        `kolectra run`)."""
        torch.set_num_threads(self._threads_before)
        cpu_memory.give_back()
        for b in self._batches:
            b.close()
        if self._own_group:
            dist.destroy_process_group()

    def all_reduce_grads(self, params: list[torch.Tensor]) -> None:
        """Average gradients over ranks (no-op for a single process)."""
        if self.world_size == 1:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = _flatten_dense_tensors(grads)
        self._collective(dist.all_reduce, flat, doing="during a training step")
        flat /= self.world_size
        for p, g in zip(params, _unflatten_dense_tensors(flat, grads)):
            if p.grad is None:
                p.grad = g
            else:
                p.grad.copy_(g)

    def clip_grads(self, params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
        """``torch.nn.utils.clip_grad_norm_(params, max_norm)`` in the same ops, so the same values:
        the 2-norm of every gradient's 2-norm, and the gradients scaled by min(1, max_norm / (norm +
        1e-6)). torch's moves each gradient's norm to the first one's device, a ``.to`` per parameter
        (402 at ``small``): on the CPU 11.7 against 9.2 ms a step, on a GPU host time between steps.
        XLA keeps torch's function (its foreach support is torch's to judge)."""
        grads = [p.grad for p in params if p.grad is not None]
        if self.torch_device.type not in ("cpu", "cuda") or not grads:
            return torch.nn.utils.clip_grad_norm_(params, max_norm)
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)  # noqa: SLF001 - as torch calls it
        torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm

    def mean_over_ranks(self, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Metric sums averaged over ranks, at log time only."""
        if self.world_size == 1:
            return values
        keys = sorted(values)
        stacked = torch.stack([torch.as_tensor(values[k], device=self.torch_device).float() for k in keys])
        self._collective(dist.all_reduce, stacked)
        return dict(zip(keys, stacked / self.world_size))

    def barrier(self) -> None:
        if self.world_size > 1:
            self._collective(dist.barrier)

    @staticmethod
    def _collective(call: Callable, *args, doing: str = "", **kwargs) -> None:
        """``call(*args, **kwargs)``, a collective; where another rank's process ended (a failure of its
        own inside a step, a kill), gloo's error as one line saying so (NCCL waits for its timeout)."""
        try:
            call(*args, **kwargs)
        except RuntimeError as e:
            if (gone := rank_failures.peer_gone(e, doing)) is not None:
                raise gone from e
            raise

    @property
    def ranks_can_agree(self) -> bool:
        """Whether :meth:`any_rank` works: one process, or ranks in a torch.distributed group (not
        an XLA pod's hosts, which share one SPMD program and no host group)."""
        return self.world_size == 1 or dist.is_initialized()

    def any_rank(self, flag: bool) -> bool | None:
        """Whether ``flag`` is set on any rank; collective (every rank calls it, at the same step).
        One all-reduce of one number in the job's own group (on NCCL a device tensor, read back:
        callers ask at log steps, where the loss is read back anyway; no second group, so nothing
        beyond what the job's backend already connects). None where the ranks cannot agree
        (:attr:`ranks_can_agree`)."""
        found = self.ranks_with(flag)
        return None if found is None else bool(found)

    def ranks_with(self, flag: bool) -> list[int] | None:
        """The ranks where ``flag`` is set (a checkpoint save that failed there); collective: one
        all-reduce of one number a rank in the job's own group. None where the ranks cannot agree
        (:attr:`ranks_can_agree`)."""
        states = self.rank_states(int(flag))
        return None if states is None else [r for r, v in enumerate(states) if v]

    def rank_states(self, state: int) -> list[int] | None:
        """Every rank's ``state`` (small flags: a SIGTERM, a failure; :mod:`model.rank_failures`), by
        rank; collective: one all-reduce (MAX) of a world-size int vector in the job's own group (a
        CPU tensor on gloo, else a device tensor, read back). None where the ranks cannot agree."""
        if self.world_size == 1:
            return [state]
        if not self.ranks_can_agree:
            return None
        on = torch.device("cpu") if dist.get_backend() == "gloo" else self.torch_device
        value = torch.zeros(self.world_size, dtype=torch.int32, device=on)
        value[self.rank] = int(state)
        self._collective(dist.all_reduce, value, op=dist.ReduceOp.MAX)
        return value.tolist()

    def seed(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)

    def to_device(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(v).to(self.torch_device) for k, v in batch.items()}

    def place(self, module: torch.nn.Module) -> torch.nn.Module:
        """``module.to(device)``, keeping tied parameters tied.

        Moving to a device whose tensors cannot share a CPU tensor's storage (XLA) makes a new
        Parameter per module, which would silently untie, e.g., the generator's output layer from
        the shared word embeddings; every module that held one parameter gets the same moved one back.
        """
        places: dict[int, list[tuple[torch.nn.Module, str]]] = {}
        for mod in module.modules():
            for name, p in mod._parameters.items():  # noqa: SLF001 - tying parameters by identity: nn.Module's own table
                if p is not None:
                    places.setdefault(id(p), []).append((mod, name))
        module.to(self.torch_device)
        for (mod0, name0), *others in places.values():
            for mod, name in others:
                mod._parameters[name] = mod0._parameters[name0]  # noqa: SLF001 - tying parameters by identity: nn.Module's own table
        if self.torch_device.type == "cpu":
            if self.bf16 and (note := slow_cpu_bf16_note()):
                progress(note)
            # here, not at the top: it imports transformers (and torch._dynamo, about 3 CPU s), which a
            # stage that only finds its checkpoint built already never needs
            from kolectra.model import cpu_dropout  # noqa: PLC0415

            cpu_dropout.install(module)  # bernoulli_ is slow on the CPU (model/cpu_dropout.py)
            cpu_memory.keep_freed()  # no page faults for memory freed one step and taken the next
        if hasattr(module, "sampler"):
            module.sampler = self.sampler
        if hasattr(module, "use_attention"):
            module.use_attention(self.attention)
        return module

    def batches(self, loader, grad_accum: int, pad_id: int) -> "Batches":
        """The loop's input: ``next()`` gives ``(batch of device tensors, non-pad tokens)`` per micro-batch."""
        b = Batches(self, loader, grad_accum, pad_id)
        self._batches.append(b)
        return b

    def _device_steps(self, host_steps):
        """Host step batches -> device step batches (XLA overrides: background device loader)."""
        for arrays, tokens, state in host_steps:
            yield self.to_device(arrays), tokens, state

    def zeros_like(self, t: torch.Tensor) -> torch.Tensor:
        """Zeros of ``t``'s shape and dtype on this device, to start a running sum (on XLA uploaded
        device data, not a traced op)."""
        return torch.zeros(t.shape, dtype=t.dtype, device=self.torch_device)

    def read_back(self, tensors: dict[str, torch.Tensor], then: Callable[[dict], None]) -> None:
        """Call ``then`` with the tensors as Python numbers (0-d: float, else a flat list), averaged
        over ranks, once they are computed: here at once, in one transfer; on XLA in a step closure."""
        flat = [t.detach().float().reshape(-1).to(self.torch_device) for t in tensors.values()]
        values = self.mean_over_ranks({"packed": torch.cat(flat)})["packed"].tolist()
        then(unpack(tensors, values))

    def flush(self) -> None:
        """Deliver what ``read_back`` still holds back (nothing here)."""

    def autocast(self):
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.torch_device.type, dtype=torch.bfloat16)

    def step_done(self) -> None:
        """End of one optimizer step."""

    def synchronize(self) -> None:
        """Wait for queued work (only for wall-clock measurements at log time)."""

    def extra_metrics(self) -> dict:
        """Device-specific fields for metrics.jsonl."""
        return {}

    def peak_flops(self) -> float:
        """Peak FLOP/s of one device for MFU; 0 = unknown (then ``train.peak_tflops`` may say)."""
        return 0.0

    def compile_choice(self, compile: bool | str, mode: str = "auto", grad_accum: int = 1) -> str | None:
        """torch.compile's mode for the training step, or None to run it eagerly.

        ``compile`` (true, false or "auto") and ``mode`` ("auto", "default" or "reduce-overhead") as
        configured: a mode named compiles; "auto" is this device's :attr:`compile_default`, without
        CUDA graphs when gradients accumulate over micro-steps (each replay reuses its buffers)."""
        if compile is False:
            return None
        if mode != "auto":
            return mode
        if compile == "auto" and self.compile_default is None:
            return None
        chosen = self.compile_default or "default"
        return "default" if chosen == "reduce-overhead" and grad_accum != 1 else chosen

    def speed_note(self, compiled: bool) -> str | None:
        """One line for the start of a run when this device has a faster setting the run does not use."""
        return None

    def whole_step(self, step: Callable) -> Callable:
        """``step`` (one whole update) recorded once and replayed: CUDA only (model/step_graph.py)."""
        raise UserInputError(f"train.compile_mode=whole-step records a CUDA graph: not on {self.name}")

    def save(self, obj, path) -> None:
        torch.save(obj, path)

    def rng_state(self) -> dict:
        return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}

    def set_rng_state(self, state: dict) -> None:
        torch.set_rng_state(state["torch"])
        np.random.set_state(state["numpy"])
        random.setstate(state["python"])

    def describe(self) -> str:
        n = torch.get_num_threads()
        return f"cpu ({n} thread{'s' if n != 1 else ''})"


class CudaDevice(Device):
    name = "cuda"
    backend = "nccl"
    sampler = "gumbel"  # Philox noise is cheap on the GPU: the reference code's sampler
    # A FlexAttention block mask: fused, block-sparse, no dense mask (booleans for SDPA where the
    # encoders have attention dropout, which FlexAttention lacks).
    attention = "flex"
    # Eager, the step waits on Python launching its ~2,450 kernels; compiled and replayed as CUDA
    # graphs ELECTRA-Small's step ran 3.05x faster on an H200 after about 50 s of compiling
    # (docs/benchmarks.md, "CUDA"). The shapes are static (examples are fixed-length rows).
    compile_default = "reduce-overhead"

    def __init__(self, bf16: bool = False, cpu_threads: int = 0, xla_cache_dir: str = ""):
        if not torch.cuda.is_available():
            raise EnvironmentProblem("device cuda asked for, but torch sees no CUDA device (install a CUDA build of "
                             "torch on a machine with a GPU, or use --device cpu)")
        local = local_rank(torch.cuda.device_count())  # before a process group is joined
        super().__init__(bf16, cpu_threads)
        self.torch_device = torch.device("cuda", local)
        torch.cuda.set_device(self.torch_device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def seed(self, seed: int) -> None:
        super().seed(seed)
        torch.cuda.manual_seed_all(seed)

    def to_device(self, batch):
        return {k: torch.from_numpy(v).pin_memory().to(self.torch_device, non_blocking=True) for k, v in batch.items()}

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.torch_device)

    def rng_state(self) -> dict:
        return {**super().rng_state(), "cuda": torch.cuda.get_rng_state(self.torch_device)}

    def set_rng_state(self, state: dict) -> None:
        super().set_rng_state(state)
        if "cuda" in state:  # absent in a checkpoint written on another device
            torch.cuda.set_rng_state(state["cuda"], self.torch_device)

    def describe(self) -> str:
        return f"cuda ({torch.cuda.get_device_name(self.torch_device)})"

    def peak_flops(self) -> float:
        return gpu_peak_tflops(torch.cuda.get_device_name(self.torch_device), self.bf16) * 1e12

    def speed_note(self, compiled: bool) -> str | None:
        # Eager, the step launches each of its many small kernels from Python, and at ELECTRA-Small's
        # size that launching is what the GPU waits for (docs/benchmarks.md, "CUDA").
        if compiled:
            return None
        return ("on a GPU the eager step waits on launching its many small kernels: train.compile=auto (the "
                "default) fuses them after about a minute of compiling and, with train.grad_accum=1, replays "
                "the step as CUDA graphs (docs/pretraining.md#gpus)")

    def whole_step(self, step: Callable) -> Callable:
        if self.world_size > 1:  # NCCL's all-reduce inside a recorded graph is not measured here yet
            raise UserInputError("train.compile_mode=whole-step records one process's update: under torchrun "
                                 "use train.compile_mode=reduce-overhead (or auto)")
        return step_graph.StepGraph(step, capture=True)


def compiled(step_fn: Callable, mode: str) -> Callable:
    """``step_fn`` under ``torch.compile`` in ``mode`` (pretraining's step, a fine-tuned model's forward).

    With ``reduce-overhead`` Inductor records the step as CUDA graphs and replays them into the same
    output buffers, so each call is marked as a new iteration: torch then knows the last one's
    outputs are done with (the loop has run the loss's backward and added the metric sums into its
    log by then) instead of guessing where an iteration starts."""
    # whole-step: compiled without Inductor's graphs; the trainer records the whole update instead
    fn = torch.compile(step_fn, mode=None if mode in ("default", "whole-step") else mode)
    if mode != "reduce-overhead":
        return fn

    def step(*args, **kwargs):
        torch.compiler.cudagraph_mark_step_begin()
        return fn(*args, **kwargs)

    return step


def unpack(tensors: dict[str, torch.Tensor], values: list[float]) -> dict:
    """Flat values back into the shapes of ``tensors``: 0-d -> float, else a flat list."""
    out, i = {}, 0
    for k, t in tensors.items():
        n = t.numel()
        out[k] = values[i] if t.dim() == 0 else values[i:i + n]
        i += n
    return out


class Batches:
    """Micro-batches for the loop, read ``grad_accum`` at a time (one optimizer step) from the loader.

    A step's micro-batches travel together as ``[grad_accum, B, L]`` arrays, so a device loader
    with read-ahead moves whole steps and the loop's graph stays one per step. Read-ahead runs the
    examples loader ahead of training; ``state_dict`` therefore reports the loader position after
    the last step handed out, which is where a resumed run must continue.
    """

    def __init__(self, dev: Device, loader, grad_accum: int, pad_id: int):
        self.dev, self.loader, self.grad_accum, self.pad_id = dev, loader, grad_accum, pad_id
        self._steps = None
        self._pending: list[tuple[dict[str, torch.Tensor], int]] = []
        self._state: dict | None = None

    def _host_steps(self):
        while True:
            micro = [next(self.loader) for _ in range(self.grad_accum)]
            tokens = [int((m["input_ids"] != self.pad_id).sum()) for m in micro]  # counted on the host: no sync
            arrays = {k: np.stack([m[k] for m in micro]) for k in micro[0]}
            yield arrays, tokens, self.loader.state_dict()

    def __iter__(self):
        return self

    def __next__(self) -> tuple[dict[str, torch.Tensor], int]:
        if not self._pending:
            if self._steps is None:
                self._steps = iter(self.dev._device_steps(self._host_steps()))  # noqa: SLF001 - the device's own step feeder, shared with its loader
            step_GBL, tokens, self._state = next(self._steps)
            self._pending = [({k: v[i] for k, v in step_GBL.items()}, tokens[i]) for i in range(self.grad_accum)]
        return self._pending.pop(0)

    def state_dict(self) -> dict:
        return self._state if self._state is not None else self.loader.state_dict()

    def load_state_dict(self, state: dict) -> None:
        if self._steps is not None:
            raise RuntimeError("load the loader state before the first batch is read")
        self.loader.load_state_dict(state)

    def close(self) -> None:
        close = getattr(self._steps, "close", None)
        if close is not None:
            close()
