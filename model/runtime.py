"""Which accelerator a training run uses: ``resolve`` is the one entry point to kolectra's runtime.

Pretraining and fine-tuning both ask for a :class:`kolectra.model.device.Device` by name
(cpu, cuda or xla) and then talk to it only. :mod:`kolectra.model.device` holds the CPU and CUDA
devices, :mod:`kolectra.model.xla` the XLA one (it imports ``torch_xla`` only when an XLA device
is built), so neither imports the other's module at run time and the XLA wheel stays optional.
"""

from __future__ import annotations

from kolectra.core.errors import UserInputError
from kolectra.model.device import CudaDevice, Device
from kolectra.model.xla import XlaDevice

DEVICES = {"cpu": Device, "cuda": CudaDevice, "xla": XlaDevice}


def _device_class(name: str) -> type[Device]:
    if name not in DEVICES:
        raise UserInputError(f"unknown device {name!r} (known: {', '.join(DEVICES)})")
    return DEVICES[name]


def resolve(name: str, bf16: bool = False, cpu_threads: int = 0, xla_cache_dir: str = "") -> Device:
    return _device_class(name)(bf16, cpu_threads, xla_cache_dir)


def rank_and_world(name: str, xla_cache_dir: str = "") -> tuple[int, int]:
    """This process's (rank, number of ranks) in a data-parallel run on device ``name``, before the
    device is built: torchrun's ``RANK``/``WORLD_SIZE`` on the CPU and CUDA, the host index and count
    of the XLA runtime on a TPU pod (:meth:`Device.rank_and_world`). The pretrain stage hands it to
    the store, which lets rank 0 alone reserve and publish the build."""
    return _device_class(name).rank_and_world(xla_cache_dir)
