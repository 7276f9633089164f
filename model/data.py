"""Batches of fixed-length examples for pretraining, read from the examples artifact.

Reads ``index.json`` and its shards row by row with ``os.pread`` (:class:`_Rows`), so a corpus
larger than RAM costs only the rows a batch touches: Arrow IPC files (index format 2,
``corpus/examples_format.py``), whose fixed-size-list columns are [rows, L] arrays at a known
offset of the file, or the ``.npy`` pairs of format 1 (artifacts written before packing; one
sequence a row, no ``doc_ids``). Shards are mapped only while their structure is read.
Format 2 batches carry ``doc_ids`` (which sequence of a packed row each token belongs to), which
the step turns into per-sequence attention (:func:`model.attention.document_attention`).

Order (:mod:`model.shard_order`): the shards are dealt to the ``world_size`` ranks once per run (a
seeded permutation cut into equal runs of rows), so a rank opens only its own shards (and a host
on a store root fetches only those, :func:`model.shard_order.rank_files`); each epoch the rank's rows come in a seeded
order of blocks and windows, cut into batches of exactly ``batch_size`` (the ragged tail of an
epoch is dropped: static shapes for XLA and identical step counts on every rank). The position in
that order is the whole state, so ``state_dict()`` / ``load_state_dict()`` resume at exactly the
next batch. A background thread reads a few batches ahead (bounded queue, same order), so the
trainer never waits on the disk. Every shard file is pinned when it is opened (hashed against the
manifest) and checked after each read (:mod:`model.shard_guard`): examples changed under the run
end it with a line naming the file, and :meth:`ExampleLoader.check_unchanged` checks them all once more
before the trainer exports.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kolectra.core.errors import UserInputError
from kolectra.model import shard_guard, shard_order
from kolectra.model.shard_guard import ExamplesError  # noqa: F401 - the loader's error, where callers look for it

INDEX_FORMATS = (1, 2)  # 1: .npy input_ids/token_type_ids; 2: Arrow shards with doc_ids
ORDER = "shards"  # the training order's name in state_dict(): absent (older) = one permutation of all rows
COLUMNS = {1: ("input_ids", "token_type_ids"), 2: ("input_ids", "token_type_ids", "doc_ids")}
_DTYPES = {"uint16": np.uint16, "int32": np.int32}


@dataclass(frozen=True)
class ExamplesIndex:
    root: Path
    format: int
    max_seq_length: int
    dtype: str
    vocab_size: int
    pad_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    examples: int
    shards: tuple[dict, ...]
    packing: str = "none"  # format 1 knew only one sequence a row (or the document stream)
    sha256: str = ""  # of the index.json bytes parsed, checked against the manifest when the loader opens it


def read_index(examples_dir: Path) -> ExamplesIndex:
    """Parse and check ``index.json``; every problem is an :class:`ExamplesError` naming the file (an
    artifact from another root passes verification whatever its index holds, its manifest rewritten
    to match: a field of another type is named here, not a TypeError inside)."""
    path = Path(examples_dir) / "index.json"
    try:
        body = path.read_bytes()
        raw = json.loads(body.decode("utf-8"))
    except FileNotFoundError:
        raise ExamplesError(f"{path}: missing (is {examples_dir} an examples artifact?)") from None
    except (ValueError, RecursionError) as e:  # ValueError: JSON's errors, UTF-8's, an integer of 4,300+ digits
        raise ExamplesError(f"{path}: not valid JSON: {str(e)[:200]}") from None
    try:
        return _checked_index(path, raw, body)
    except ExamplesError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as e:  # a field of another type than kolectra writes
        raise ExamplesError(f"{path}: not an index of shards ({type(e).__name__}: {str(e)[:120]})") from None


def _checked_index(path: Path, raw, body: bytes) -> ExamplesIndex:
    examples_dir = path.parent
    need = ("format", "max_seq_length", "dtype", "vocab_size", "pad_id", "cls_id", "sep_id", "mask_id",
            "examples", "shards")
    missing = [k for k in need if k not in raw]
    if missing:
        raise ExamplesError(f"{path}: missing key(s) {', '.join(missing)}")
    if raw["format"] not in INDEX_FORMATS:
        raise ExamplesError(f"{path}: format {raw['format']!r} is not supported (this kolectra reads "
                            f"{', '.join(map(str, INDEX_FORMATS))}); rebuild it with `kolectra examples`")
    if raw["dtype"] not in _DTYPES:
        raise ExamplesError(f"{path}: dtype {raw['dtype']!r} is not one of {sorted(_DTYPES)}")
    keys = ("path", "examples") if raw["format"] == 2 else ("input_ids", "token_type_ids", "examples")
    for i, shard in enumerate(raw["shards"]):
        for k in keys:
            if k not in shard:
                raise ExamplesError(f"{path}: shards[{i}] lacks {k!r}")
    total = sum(int(s["examples"]) for s in raw["shards"])
    if total != raw["examples"]:
        raise ExamplesError(f"{path}: shards hold {total} examples but 'examples' says {raw['examples']}")
    return ExamplesIndex(
        root=Path(examples_dir), format=int(raw["format"]), max_seq_length=int(raw["max_seq_length"]),
        dtype=raw["dtype"], vocab_size=int(raw["vocab_size"]), pad_id=int(raw["pad_id"]), cls_id=int(raw["cls_id"]),
        sep_id=int(raw["sep_id"]), mask_id=int(raw["mask_id"]), examples=total, shards=tuple(raw["shards"]),
        packing=str(raw.get("packing", "none")), sha256=hashlib.sha256(body).hexdigest(),
    )


def _column_dtypes(index: ExamplesIndex) -> dict[str, np.dtype]:
    L = index.max_seq_length
    return {"input_ids": np.dtype(_DTYPES[index.dtype]), "token_type_ids": np.dtype(np.uint8),
            "doc_ids": np.dtype(np.uint8 if L // 3 < 256 else np.uint16)}  # as corpus.packing.doc_ids_dtype


def _check_shape(path: Path, arr: np.ndarray, shard: dict, index: ExamplesIndex, dtype: np.dtype, what: str) -> None:
    want = (int(shard["examples"]), index.max_seq_length)
    if arr.shape != want:
        raise ExamplesError(f"{path}: {what}shape {arr.shape}, index.json says {want}")
    if arr.dtype != dtype:
        raise ExamplesError(f"{path}: {what}dtype {arr.dtype}, expected {dtype}")


class _Rows:
    """A [rows, L] column of a shard file, read with ``os.pread`` rather than through a memory map.

    Why not the map: a shard truncated in place while training reads it (rewritten by another
    process, a copy over it, a disk repair) makes a read through a mapping fault with SIGBUS, which
    kills the process with no message (exit 135); Python cannot turn SIGBUS into an exception (the
    faulting load is retried), and a fault handler can only print a traceback and die. A ``pread``
    past the end is a short read: an :class:`ExamplesError` naming the shard. Cheap: one system call
    a row per column (microseconds, in the prefetch thread), the file opened once per batch that
    touches it (no descriptor held per shard: thousands of shards stay under the open-file limit),
    and memory as small as mapping's: the rows asked for."""

    def __init__(self, path: Path, offset: int, shape: tuple[int, int], dtype: np.dtype, pin: shard_guard.Pin):
        self.path, self.offset, self.shape, self.dtype, self.pin = path, offset, shape, np.dtype(dtype), pin
        self.row_bytes = shape[1] * self.dtype.itemsize

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty((len(rows), self.shape[1]), dtype=self.dtype)
        view = out.view(np.uint8).reshape(len(rows), self.row_bytes)
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError as e:
            raise ExamplesError(f"{self.path}: cannot be read any more ({e.strerror}) while training "
                                "reads it") from None
        try:
            for i, r in enumerate(rows):
                at = self.offset + int(r) * self.row_bytes
                got = os.preadv(fd, [view[i]], at) if self.row_bytes else 0
                if got != self.row_bytes:
                    raise ExamplesError(
                        f"{self.path}: truncated while training read it (row {int(r)}: {got} of {self.row_bytes} "
                        f"bytes at offset {at}, the file now has {os.fstat(fd).st_size}); the examples artifact "
                        "changed under this run: `kolectra artifacts verify` it, rebuild it, then --resume")
            # after the reads: a write that reached these rows began before this fstat (shard_guard)
            shard_guard.check(self.path, self.pin, os.fstat(fd))
        finally:
            os.close(fd)
        return out


def _rows_of(path: Path, arr: np.ndarray, base: int | None, size: int, pin: shard_guard.Pin) -> np.ndarray | _Rows:
    """``arr`` (a zero-copy view of ``path`` mapped at ``base``) as a :class:`_Rows`; an array that is
    not such a view (read into memory: several record batches combined) is kept as it is."""
    start = arr.__array_interface__["data"][0] - base if base is not None else -1
    if not (arr.flags.c_contiguous and 0 <= start and start + arr.nbytes <= size):
        return np.array(arr)  # a copy: nothing of it stays mapped
    return _Rows(path, start, arr.shape, arr.dtype, pin)


def _open_npy(index: ExamplesIndex, shard: dict, pins: dict[str, shard_guard.Pin]) -> dict[str, np.ndarray | _Rows]:
    """Format 1: one ``.npy`` file per column (mapped to read its header, then read by row)."""
    out = {}
    for key, dtype in _column_dtypes(index).items():
        if key not in shard:
            continue
        path = index.root / shard[key]
        try:
            arr = np.load(path, mmap_mode="r")
        except FileNotFoundError:
            raise ExamplesError(f"{path}: missing (listed in {index.root / 'index.json'})") from None
        except ValueError as e:
            raise ExamplesError(f"{path}: not a readable .npy array: {e}") from None
        _check_shape(path, arr, shard, index, dtype, "")
        out[key] = _rows_of(path, arr, arr.__array_interface__["data"][0] - arr.offset, arr.offset + arr.nbytes,
                            pins[shard[key]]) if isinstance(arr, np.memmap) else arr
        del arr  # the mapping goes with it
    return out


def _open_arrow(index: ExamplesIndex, shard: dict, pins: dict[str, shard_guard.Pin]) -> dict[str, np.ndarray | _Rows]:
    """Format 2: an Arrow IPC file, mapped while its structure is read; each fixed-size-list column
    a [rows, L] array at an offset of the file, read by row (:class:`_Rows`)."""
    import pyarrow as pa  # noqa: PLC0415 - pyarrow: only for format-2 shards

    path = index.root / shard["path"]
    try:
        mapped = pa.memory_map(str(path))
        size = mapped.size()
        base = mapped.read_buffer(size).address if size else None  # where the file is mapped: offsets from it
        mapped.seek(0)
        reader = pa.ipc.open_file(mapped)
        batch = reader.get_batch(0) if reader.num_record_batches == 1 else reader.read_all().combine_chunks()
    except FileNotFoundError:
        raise ExamplesError(f"{path}: missing (listed in {index.root / 'index.json'})") from None
    except (pa.ArrowInvalid, OSError) as e:
        raise ExamplesError(f"{path}: not a readable Arrow IPC file: {e}") from None
    out = {}
    for key, dtype in _column_dtypes(index).items():
        if key not in batch.schema.names:
            raise ExamplesError(f"{path}: no {key!r} column (has {', '.join(batch.schema.names)})")
        col = batch.column(key)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if not pa.types.is_fixed_size_list(col.type) or col.null_count or col.offset:
            raise ExamplesError(f"{path}: column {key!r} is {col.type}, not a fixed-size list without nulls")
        values = col.values.to_numpy(zero_copy_only=True)  # a view of the mapped file
        arr = values.reshape(-1, col.type.list_size) if col.type.list_size else values.reshape(len(col), 0)
        _check_shape(path, arr, shard, index, dtype, f"column {key!r}: ")
        out[key] = _rows_of(path, arr, base, size, pins[shard["path"]])
    return out


class _Source:
    """The read side: this rank's shards (pinned, :mod:`model.shard_guard`) and its seeded order
    (:mod:`model.shard_order`). Batch ``(epoch, b)`` is a pure function of the position, so the
    prefetch thread and a resumed loader agree on every batch."""

    def __init__(self, index: ExamplesIndex, seed: int, rank: int, world_size: int, batch_size: int):
        self.index, self.batch_size = index, batch_size
        counts = [int(s["examples"]) for s in index.shards]
        self.starts = np.cumsum([0] + counts)
        mine = shard_order.deal(counts, seed, world_size)[rank]
        owned = sorted({s for s, _, _ in mine})
        self.pins = _pin_files(index, [f for s in owned for f in shard_order.shard_files(index.shards[s])])
        opened = {s: (_open_arrow if index.format == 2 else _open_npy)(index, index.shards[s], self.pins)
                  for s in owned}
        for f, pinned in self.pins.items():  # unchanged from the hash through reading the structure
            shard_guard.check(index.root / f, pinned)
        # shards of other ranks stay None: never opened, and on a store root never fetched
        self.columns = {key: [opened[s][key] if s in opened else None for s in range(len(index.shards))]
                        for key in COLUMNS[index.format]}
        self.order = shard_order.RankOrder(mine, self.starts, seed, rank)

    def batch(self, epoch: int, b: int) -> dict[str, np.ndarray]:
        idx = self.order.positions(epoch, b * self.batch_size, (b + 1) * self.batch_size)
        batch = self._gather(idx)
        self._check_ids(batch, idx)
        return batch

    def _gather(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """The rows ``idx`` of every column, as int64 [len(idx), L] arrays in ``idx`` order."""
        shard_of = np.searchsorted(self.starts, idx, side="right") - 1
        out = {key: np.empty((len(idx), self.index.max_seq_length), dtype=np.int64) for key in self.columns}
        for s in np.unique(shard_of):
            sel = shard_of == s
            rows = idx[sel] - self.starts[s]
            # Sorted reads are friendlier to the page cache; the result goes back in batch order.
            order = np.argsort(rows, kind="stable")
            to, rows = np.flatnonzero(sel)[order], rows[order]
            for key, arrays in self.columns.items():
                out[key][to] = arrays[s][rows]
        return out

    def _check_ids(self, batch: dict[str, np.ndarray], idx: np.ndarray) -> None:
        ids = batch["input_ids"]
        bad = (ids >= self.index.vocab_size) | (ids < 0)
        if bad.any():
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            raise ExamplesError(f"{self._where(idx[row])} has token id {int(ids[row][bad[row]][0])} outside the "
                                f"vocabulary of {self.index.vocab_size}")
        if "doc_ids" in batch:
            # a real token outside every sequence would attend to nothing, padding inside one would be attended
            bad = (batch["doc_ids"] == 0) != (ids == self.index.pad_id)
            if bad.any():
                row = int(np.flatnonzero(bad.any(axis=1))[0])
                raise ExamplesError(f"{self._where(idx[row])}: doc_ids is 0 exactly where input_ids is padding "
                                    f"({self.index.pad_id}), not so at column {int(np.flatnonzero(bad[row])[0])}")

    def _where(self, g) -> str:
        """"FILE: row R" of global example ``g``."""
        s = int(np.searchsorted(self.starts, int(g), side="right") - 1)
        shard = self.index.shards[s]
        return f"{self.index.root / shard.get('path', shard.get('input_ids'))}: row {int(g) - self.starts[s]}"


def _pin_files(index: ExamplesIndex, files: list[str]) -> dict[str, shard_guard.Pin]:
    """Each file's pin, its bytes checked against the artifact's manifest (index.json's too) when
    there is one: the local root's artifact or a store's checked copy."""
    hashes = shard_guard.manifest_hashes(index.root)
    if hashes is not None and hashes.get("index.json") != index.sha256:
        raise ExamplesError(f"{index.root / 'index.json'}: sha256 differs from the artifact's manifest (changed "
                            "after it was checked); `kolectra artifacts verify` it")
    for f in files if hashes is not None else ():
        if f not in hashes:
            raise ExamplesError(f"{index.root / f}: listed in index.json but not in the artifact's manifest")
    return {f: shard_guard.pin(index.root / f, hashes[f] if hashes is not None else None) for f in files}


def _prefetch(source: _Source, epoch: int, b: int, batches_per_epoch: int, out: queue.Queue,
              stop: threading.Event) -> None:
    """Producer: batches from position (epoch, b) on, in order, into a bounded queue. Holds no
    reference to the loader, so a dropped loader is collected (and its finalizer stops this)."""
    while not stop.is_set():
        try:
            item = ((epoch, b), source.batch(epoch, b), None)
        except Exception as e:  # noqa: BLE001 - handed to the consumer, raised at the position it belongs to
            item = ((epoch, b), None, e)
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                break
            except queue.Full:
                continue
        if item[2] is not None:
            return
        b += 1
        if b == batches_per_epoch:
            epoch, b = epoch + 1, 0


class _Prefetcher:
    def __init__(self, source: _Source, epoch: int, b: int, batches_per_epoch: int, depth: int):
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=_prefetch, args=(source, epoch, b, batches_per_epoch, self.queue,
                                                               self.stop), name="kolectra-prefetch", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


class ExampleLoader:
    """Endless iterator of ``{"input_ids", "token_type_ids"[, "doc_ids"]}`` int64 numpy arrays of
    shape [B, L] (``doc_ids`` from format 2 artifacts).

    ``batch_size`` is per rank. Each rank reads its own share of the shards (:mod:`model.shard_order`):
    ranks are disjoint, and every rank has ``examples // world_size // batch_size`` batches an epoch.

    ``prefetch`` batches are read ahead by a background thread (0: read in ``__next__``); the
    thread produces the positions in order into a FIFO, so the batches are the same either way,
    and ``state_dict()`` is the position of the next batch *handed out*, not of the next read.
    """

    def __init__(self, examples_dir: Path, batch_size: int, seed: int, rank: int = 0, world_size: int = 1,
                 prefetch: int = 4):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} outside world_size {world_size}")
        if prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        self.index = read_index(examples_dir)
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size
        self.global_batch = batch_size * world_size
        self.batches_per_epoch = self.index.examples // self.global_batch
        if self.batches_per_epoch == 0:
            raise ExamplesError(
                f"{self.index.root / 'index.json'}: {self.index.examples} examples cannot fill one batch of "
                f"{self.global_batch} (batch_size {batch_size} x world_size {world_size})"
            )
        self._source = _Source(self.index, seed, rank, world_size, batch_size)
        self.prefetch = prefetch
        self.epoch, self.batch_in_epoch = 0, 0
        self._prefetcher: _Prefetcher | None = None
        self._finalizer: weakref.finalize | None = None

    # -- reading ----------------------------------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        pos = (self.epoch, self.batch_in_epoch)
        if self.prefetch == 0:
            batch = self._source.batch(*pos)
        else:
            if self._prefetcher is None:
                self._start()
            got, batch, error = self._prefetcher.queue.get()
            assert got == pos, f"prefetch out of step: {got} != {pos}"  # one producer, one FIFO
            if error is not None:
                self._stop()  # the producer has ended; a retry starts over at this position
                raise error
        self.batch_in_epoch += 1
        if self.batch_in_epoch == self.batches_per_epoch:
            self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        return batch

    def _start(self) -> None:
        self._prefetcher = _Prefetcher(self._source, self.epoch, self.batch_in_epoch, self.batches_per_epoch,
                                       self.prefetch)
        self._finalizer = weakref.finalize(self, self._prefetcher.stop.set)

    def _stop(self) -> None:
        if self._prefetcher is not None:
            self._finalizer.detach()
            self._prefetcher.close()
            self._prefetcher = self._finalizer = None

    def close(self) -> None:
        """Stop the prefetch thread (it also stops when the loader is garbage-collected)."""
        self._stop()

    @property
    def files(self) -> list[str]:
        """The artifact's files this rank reads (relative paths)."""
        return sorted(self._source.pins)

    def check_unchanged(self) -> None:
        """Raise :class:`ExamplesError` if a file this rank reads is no longer the one it pinned
        (the trainer's last look before it exports: a change after the last read of a file too)."""
        for f, pinned in self._source.pins.items():
            shard_guard.check(self.index.root / f, pinned)

    # -- resume -----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch, "seed": self.seed,
                "batch_size": self.batch_size, "world_size": self.world_size, "examples": self.index.examples,
                "order": ORDER}

    def load_state_dict(self, state: dict) -> None:
        mine = self.state_dict()
        if (state["batch_size"], state["world_size"]) != (mine["batch_size"], mine["world_size"]):
            # a position counts one rank's micro-batches: said in the settings that make one
            raise UserInputError(
                f"its data position counts micro-batches of {state['batch_size']} rows on each of "
                f"{state['world_size']} rank(s); this run's are {mine['batch_size']} rows on {mine['world_size']} "
                "(train.batch_size / train.grad_accum / ranks; ranks: torchrun's world_size): resume with the "
                "batch size, grad_accum and ranks it was written with, or leave out --resume to start over")
        for k in ("seed", "examples"):
            if state[k] != mine[k]:
                raise UserInputError(f"loader state was saved with {k}={state[k]}, this loader has {k}={mine[k]}")
        self._stop()  # batches read ahead belong to the old position
        self.epoch, self.batch_in_epoch = int(state["epoch"]), int(state["batch_in_epoch"])
