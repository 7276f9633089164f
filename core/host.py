"""What the host CPU offers, read without torch, so that a config can be resolved (and printed)
before any heavy import: ``--print-config`` and the request id of a run both need the answer.

Used by :func:`kolectra.model.config.fit_precision` to choose bf16 autocast on CPUs that run it
natively; :mod:`kolectra.model.device` warns at run time, with torch's own check, when bf16 is
asked for on a CPU without it.
"""

from __future__ import annotations

import functools
from pathlib import Path

# x86 flags (Linux /proc/cpuinfo) of the instructions oneDNN's bf16 matmuls use: AVX-512 BF16
# (Cooper Lake, Zen 4 and later) and AMX (Sapphire Rapids and later). Without them its bf16 kernels
# fall back to a reference loop, tens of times slower than float32.
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.cache
def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first CPU's feature flags; empty where the file is missing (not Linux) or holds none."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def native_bf16() -> str | None:
    """The flag that gives this CPU native bf16 matmuls (``amx_bf16``, ``avx512_bf16``), or None."""
    flags = cpu_flags()
    return next((f for f in NATIVE_BF16_FLAGS if f in flags), None)
