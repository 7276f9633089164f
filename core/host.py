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
def first_cpu(cpuinfo: str = "/proc/cpuinfo") -> dict[str, str]:
    """The first CPU's entries in ``/proc/cpuinfo`` (``flags``, ``model name``, ...); empty where
    the file is missing (not Linux)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if out:
                break  # the end of the first CPU's block
            continue
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first CPU's feature flags; empty where the file is missing or holds none."""
    return frozenset(first_cpu(cpuinfo).get("flags", "").split())


def cpu_model() -> str | None:
    """The CPU's model name, or None (benchmarks record it: figures from two CPUs do not compare)."""
    return first_cpu().get("model name") or None


def native_bf16() -> str | None:
    """The flag that gives this CPU native bf16 matmuls (``amx_bf16``, ``avx512_bf16``), or None."""
    flags = cpu_flags()
    return next((f for f in NATIVE_BF16_FLAGS if f in flags), None)
