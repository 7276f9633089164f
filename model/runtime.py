"""Which accelerator a training run uses: ``resolve`` is the one entry point to kolectra's runtime.

Pretraining and fine-tuning both ask for a :class:`kolectra.model.device.Device` by name
(cpu, cuda or xla) and then talk to it only. :mod:`kolectra.model.device` holds the CPU and CUDA
devices, :mod:`kolectra.model.xla` the XLA one (it imports ``torch_xla`` only when an XLA device
is built), so neither imports the other's module at run time and the XLA wheel stays optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kolectra.core.errors import UserInputError
from kolectra.model.launcher import launcher_rank_and_world, not_one_of_tasks

if TYPE_CHECKING:
    from kolectra.model.device import Device

# the device modules import torch (about 2 CPU s and 700 MB): only once a device is built, so that a
# stage asking for the rank alone (a pretrain whose checkpoint is published: reused) does without it
DEVICES = ("cpu", "cuda", "xla")


def _device_class(name: str) -> type[Device]:
    _known(name)
    if name == "xla":
        from kolectra.model.xla import XlaDevice  # noqa: PLC0415

        return XlaDevice
    from kolectra.model.device import CudaDevice, Device  # noqa: PLC0415

    return {"cpu": Device, "cuda": CudaDevice}[name]


def _known(name: str) -> None:
    if name not in DEVICES:
        raise UserInputError(f"unknown device {name!r} (known: {', '.join(DEVICES)})")


def resolve(name: str, bf16: bool = False, cpu_threads: int = 0, xla_cache_dir: str = "") -> Device:
    return _device_class(name)(bf16, cpu_threads, xla_cache_dir)


def rank_and_world(name: str, xla_cache_dir: str = "") -> tuple[int, int]:
    """This process's (rank, number of ranks) in a data-parallel run on device ``name``, before the
    device is built: torchrun's ``RANK``/``WORLD_SIZE`` on the CPU and CUDA, the host index and count
    of the XLA runtime on a TPU pod (:meth:`Device.rank_and_world`). The pretrain stage hands it to
    the store, which lets rank 0 alone reserve and publish the build. CPU and CUDA: the environment
    alone, as :meth:`Device.rank_and_world` reads it, with no device module (torch) imported."""
    if name == "xla":
        return _device_class(name).rank_and_world(xla_cache_dir)
    _known(name)
    not_one_of_tasks()
    return launcher_rank_and_world()
