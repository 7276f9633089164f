"""The one place that knows which accelerator pretraining runs on (cpu, cuda or xla).

The training loop talks to a :class:`Device` only: move a batch there, open the autocast
context, mark the end of a step, read metrics back at log time. On XLA, ``step_done`` cuts the
lazily traced graph (one compiled program per step, reused while shapes stay static); on CPU
and CUDA it does nothing. ``torch_xla`` is imported only when asked for.
"""

from __future__ import annotations

import contextlib
import os
import random

import numpy as np
import torch


class Device:
    name = "cpu"

    def __init__(self, bf16: bool = False):
        self.bf16 = bf16
        self.torch_device = torch.device("cpu")

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

    def __init__(self, bf16: bool = False):
        if not torch.cuda.is_available():
            raise RuntimeError("train.device=cuda but torch sees no CUDA device")
        super().__init__(bf16)
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

    def __init__(self, bf16: bool = False):
        import torch_xla  # noqa: F401  (only here: the one module that knows the accelerator)
        import torch_xla.core.xla_model as xm

        super().__init__(bf16)
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

    def compiles(self) -> int:
        import torch_xla.debug.metrics as met

        return int(met.metric_data("CompileTime")[0]) if met.metric_data("CompileTime") else 0

    def describe(self) -> str:
        return f"xla ({self._xm.xla_device_hw(self.torch_device)})"


def resolve(name: str, bf16: bool = False) -> Device:
    kinds = {"cpu": Device, "cuda": CudaDevice, "xla": XlaDevice}
    if name not in kinds:
        raise ValueError(f"unknown device {name!r} (known: {', '.join(kinds)})")
    return kinds[name](bf16)
