"""benchmarks.common's load check: what other processes used while a benchmark ran is measured
from /proc/stat, so a busy neighbour is seen and the benchmark's own work is not counted."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import common

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux's /proc/stat")


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / common.os.sysconf("SC_CLK_TCK")  # utime, stime


def test_a_busy_neighbour_is_counted():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start
        mark, cpu0 = common.cpu_mark(), _cpu_of(busy.pid)
        time.sleep(1.5)
        neighbours, cpu1 = common.neighbour_cores(mark), _cpu_of(busy.pid)
        wall = time.perf_counter() - mark[0]
    finally:
        busy.kill()
        busy.wait()
    # at least the neighbour's own CPU time over the window (others on the machine only add to it);
    # a tick of slack either side of the two reads
    assert neighbours * wall >= (cpu1 - cpu0) - 0.05
    assert cpu1 - cpu0 > 0.3  # it did run


def test_own_work_is_not_a_neighbour():
    mark = common.cpu_mark()
    t = time.perf_counter()
    while time.perf_counter() - t < 1.0:
        pass
    own = common.cpu_seconds() - mark[2]
    total = common.busy_cpu_seconds() - mark[1]
    assert own > 0.5
    # what the check counts as neighbours is the machine's busy time less ours, never ours too
    assert common.neighbour_cores(mark) * (time.perf_counter() - mark[0]) <= total - own + 0.05
