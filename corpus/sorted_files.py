"""Files of sorted lines written as a stream, for the corpus job's writers (``corpus/outputs.py``:
the shards, the rejects, the per-file table): chunks of (position, line) in any order -> the lines
in position order, sorted in memory up to :data:`RUN_BYTES` and beyond that in runs spilled to a
temporary folder and merged (an external merge sort), then written a block at a time, gzip with a
fixed header or plain, with the file's size and sha256 counted as it is written. A worker holds
about a run, whatever the file's size.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import heapq
import os
import pickle
from typing import Iterable, Iterator

from kolectra.core import storage

# The shard writer sorts up to this much of its lines in memory (Python's str of Korean text: about
# 2 bytes a character); a larger shard is sorted in runs of this size, spilled to temporary files
# and merged. Lines go to the compressor WRITE_LINES at a time.
RUN_BYTES = 64 << 20
WRITE_LINES = 256
_LINE_OVERHEAD = 120  # bytes of a (position, line) pair besides the line's characters


class _Counted:
    """A binary sink that counts and hashes what passes through it to ``raw``."""

    def __init__(self, raw):
        self.raw, self.bytes, self.sha256 = raw, 0, hashlib.sha256()

    def write(self, data) -> int:
        self.sha256.update(data)
        self.bytes += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


SPILL_BLOCKS = 64  # a spilled run is read back in this many blocks: the merge holds one of each run


def _spill(run: list, spill_dir: str, n: int) -> str:
    path = os.path.join(spill_dir, f"run-{n:05d}")
    block = max(1, -(-len(run) // SPILL_BLOCKS))
    with open(path, "wb") as f:
        for i in range(0, len(run), block):
            pickle.dump(run[i:i + block], f, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def _read_run(path: str) -> Iterator[tuple]:
    with open(path, "rb") as f:
        while True:
            try:
                yield from pickle.load(f)
            except EOFError:
                return


def sorted_lines(chunks: Iterable[list], spill_dir: str, run_bytes: int | None = None) -> Iterator[str]:
    """The lines of chunks of (position, line), in position order, holding about ``run_bytes`` of
    them at a time: sorted runs beyond that are spilled to ``spill_dir`` and merged (positions are
    unique, so the order is the same as one sort's). Merging holds a 1/SPILL_BLOCKS block of each
    run: with shards of ``shard_bytes`` (a few runs each) about a run's worth at most."""
    run_bytes = run_bytes or RUN_BYTES
    run: list = []
    size, runs = 0, []
    for chunk in chunks:
        for item in chunk:
            run.append(item)
            size += 2 * len(item[1]) + _LINE_OVERHEAD
            if size >= run_bytes:
                run.sort()
                runs.append(_spill(run, spill_dir, len(runs)))
                run, size = [], 0
    run.sort()
    if runs:  # the last run too: the merge then holds a block of each run, not a whole one
        runs.append(_spill(run, spill_dir, len(runs)))
        run = []
    for _, line in heapq.merge(*map(_read_run, runs)) if runs else run:
        yield line


def write_lines(out_dir: str, rel: str, lines: Iterator[str], gzipped: bool) -> dict:
    """Lines to a file (gzip with a fixed header, or plain), WRITE_LINES at a time; its entry
    (bytes, sha256)."""
    path = storage.join(out_dir, rel)
    try:
        if not storage.is_url(path):
            os.makedirs(os.path.dirname(storage.local_path(path)) or ".", exist_ok=True)
        with storage.writing(path) as raw:  # a stop mid-write lands nothing (a --force rebuild in place)
            sink = _Counted(raw)
            gz = gzip.GzipFile(fileobj=sink, mode="wb", mtime=0, filename="", compresslevel=1) if gzipped else None
            with gz or contextlib.nullcontext():
                out = gz or sink
                block: list[str] = []
                for line in lines:
                    block.append(line)
                    if len(block) >= WRITE_LINES:
                        out.write(("\n".join(block) + "\n").encode("utf-8"))
                        block = []
                if block:
                    out.write(("\n".join(block) + "\n").encode("utf-8"))
    except OSError as e:  # a full disk: name the file (the library's report of the failure would not)
        raise OSError(e.errno, e.strerror, path) from e
    return {"path": rel, "bytes": sink.bytes, "sha256": sink.sha256.hexdigest()}
