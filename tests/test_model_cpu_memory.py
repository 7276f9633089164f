"""The CPU device keeps freed memory for the next step (no page faults), and gives it back at close."""

import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's allocator settings")

# In a fresh process: the settings are process-wide and the test must see glibc's defaults first.
# The "step" calls malloc directly: where torch's small allocations land between its large blocks
# decides whether glibc's defaults trim them, which varies from run to run; this pattern (three
# 30 MiB blocks alive together, freed top first, as a step frees its activations) is always trimmed.
SCRIPT = textwrap.dedent("""
    import ctypes, resource, statistics, torch
    from kolectra.model.runtime import resolve

    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]

    def faults_per_step(n=7):
        faults = []
        for _ in range(n):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            blocks = [libc.malloc(30 << 20) for _ in range(3)]
            for b in blocks:
                ctypes.memset(b, 1, 30 << 20)
            for b in reversed(blocks):
                libc.free(b)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        return statistics.median(faults)

    def rss_mib():
        return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20

    before = faults_per_step()
    dev = resolve("cpu")
    dev.place(torch.nn.Linear(2, 2))
    after = faults_per_step()
    held = rss_mib()
    dev.close()
    print(before, after, held, rss_mib(), flush=True)
    # the kolectra command's end (pipeline/cli/exiting.py), less the freeing of torch's modules (~1 CPU s)
    from kolectra.pipeline.cli.exiting import exit_now
    exit_now(0)
""")


def test_cpu_device_keeps_freed_memory_between_steps_and_gives_it_back_at_close():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    before, after, held, released = map(float, out.stdout.split()[-4:])
    assert before > 10_000  # 15,000-23,000 pages of 4 KiB faulted in again every step
    assert after < 100
    assert held - released > 60  # the 90 MiB kept in the heap went back to the kernel at close
