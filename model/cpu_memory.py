"""Keep freed memory in the process while training on the CPU (glibc's allocator settings).

torch's CPU tensors come from ``malloc``. A training step frees and allocates the same large
tensors every step, and with glibc's defaults much of that memory goes back to the kernel in
between: blocks above the mmap threshold (dynamic, at most 32 MiB) are fresh mappings each time,
and free space at the top of the heap beyond the trim threshold is returned on every ``free``.
The next step then pays a page fault per 4 KiB page to take the same memory back, zeroed: tens
of thousands of minor faults per small++ step, none with the settings below, and a faster step
(``benchmarks/pretrain.py`` measures it).

:func:`keep_freed` fixes the mmap threshold at 32 MiB and turns trimming off (``mallopt``), so
freed blocks up to that size stay in the heap for the next step, and the heap never holds more
than it once needed; :func:`give_back` hands the free part back (``malloc_trim``) when training
ends, since stages share one process in ``kolectra run``. The settings hold for the whole
process. Only :mod:`model.device` calls this, for CPU training; where the C library is not glibc
it does nothing. Results do not change: where memory comes from never changes a value.
"""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # from glibc's malloc.h
# The largest mmap threshold glibc's dynamic rule reaches on 64-bit, and the largest every version
# accepts. Larger blocks stay fresh mappings: in the heap, torch's 64-byte-aligned requests cannot
# reuse a freed block of their own size (posix_memalign needs a little more), and a heap with
# long-lived small tensors between such blocks grew by each new one (64 MiB blocks: 3 GB after
# 40 steps, measured). The benchmark's small++ step has no tensor above it.
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: never trim, in practice

_state: dict[str, int] = {}


def _libc():
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def keep_freed() -> int:
    """Set the thresholds once per process; the mmap threshold taken (0: not glibc, nothing set)."""
    if "mmap_threshold" in _state:
        return _state["mmap_threshold"]
    libc = _libc()
    ok = libc is not None and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 \
        and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    _state["mmap_threshold"] = MMAP_THRESHOLD if ok else 0
    return _state["mmap_threshold"]


def give_back() -> None:
    """Return the heap's free memory to the kernel (after training; the thresholds stay)."""
    libc = _libc()
    if libc is not None and _state.get("mmap_threshold"):
        libc.malloc_trim(0)
