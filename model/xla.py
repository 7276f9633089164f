"""The XLA side of :mod:`model.device`: training on TPUs (and on the CPU through PJRT for tests).

Only this module imports ``torch_xla``. It keeps the pretrain loop's step one compiled program,
reused every step, with the host never waiting for the device:

- PJRT runtime, SPMD data parallelism: ``xr.use_spmd()`` and a 1-D mesh ``("data",)`` over every
  device of every host. Weights are replicated, each batch is split along its batch axis, and the
  SPMD partitioner inserts the gradient all-reduce itself, so the step needs no explicit
  collective (``xm.optimizer_step``'s reduction is a no-op under SPMD: one program, one process
  per host).
- Batches reach the device through torch-xla's ``MpDeviceLoader`` (background host-to-device
  copies, read-ahead), already sharded over the mesh; on several hosts each host loads its own
  slice of the global batch (``minibatch=True``).
- Metrics leave the device through step closures run right after the *next* step's graph has
  been dispatched, so the transfer overlaps that step instead of stalling the pipeline.
- Checkpoints go through ``xm.save`` (device tensors to the host first), the compiled programs
  through a persistent cache (``xr.initialize_cache``) when ``train.xla_cache_dir`` is set.
- bf16 is ``torch.autocast("xla", torch.bfloat16)`` (the deprecated ``XLA_USE_BF16`` is not used).
- ``extra_metrics`` reads torch-xla's own counters (compilations, graph executions, transfers to
  the host, aten fallbacks) for ``metrics.jsonl``: a recompile shows up as a growing ``xla_compiles``.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
import torch

from kolectra.core.errors import EnvironmentProblem, UserInputError
from kolectra.model.device import Device, unpack
from kolectra.model.launcher import launcher_rank_and_world


def counters() -> dict[str, int]:
    """torch-xla's process-wide counts: compilations, graph executions, device-to-host transfers, fallbacks.

    Host-side bookkeeping only: reading them never touches the device.
    """
    import torch_xla.debug.metrics as met

    def count(name: str) -> int:
        data = met.metric_data(name)
        return int(data[0]) if data else 0

    fallbacks = sum(met.counter_value(n) or 0 for n in met.counter_names() if n.startswith("aten::"))
    return {"xla_compiles": count("CompileTime"),
            # A single device runs ExecuteTime, SPMD runs ExecuteReplicatedTime.
            "xla_executions": count("ExecuteTime") + count("ExecuteReplicatedTime"),
            "xla_transfers_to_host": count("TransferFromDeviceTime"),
            "xla_aten_fallbacks": int(fallbacks)}


def _runtime(xla_cache_dir: str = ""):
    """torch-xla's modules, its runtime set up for kolectra's one SPMD program per host: refusals first
    (a torchrun launch, ``XLA_USE_BF16``, torch-xla missing), then the persistent compilation cache
    and ``use_spmd``, both before any XLA device is used. Called again by the device after
    :meth:`XlaDevice.rank_and_world` asked for the host index: both steps only set torch-xla's
    environment, so the second call changes nothing (``xr.process_index`` creates the PJRT client,
    but neither compiles nor fixes the SPMD mode: tests/test_store_pod_rank.py)."""
    if launcher_rank_and_world()[1] > 1:
        raise UserInputError("train.device=xla runs one process per host and spreads the batch over the "
                             "devices with SPMD; start it without torchrun")
    if os.environ.get("XLA_USE_BF16"):
        raise EnvironmentProblem("XLA_USE_BF16 is set: kolectra uses bf16 autocast (train.bf16=true) instead; unset it")
    try:
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.spmd as xs
        import torch_xla.runtime as xr
    except ImportError as e:  # not installed, or built for another torch (an undefined symbol)
        raise EnvironmentProblem(
            f"train.device=xla needs torch-xla, which does not load here ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:200]}; torch {torch.__version__}): install the `xla` extra, "
            "pip install 'kolectra[xla]' (in a clone: pip install -e '.[xla]'), which pins torch 2.9.0 and "
            "torch-xla 2.9.0 (docs/tpu.md)") from None

    if xla_cache_dir:
        if torch_xla._XLAC._xla_computation_cache_is_initialized():
            raise UserInputError(f"train.xla_cache_dir={xla_cache_dir!r}: torch-xla has compiled in this process "
                                 "already, too late to open a persistent cache")
        os.makedirs(xla_cache_dir, exist_ok=True)
        xr.initialize_cache(xla_cache_dir, readonly=False)
    xr.use_spmd()
    return torch_xla, xm, xs, xr


class XlaDevice(Device):
    name = "xla"
    backend = "xla"
    sampler = "gumbel"  # one fused graph; searchsorted has no XLA lowering in torch-xla 2.9
    fused_optimizer = False  # the traced per-tensor update compiles into the step's one program
    static_shapes = True  # a new batch shape is a new program to compile

    @classmethod
    def rank_and_world(cls, xla_cache_dir: str = "") -> tuple[int, int]:
        """This host's index and the number of hosts, as the PJRT runtime counts its processes (on a
        pod slice, the TPU runtime's worker of each host; the CPU client is always one process, (0, 1)),
        the same figures the device trains with. Not ``RANK``: one process per host, started without
        torchrun, which sets none."""
        _, _, _, xr = _runtime(xla_cache_dir)
        return xr.process_index(), xr.process_count()

    def __init__(self, bf16: bool = False, cpu_threads: int = 0, xla_cache_dir: str = ""):
        torch_xla, xm, xs, xr = _runtime(xla_cache_dir)
        super().__init__(bf16, cpu_threads)
        self._torch_xla, self._xm, self._xs, self._xr = torch_xla, xm, xs, xr
        self.torch_device = torch_xla.device()
        self.devices = xr.global_runtime_device_count()
        # One SPMD program spans every host: "ranks" are hosts, each feeding its slice of the batch.
        self.rank, self.world_size = xr.process_index(), xr.process_count()
        self.mesh = xs.Mesh(np.arange(self.devices), (self.devices,), ("data",))
        self._deferred: list[Callable[[], None]] = []
        self._loaders: list = []

    # -- data -------------------------------------------------------------------------------
    def _device_steps(self, host_steps):
        from torch_xla.distributed.parallel_loader import MpDeviceLoader

        # Step arrays are [grad_accum, B, L]: shard B, the batch axis, over the mesh.
        sharding = self._xs.ShardingSpec(self.mesh, (None, "data", None), minibatch=self.world_size > 1)
        tensors = ((({k: torch.from_numpy(v) for k, v in arrays.items()}), tokens, state)
                   for arrays, tokens, state in host_steps)
        loader = MpDeviceLoader(tensors, self.torch_device, input_sharding=sharding,
                                loader_prefetch_size=4, device_prefetch_size=2)
        steps = iter(loader)
        self._loaders.append(loader)
        return steps

    def close(self) -> None:
        self.flush()
        for loader in self._loaders:
            if loader._parallel_loader is not None:
                loader._parallel_loader.close()
        super().close()

    # -- the step ---------------------------------------------------------------------------
    def seed(self, seed: int) -> None:
        super().seed(seed)
        # The loop offsets the seed by rank so ranks draw different masks; under SPMD one program
        # covers all hosts and its RNG seed must be the same on each (the batch shards differ anyway).
        self._xm.set_rng_state(seed - self.rank, device=self.torch_device)

    def autocast(self):
        if not self.bf16:
            return super().autocast()
        return torch.autocast("xla", dtype=torch.bfloat16)

    def all_reduce_grads(self, params: list[torch.Tensor]) -> None:
        """Nothing to do: under SPMD the partitioner all-reduces gradients of replicated weights."""

    def mean_over_ranks(self, values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return values  # the step's metrics are over the global batch already

    @property
    def chips(self) -> int:
        # every device of the mesh runs the step; ranks are hosts, each with several devices
        return self.devices

    def barrier(self) -> None:
        if self.world_size > 1:
            self._xm.rendezvous("kolectra")

    def step_done(self) -> None:
        # Metrics asked for after the previous step run once this step's graph is dispatched.
        for closure in self._deferred:
            self._xm.add_step_closure(closure)
        self._deferred = []
        self._torch_xla.sync()

    def zeros_like(self, t: torch.Tensor) -> torch.Tensor:
        # Uploaded rather than traced, so a window's first step has the same graph as the others.
        # (.to(device) would turn a 0-d zero into a traced constant.)
        return self._xm.send_cpu_data_to_device(torch.zeros(t.shape, dtype=t.dtype), self.torch_device)[0]

    def read_back(self, tensors: dict[str, torch.Tensor], then: Callable[[dict], None]) -> None:
        def fetch():
            on_host = self._xm._maybe_convert_to_cpu(list(tensors.values()))  # one transfer for all
            then(unpack(tensors, [x for t in on_host for x in t.detach().float().reshape(-1).tolist()]))

        self._deferred.append(fetch)  # registered as a step closure by the next step_done

    def flush(self) -> None:
        if self._deferred:
            self.step_done()  # nothing traced: an empty graph, then the closures

    def synchronize(self) -> None:
        self._xm.wait_device_ops()

    # -- state ------------------------------------------------------------------------------
    def rng_state(self) -> dict:
        return {**super().rng_state(), "xla": self._xm.get_rng_state(device=self.torch_device)}

    def set_rng_state(self, state: dict) -> None:
        super().set_rng_state(state)
        # A checkpoint from another device has no XLA generator state: derive one from the restored
        # host generator, so the resumed run is still a function of the checkpoint alone.
        xla_seed = state["xla"] if "xla" in state else int(torch.randint(0, 2**31 - 1, ()))
        self._xm.set_rng_state(xla_seed, device=self.torch_device)

    def save(self, obj, path) -> None:
        """``torch.save`` after moving every XLA tensor to the host in one transfer; every host writes
        its own rank file. (``xm.save`` does the same, but its generic object walk chokes on CPU
        tensors made from numpy arrays, which checkpoints hold.)"""
        torch.save(self.to_cpu(obj), path)

    def to_cpu(self, obj):
        found: list[torch.Tensor] = []

        def collect(x):
            if isinstance(x, torch.Tensor) and x.device.type == "xla":
                found.append(x)
            elif isinstance(x, dict):
                for v in x.values():
                    collect(v)
            elif isinstance(x, (list, tuple)):
                for v in x:
                    collect(v)

        collect(obj)
        moved = dict(zip(map(id, found), self._xm._maybe_convert_to_cpu(found))) if found else {}

        def rebuild(x):
            if isinstance(x, torch.Tensor):
                return moved.get(id(x), x)
            if isinstance(x, dict):
                return type(x)((k, rebuild(v)) for k, v in x.items())
            if isinstance(x, (list, tuple)):
                return type(x)(rebuild(v) for v in x)
            return x

        return rebuild(obj)

    def extra_metrics(self) -> dict:
        return counters()

    def describe(self) -> str:
        hw = self._xm.xla_device_hw(self.torch_device)
        hosts = f", {self.world_size} hosts" if self.world_size > 1 else ""
        return f"xla ({hw} x {self.devices} devices, SPMD{hosts})"
