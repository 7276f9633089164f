"""benchmarks.common's load check: what other processes used while a benchmark ran is measured
from /proc/stat, so a busy neighbour is seen, and the benchmark's own work (its threads, the
processes it started and theirs) is not counted."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import common

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux's /proc/stat")
BUSY = [sys.executable, "-c", "while True: pass"]


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _window(pid: int) -> tuple[float, float, float, float]:
    """(neighbour cores, the busy process's CPU seconds, the machine's busy CPU seconds, wall) over
    at least 1.5 s, longer until the busy process has had 0.5 CPU s (at most 60 s): on a loaded
    machine it gets a small share of a core (0.14 CPU s in 1.5 s at a load average of 20)."""
    time.sleep(0.3)  # let it start
    mark, cpu0 = common.cpu_mark(), _cpu_of(pid)
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < 1.5 or (_cpu_of(pid) - cpu0 < 0.5 and elapsed < 60):
        time.sleep(0.1)
    neighbours, cpu1, busy = common.neighbour_cores(mark), _cpu_of(pid), common.busy_cpu_seconds()
    return neighbours, cpu1 - cpu0, busy - mark[1], time.perf_counter() - mark[0]


def test_a_busy_neighbour_is_counted():
    # started through a shell that exits at once: not a descendant of this process
    pid = int(subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout)
    try:
        neighbours, its_cpu, _, wall = _window(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
    assert its_cpu > 0.3  # it did run
    # at least the neighbour's own CPU time (others on the machine only add to it), a tick of slack
    assert neighbours * wall >= its_cpu - 0.05


def test_the_benchmarks_own_processes_are_not_neighbours():
    # a grandchild, as a fork server's served process is: this process never waits for it
    child = subprocess.Popen(["sh", "-c", f"'{sys.executable}' -c 'while True: pass' & echo $!; wait"],
                             stdout=subprocess.PIPE, text=True)
    pid = int(child.stdout.readline())
    try:
        neighbours, its_cpu, busy, wall = _window(pid)
        ours = common.tree_cpu_seconds()
    finally:
        os.kill(pid, signal.SIGKILL)
        child.wait()
    assert its_cpu > 0.1 and ours >= its_cpu
    # the machine's busy time less the grandchild's at most (less ours too): never counted as a neighbour
    assert neighbours * wall <= busy - its_cpu + 0.05


def test_a_benchmark_cannot_replace_the_load_report(capsys):
    # objectives.py passed its timed loop's wall_s: the line's wall_s then no longer went with its
    # load_average and neighbour_cores, measured over the whole run
    with pytest.raises(ValueError, match="wall_s"):
        common.emit("probe", "s", 1.0, "base", 1.0, {}, wall_s=1.0)
    assert capsys.readouterr().out == ""  # no result line
