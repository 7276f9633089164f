"""Live progress of a corpus job, from worker processes to the launcher's stderr.

A Beam runner reports nothing while a stage runs (FnApiRunner's metrics arrive when the job is
over), and the workers are other processes. So each worker step adds its counts to a
:class:`WorkerCounts`, which rewrites a small JSON file of its own under a progress directory at
most once a second (write, then rename: a reader never sees half a file). The launcher's
:class:`Monitor` thread sums the files twice a second and draws them with tqdm on a terminal (a
plain line every 30 s otherwise, for logs; ``core/bars.py`` decides which, and
``KOLECTRA_PROGRESS=lines|bar`` overrides it). Only runners whose workers share the launcher's
disk get a directory (local and portable runs on this machine); elsewhere the counts go nowhere
and the runner's own console shows progress. Nothing here changes what the job writes.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

from kolectra.core.bars import use_bars
from kolectra.core.stage import progress

# the counters the corpus steps add to; "indexed": large files' bytes read to cut them in pieces
STEPS = ("bytes", "read", "kept", "duplicates", "analysed", "indexed")


class WorkerCounts:
    """A worker step's running counts, written to ``directory`` (if any) at most every ``every`` s."""

    def __init__(self, directory: str | None, every: float = 1.0):
        self.directory = directory
        self.every = every
        self.counts: dict[str, int] = {}
        self.path = None if directory is None else os.path.join(directory, f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json")
        self.last = time.monotonic()

    def add(self, **counts: int) -> None:
        if self.path is None:
            return
        for k, n in counts.items():
            self.counts[k] = self.counts.get(k, 0) + n
        now = time.monotonic()
        if now - self.last >= self.every:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if self.path is None:
            return
        self.last = time.monotonic() if now is None else now
        try:  # progress must never fail the job
            os.makedirs(self.directory, exist_ok=True)
            tmp = self.path + ".part"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.counts, f)
            os.replace(tmp, self.path)
        except OSError:
            self.path = None


def read_counts(directory: str) -> dict[str, int]:
    total: dict[str, int] = {}
    if not directory:  # no progress directory (remote workers): never the current one
        return total
    for p in Path(directory).glob("*.json"):
        try:
            counts = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # replaced while we looked: the next poll sees it
        for k, n in counts.items() if isinstance(counts, dict) else ():
            if isinstance(n, int):
                total[k] = total.get(k, 0) + n
    return total


class Monitor:
    """Shows the summed counts under ``directory`` until :meth:`stop`; ``total_bytes`` sizes the read bar."""

    def __init__(self, directory: str, total_bytes: int, enabled: bool = True, stream=None):
        self.directory = directory
        self.total_bytes = total_bytes
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kolectra-progress", daemon=True)
        self.counts: dict[str, int] = {}

    def __enter__(self) -> "Monitor":
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.counts = read_counts(self.directory)

    def _run(self) -> None:
        bars = _Bars(self.total_bytes, self.stream) if use_bars(self.stream) else None
        last_line = time.monotonic()
        while not self._stop.wait(0.5):
            counts = read_counts(self.directory)
            if bars is not None:
                bars.update(counts)
            elif time.monotonic() - last_line >= 30:
                last_line = time.monotonic()
                progress("corpus: " + describe(counts, self.total_bytes))
        if bars is not None:
            bars.update(read_counts(self.directory))
            bars.close()


def describe(counts: dict, total_bytes: int) -> str:
    """One line of counts: ``read 12.0/30.0 MB (40%), 81,000 records, 80,100 kept, 20,000 analysed``."""
    done = counts.get("bytes", 0)
    share = f" ({done / total_bytes:.0%})" if total_bytes else ""
    return (f"read {done / 1e6:.1f}/{total_bytes / 1e6:.1f} MB{share}, {counts.get('read', 0):,} records, "
            f"{counts.get('kept', 0):,} kept, {counts.get('analysed', 0):,} analysed{_indexed(counts)}")


def _indexed(counts: dict) -> str:
    """The large files' first pass (corpus/pieces.py), while there is one to show."""
    return f", large files indexed {counts['indexed'] / 1e6:.1f} MB" if counts.get("indexed") else ""


class _Bars:
    """Two tqdm bars: input bytes read (of the listed total) and documents analysed (of those kept)."""

    def __init__(self, total_bytes: int, stream):
        from tqdm import tqdm  # noqa: PLC0415 - tqdm: only when a bar is shown

        self.read = tqdm(total=total_bytes or None, unit="B", unit_scale=True, desc="corpus read", file=stream,
                         position=0, leave=True, dynamic_ncols=True)
        self.analysed = tqdm(total=None, unit=" docs", desc="analysed", file=stream, position=1, leave=True,
                             dynamic_ncols=True)

    def update(self, counts: dict) -> None:
        self.read.n = counts.get("bytes", 0)
        self.read.set_postfix_str(f"{counts.get('read', 0):,} records, {counts.get('kept', 0):,} kept{_indexed(counts)}",
                                  refresh=False)
        self.read.refresh()
        unique = counts.get("kept", 0) - counts.get("duplicates", 0)
        self.analysed.total = max(unique, counts.get("analysed", 0)) or None
        self.analysed.n = counts.get("analysed", 0)
        self.analysed.refresh()

    def close(self) -> None:
        self.read.close()
        self.analysed.close()
