"""The one place that knows which accelerator pretraining runs on (cpu, cuda or xla).

The training loop talks to a :class:`Device` only: move a batch there, open the autocast
context, average gradients across ranks, mark the end of a step, read metrics back at log time.
On XLA, ``step_done`` cuts the lazily traced graph (one compiled program per step, reused while
shapes stay static); on CPU and CUDA it does nothing. ``torch_xla`` is imported only when asked
for.

Data parallelism: under ``torchrun`` (RANK / WORLD_SIZE / LOCAL_RANK in the environment) the
device joins a process group (gloo on CPU, nccl on CUDA) and ``all_reduce_grads`` averages the
gradients in one flat collective after the backward passes of a step. That is plain synchronous
data parallelism, the same maths as DDP without its hooks, so the loop keeps calling the
generator and discriminator directly.
"""

from __future__ import annotations

import contextlib
import os
import random

import numpy as np
import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


class Device:
    name = "cpu"
    backend = "gloo"

    def __init__(self, bf16: bool = False, cpu_threads: int = 0):
        self.bf16 = bf16
        self.torch_device = torch.device("cpu")
        self._threads_before = torch.get_num_threads()
        if cpu_threads > 0:
            torch.set_num_threads(cpu_threads)
        self.rank = int(os.environ.get("RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        self._own_group = False
        if self.world_size > 1 and not dist.is_initialized():
            dist.init_process_group(self.backend)
            self._own_group = True

    @property
    def is_main(self) -> bool:
        """Rank 0 writes metrics, checkpoints' shared state and the export."""
        return self.rank == 0

    def close(self) -> None:
        """Give the process back its thread setting (stages share one process in `kolectra run`)."""
        torch.set_num_threads(self._threads_before)
        if self._own_group:
            dist.destroy_process_group()

    def all_reduce_grads(self, params: list[torch.Tensor]) -> None:
        """Average gradients over ranks (no-op for a single process)."""
        if self.world_size == 1:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        flat /= self.world_size
        for p, g in zip(params, _unflatten_dense_tensors(flat, grads)):
            if p.grad is None:
                p.grad = g
            else:
                p.grad.copy_(g)

    def mean_over_ranks(self, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Metric sums averaged over ranks, at log time only."""
        if self.world_size == 1:
            return values
        keys = sorted(values)
        stacked = torch.stack([torch.as_tensor(values[k], device=self.torch_device).float() for k in keys])
        dist.all_reduce(stacked)
        return dict(zip(keys, stacked / self.world_size))

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def seed(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)

    def to_device(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(v).to(self.torch_device) for k, v in batch.items()}

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

    def save(self, obj, path) -> None:
        torch.save(obj, path)

    def rng_state(self) -> dict:
        return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}

    def set_rng_state(self, state: dict) -> None:
        torch.set_rng_state(state["torch"])
        np.random.set_state(state["numpy"])
        random.setstate(state["python"])

    def describe(self) -> str:
        return f"cpu ({torch.get_num_threads()} threads)"


class CudaDevice(Device):
    name = "cuda"
    backend = "nccl"

    def __init__(self, bf16: bool = False, cpu_threads: int = 0):
        if not torch.cuda.is_available():
            raise RuntimeError("train.device=cuda but torch sees no CUDA device")
        super().__init__(bf16, cpu_threads)
        self.torch_device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
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
        torch.cuda.set_rng_state(state["cuda"], self.torch_device)

    def describe(self) -> str:
        return f"cuda ({torch.cuda.get_device_name(self.torch_device)})"


class XlaDevice(Device):
    name = "xla"
    backend = "xla"  # registered by torch_xla.distributed.xla_backend (multi-process XLA: untested)

    def __init__(self, bf16: bool = False, cpu_threads: int = 0):
        import torch_xla  # noqa: F401  (only here: the one module that knows the accelerator)
        import torch_xla.core.xla_model as xm

        if int(os.environ.get("WORLD_SIZE", 1)) > 1:
            import torch_xla.distributed.xla_backend  # noqa: F401
        super().__init__(bf16, cpu_threads)
        self._torch_xla, self._xm = torch_xla, xm
        self.torch_device = torch_xla.device()

    def seed(self, seed: int) -> None:
        super().seed(seed)
        self._xm.set_rng_state(seed, device=self.torch_device)

    def autocast(self):
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast("xla", dtype=torch.bfloat16)

    def step_done(self) -> None:
        self._torch_xla.sync()

    def synchronize(self) -> None:
        self._xm.wait_device_ops()

    def rng_state(self) -> dict:
        return {**super().rng_state(), "xla": self._xm.get_rng_state(device=self.torch_device)}

    def set_rng_state(self, state: dict) -> None:
        super().set_rng_state(state)
        self._xm.set_rng_state(state["xla"], device=self.torch_device)

    def save(self, obj, path) -> None:
        self._xm.save(obj, path)  # moves device tensors to the host first

    def extra_metrics(self) -> dict:
        import torch_xla.debug.metrics as met

        data = met.metric_data("CompileTime")
        return {"xla_compiles": int(data[0]) if data else 0}

    def describe(self) -> str:
        return f"xla ({self._xm.xla_device_hw(self.torch_device)})"


def resolve(name: str, bf16: bool = False, cpu_threads: int = 0) -> Device:
    kinds = {"cpu": Device, "cuda": CudaDevice, "xla": XlaDevice}
    if name not in kinds:
        raise ValueError(f"unknown device {name!r} (known: {', '.join(kinds)})")
    return kinds[name](bf16, cpu_threads)
