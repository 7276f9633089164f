"""Fine-tuning data as ``datasets.Dataset``: rows from a task's reader, tokenised with ``map``, padded once.

A task reads its files into rows (:func:`rows`), :func:`split_dev` carves a seeded dev
set where the task has none, and :func:`tokenize` runs the task's tokenising function with
``Dataset.map(batched=True)``.  Given a cache folder (the stage passes ``ROOT/.cache/finetune``,
outside every hashed artifact), ``map`` writes its result there as an Arrow file named by a key
of everything that decides it: the rows' content (hashed from their Arrow bytes), the
tokenizer's files, the task's encoding settings and ``STAGE_VERSION``, the library versions; a
second run with the same key (another seed, ``--seeds``) memory-maps that file instead of
tokenising again.  The cache is outside every hashed artifact, so nothing else vouches for it:
the sha256 of each file is written beside it (``KEY.arrow.sha256``) once ``map`` has written
it, and a file whose bytes no longer match (labels edited, cut short, or written before the
checksum existed) is deleted and tokenised again, said in one line.  Without a cache folder
(tests) everything stays in memory.  Either way the values are the same.

:class:`Features` then reads a batch's rows from the tokenised Arrow columns in place (memory-mapped
from the cache file, when there is one) and pads them per batch: the split is not held a second time
as padded arrays (``[N, longest]``, 1 KiB a row at 128 tokens; docs/finetune.md, "Memory and large
task files").
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from kolectra.core.stage import progress
from kolectra.finetune.files import FinetuneError, sha256
from kolectra.finetune.progress import quiet_libraries

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
# Fill value of a padded column: [PAD] for ids, -100 (ignored by the loss) for per-token labels.
FILL = {"labels": -100}


def split_dev(rows: Sequence, dev_fraction: float, seed: int,
              key: Callable[[object], object] = lambda row: None) -> tuple[list, list]:
    """Seeded shuffle of the train rows; the first ``dev_fraction`` become dev (in file order).

    Rows with the same ``key`` (their normalised text: :func:`finetune.leakage.text_key`) fall on
    one side together: a text repeated in the file (NSMC repeats reviews) otherwise lands in both,
    and the epoch is chosen partly on rows the model trained on.  ``None`` keys stand alone.
    The train side keeps the shuffled order, so ``max_train_examples`` takes a random subset."""
    train, dev = carve((key(row) for row in rows), len(rows), dev_fraction, seed)
    return [rows[i] for i in train], [rows[i] for i in dev]


def carve(keys: Iterable, n: int, dev_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """:func:`split_dev` by row index: (train indices in the shuffled order, dev indices in file order)
    from the ``n`` rows' keys (bytes, as :func:`finetune.leakage.text_key` gives, or None; a task that
    holds its rows as columns takes them with these)."""
    if not 0.0 < dev_fraction < 1.0:
        raise FinetuneError(f"dev_fraction must be in (0, 1), got {dev_fraction}")
    # a group is its row's index while it has one row (most do), a list of them once repeated: a list a
    # row was the carve's largest cost in memory
    groups: dict[object, int | list[int]] = {}
    for i, k in enumerate(keys):  # a key is bytes (a text) or the row's own index (None: it stands alone)
        k = i if k is None else k
        group = groups.setdefault(k, i)
        if group != i:
            if type(group) is int:
                group = groups[k] = [group]
            group.append(i)
    order = list(groups.values())  # first-seen order, then a seeded shuffle: the same carve every run
    del groups
    random.Random(seed).shuffle(order)
    n_dev = max(1, int(round(dev_fraction * n)))
    dev, train, held = [], [], 0
    for group in order:  # a group that would overshoot n_dev stays in train (repeats are rare in real files)
        size = _size(group)
        if held + size <= n_dev:
            dev.append(group)
            held += size
        else:
            train.append(group)
    if not dev and len(train) > 1:  # every text repeated more than n_dev times: the smallest group
        dev.append(train.pop(min(range(len(train)), key=lambda g: _size(train[g]))))
    if not dev or not train:
        raise FinetuneError(f"train file has {n} rows{_distinct(order, n)}: too few to carve a dev set")
    return _flat(train), sorted(_flat(dev))


def _size(group: int | list[int]) -> int:
    return 1 if type(group) is int else len(group)


def _flat(groups: list) -> list[int]:
    out = []
    for group in groups:
        if type(group) is int:
            out.append(group)
        else:
            out.extend(group)
    return out


def _distinct(groups: list, n: int) -> str:
    return "" if len(groups) == n else f" ({len(groups)} distinct texts)"


def rows(columns: dict[str, list]):
    """A task's rows as an in-memory ``datasets.Dataset``.

    Columns of plain values (every value an ``int``, every one a ``float`` or every one a ``str``: the
    text tasks' ``line``, texts and labels) and of lists of ints or of strs (KorQuAD's answers) become
    Arrow arrays directly, the types ``from_dict`` infers for them (int64, double, string, lists of
    them), and the dataset is named by the sha256 of its Arrow bytes: ``from_dict`` names it by hashing
    a pickled copy of the table, which held over three times the table's bytes at the peak of reading a
    large file (docs/finetune.md, "Memory and large task files").  Other columns go through ``from_dict``."""
    import datasets  # noqa: PLC0415 - heavy import
    import pyarrow as pa  # noqa: PLC0415

    kinds = {name: _arrow_type(values) for name, values in columns.items()}
    if not all(kinds.values()):
        return datasets.Dataset.from_dict(columns)
    table = pa.table({name: _strings(values) if kinds[name] == pa.string() else pa.array(values, kinds[name])
                      for name, values in columns.items()})
    return datasets.Dataset(table, fingerprint=_table_sha256(table)[:32])


def _arrow_type(values: list):
    """The Arrow type ``from_dict`` infers for a column whose values are all ints, all floats, all strs, or
    all lists of ints or of strs (one kind, at least one value); None for any other column."""
    import pyarrow as pa  # noqa: PLC0415

    types = {int: pa.int64(), float: pa.float64(), str: pa.string()}
    kinds = {type(v) for v in values}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is not list:
        return types.get(kind)
    inner = {type(x) for v in values for x in v}
    return pa.list_(types[inner.pop()]) if inner in ({int}, {str}) else None


def _strings(values: list[str], block: int = 4096):
    """A column of str as an Arrow string array, the same as ``pa.array(values, pa.string())``, which
    leaves a UTF-8 copy of each non-ASCII str cached inside it for as long as it lives (the text again,
    beside its Arrow copy).  Two passes: the first measures each string's UTF-8 length (the offsets),
    the second writes the bytes into one buffer of that size, a string at a time.  Arrays of blocks
    joined by ``concat_arrays`` were copied whole into a new buffer while the blocks lived: 0.8 times
    the texts' bytes more at the peak of a read (docs/finetune.md, "Memory and large task files")."""
    import pyarrow as pa  # noqa: PLC0415

    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    try:
        for i in range(0, len(values), block):
            offsets[i + 1:i + 1 + block] = [len(v.encode("utf-8")) for v in values[i:i + block]]
    except UnicodeEncodeError:  # a lone surrogate (a JSON escape): as pa.array takes it, or refuses it
        return pa.array(values, pa.string())
    np.cumsum(offsets, out=offsets)
    if offsets[-1] >= 2**31:  # past a string array's int32 offsets: pa.array makes chunks of it
        return pa.array(values, pa.string())
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    into = memoryview(data)
    for i in range(0, len(values), block):  # a string at a time: nothing but the one string's bytes beside it
        for v, start, end in zip(values[i:i + block], offsets[i:i + block].tolist(), offsets[i + 1:i + 1 + block].tolist()):
            into[start:end] = v.encode("utf-8")
    into.release()
    return pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))


def _table_sha256(table) -> str:
    """sha256 of an Arrow table's IPC stream, hashed as it is written: the stream is never held (a
    second copy of the table at the peak of reading a large file)."""
    import pyarrow as pa  # noqa: PLC0415

    sink = _HashSink()
    with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), table.schema) as writer:
        writer.write_table(table)
    return sink.hash.hexdigest()


class _HashSink:
    """A write-only file that keeps only the sha256 of what is written to it."""

    def __init__(self):
        self.hash, self.closed = hashlib.sha256(), False

    def write(self, data) -> int:
        self.hash.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def content_key(ds) -> str:
    """sha256 of the dataset's Arrow bytes: equal rows, equal key."""
    return _table_sha256(ds.data.table)


def tokenizer_key(model_dir: Path) -> str:
    files = {name: sha256(Path(model_dir) / name) for name in TOKENIZER_FILES if (Path(model_dir) / name).is_file()}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def tokenize(ds, fn: Callable[[dict, list[int]], dict], *, desc: str, settings: dict,
             cache_dir: Path | None = None):
    """``ds.map(fn, batched=True, with_indices=True)``, the input columns replaced by ``fn``'s.

    ``settings`` must name everything besides the rows that decides the output (tokenizer key,
    lengths, the task's encoding version); it goes into the cache key."""
    libs = {name: metadata.version(name) for name in ("datasets", "tokenizers", "transformers")}
    key = hashlib.sha256(json.dumps({"rows": content_key(ds), "settings": settings, "libraries": libs},
                                    sort_keys=True).encode()).hexdigest()[:32]
    kwargs = dict(batched=True, with_indices=True, remove_columns=ds.column_names, desc=desc,
                  new_fingerprint=key)
    with quiet_libraries():
        if cache_dir is None:
            return ds.map(fn, keep_in_memory=True, **kwargs)
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        path = Path(cache_dir) / f"{key}.arrow"
        stamp = path.with_name(path.name + ".sha256")
        if path.exists() and not _intact(path, stamp):
            progress(f"{desc}: the cached tokenised rows {path} do not match their checksum (changed or damaged); "
                     "tokenising again")
            _replaced(path, desc)
        if not path.exists():
            _replaced(stamp, desc)
        else:  # reused: its last use, by which `kolectra artifacts gc --cache --older-than` prunes
            with contextlib.suppress(OSError):
                os.utime(stamp)
        out = ds.map(fn, cache_file_name=str(path), load_from_cache_file=True, **kwargs)
        if not stamp.exists():  # written by map just now
            part = stamp.with_name(stamp.name + ".part")
            part.write_text(sha256(path) + "\n", encoding="utf-8")
            part.replace(stamp)
        return out


def _replaced(path: Path, desc: str) -> None:
    """Delete the cache file ``path`` (if there) before its rows are tokenised again, or say in one line why not: a
    file another user owns, or one an interrupted ``kolectra artifacts gc --cache`` could not delete, ended the
    run in a bare PermissionError."""
    try:
        path.unlink(missing_ok=True)
    except OSError as e:
        raise FinetuneError(f"{desc}: the cached tokenised rows must be made again, but {path} cannot be deleted "
                            f"({e.strerror or e}): delete it by hand, as its owner or with the rights it needs (its "
                            "folder holds only caches, which are made again)") from None


def _intact(path: Path, stamp: Path) -> bool:
    """Whether the cache file ``path`` still has the sha256 recorded beside it when it was written."""
    try:
        return stamp.read_text(encoding="utf-8").strip() == sha256(path)
    except (OSError, UnicodeDecodeError):
        return False


class TokenColumn:
    """A tokenised list column (``input_ids``, per-token labels) read in place from its Arrow chunks:
    numpy views of each chunk's offsets and values (memory-mapped when the dataset is a cache file),
    and per row its chunk, start and length (20 bytes a row); :meth:`rows` pads a batch's rows."""

    def __init__(self, column):
        chunks = [c for c in column.chunks if len(c)]
        self.values = [c.values.to_numpy(zero_copy_only=False) for c in chunks]  # the whole child array: no copy
        offsets = [c.offsets.to_numpy(zero_copy_only=False) for c in chunks]  # this chunk's rows, into values
        self.chunk = np.concatenate([np.full(len(c), k, np.int32) for k, c in enumerate(chunks)] or
                                    [np.zeros(0, np.int32)])
        self.starts = np.concatenate([o[:-1].astype(np.int64) for o in offsets] or [np.zeros(0, np.int64)])
        self.lengths = np.concatenate([np.diff(o).astype(np.int64) for o in offsets] or [np.zeros(0, np.int64)])

    def __len__(self) -> int:
        return len(self.lengths)

    def row(self, r: int) -> np.ndarray:
        """Row ``r``'s values, a view of its chunk's."""
        start = int(self.starts[r])
        return self.values[self.chunk[r]][start:start + int(self.lengths[r])]

    def rows(self, idx: np.ndarray, width: int, fill: int) -> np.ndarray:
        """Rows ``idx`` as ``[len(idx), width]`` int64: each row's values cut to ``width``, ``fill`` after its end."""
        n = np.minimum(self.lengths[idx], width)
        parts = [self.values[c][s:s + k] for c, s, k in zip(self.chunk[idx].tolist(), self.starts[idx].tolist(),
                                                             n.tolist())]
        out = np.full((len(n), width), fill, dtype=np.int64)
        if parts:
            out[np.arange(width)[None, :] < n[:, None]] = np.concatenate(parts)
        return out

    def padded(self, fill: int) -> np.ndarray:
        """Every row, ``[N, longest]`` (at least one column)."""
        return self.rows(np.arange(len(self)), max(1, int(self.lengths.max(initial=1))), fill)


@dataclasses.dataclass
class Features:
    """A tokenised split: per-token columns (:class:`TokenColumn`, read in place; or ``[N, W]`` arrays, W =
    the longest row) and per-row ``[N]`` arrays.

    ``batch(idx, width)`` gives the per-token columns of rows ``idx`` cut (or padded) to ``width``
    columns and adds the attention mask from the row lengths."""

    per_token: dict[str, TokenColumn | np.ndarray]
    per_row: dict[str, np.ndarray]
    lengths: np.ndarray
    pad_id: int

    @classmethod
    def of(cls, ds, pad_id: int, per_token: Sequence[str], per_row: Sequence[str] = ()) -> "Features":
        tok = {k: TokenColumn(ds.data.table.column(k)) for k in per_token}  # input_ids among them: every task's
        lengths = tok["input_ids"].lengths
        row = {k: _row_array(ds, k) for k in per_row}
        return cls(tok, row, lengths, pad_id)

    def fill(self, name: str) -> int:
        return self.pad_id if name == "input_ids" else FILL.get(name, 0)

    def padded(self, name: str) -> np.ndarray:
        """A per-token column as ``[N, longest]`` (e.g. for a baseline that pads everything itself)."""
        a = self.per_token[name]
        return a.padded(self.fill(name)) if isinstance(a, TokenColumn) else a

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())

    def batch(self, idx: np.ndarray, width: int, labels: bool = True) -> dict[str, np.ndarray]:
        out = {}
        for k, a in self.per_token.items():
            if not labels and k not in MODEL_INPUTS:
                continue
            if isinstance(a, TokenColumn):
                out[k] = a.rows(idx, width, self.fill(k))
                continue
            v = a[idx, :width].astype(np.int64)
            if v.shape[1] < width:  # a fixed width (static shapes) wider than the longest row
                v = np.pad(v, ((0, 0), (0, width - v.shape[1])), constant_values=self.fill(k))
            out[k] = v
        out["attention_mask"] = (np.arange(width)[None, :] < self.lengths[idx, None]).astype(np.int64)
        if labels:
            out.update({k: a[idx] for k, a in self.per_row.items()})
        return out


def _row_array(ds, name: str) -> np.ndarray:
    a = ds.data.table.column(name).to_numpy()
    return a.astype(np.float32) if a.dtype.kind == "f" else a.astype(np.int64)
