"""The examples artifact's files: Arrow shards, ``index.json`` and a dataset card (``README.md``).

Layout (index ``format`` 2)::

    index.json                     what the pretraining loader reads first (shapes, dtypes, ids)
    stats.json                     the stage's counts (`examples`, `tokens`, ...: docs/examples.md)
    README.md                      dataset card: YAML ``configs`` pointing ``datasets`` at the shards
    data/shard-CCCCC-PPPP.arrow    rows of corpus shard CCCCC, piece PPPP

Each shard is an Arrow IPC file (uncompressed, one record batch) with three columns of
fixed-size lists of ``max_seq_length``: ``input_ids`` (uint16, or int32 for a vocabulary over
65,535), ``token_type_ids`` (uint8) and ``doc_ids`` (uint8; uint16 from 768 tokens on). One
format for two readers: ``datasets.load_dataset(<artifact dir>)`` reads it through the card
(Arrow is one of its packaged formats; ``.npy`` is not), and :mod:`model.data` memory-maps the
same files and views each column's values as a [rows, L] numpy array without a copy, as it did
with ``.npy`` (``benchmarks/examples.py`` measures the loader).

Format 1 (``.npy`` pairs of ``input_ids``/``token_type_ids``, no ``doc_ids``) is still read by
the loader: one sequence per row, as it was written.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

FORMAT = 2
COLUMNS = ("input_ids", "token_type_ids", "doc_ids")


def shard_name(shard: int, piece: int) -> str:
    return f"data/shard-{shard:05d}-{piece:04d}.arrow"


def arrow_file(ids_NL: np.ndarray, types_NL: np.ndarray, docs_NL: np.ndarray) -> pa.Buffer:
    """Rows -> one Arrow IPC file (same arrays, same bytes) in a buffer of exactly its size.

    The file is laid out twice: first into a stream that only counts its bytes, then into the
    buffer. The columns wrap the row arrays without a copy, so the rows are copied once; a
    growing stream would copy them again each time it grew, and ``bytes`` once more at the end
    (about 100 MB more than the file at a production-sized shard's 38 MB piece: docs/scale.md)."""
    L = ids_NL.shape[1]
    cols = {name: pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(a).reshape(-1)), L)
            for name, a in zip(COLUMNS, (ids_NL, types_NL, docs_NL))}
    batch = pa.record_batch(cols)

    def write(sink) -> None:
        with pa.ipc.new_file(sink, batch.schema) as writer:
            writer.write_batch(batch)

    counted = pa.MockOutputStream()
    write(counted)
    buf = pa.allocate_buffer(counted.size())
    write(pa.FixedSizeBufferWriter(buf))
    return buf


def arrow_bytes(ids_NL: np.ndarray, types_NL: np.ndarray, docs_NL: np.ndarray) -> bytes:
    """:func:`arrow_file` as ``bytes`` (a copy: for small files and tests)."""
    return arrow_file(ids_NL, types_NL, docs_NL).to_pybytes()


def index_document(max_seq_length: int, dtype: str, vocab_size: int, packing: str, special_ids: dict,
                   pieces: list[dict]) -> dict:
    """``index.json``: ``pieces`` are ``{"path", "examples"}`` in order."""
    return {"format": FORMAT, "max_seq_length": max_seq_length, "dtype": dtype, "vocab_size": vocab_size,
            "packing": packing, "columns": list(COLUMNS), "pad_id": special_ids["[PAD]"],
            "cls_id": special_ids["[CLS]"], "sep_id": special_ids["[SEP]"], "mask_id": special_ids["[MASK]"],
            "examples": sum(p["examples"] for p in pieces), "shards": pieces}


def dataset_card(split: str, index: dict, stats: dict) -> str:
    """``README.md``: the YAML header ``datasets`` reads, then what the columns mean."""
    L = index["max_seq_length"]
    return f"""---
configs:
- config_name: default
  data_files:
  - split: {split}
    path: data/*.arrow
---
# kolectra pretraining examples

{stats.get('examples', index['examples']):,} rows of {L} tokens ({stats.get('padding_share', 0):.2%} padding),
{stats.get('sequences', 0):,} ELECTRA sequences, packing `{index['packing']}`.

```python
import datasets
rows = datasets.load_dataset("path/to/this/directory", split="{split}")
```

- `input_ids`: token ids of the vocab artifact this was built with; `[CLS]`={index['cls_id']},
  `[SEP]`={index['sep_id']}, `[PAD]`={index['pad_id']}.
- `token_type_ids`: 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`.
- `doc_ids`: which sequence of the row a token belongs to (1, 2, ...; 0 = padding). Each
  sequence is a complete `[CLS] A [SEP] (B [SEP])` example: attend only within it and count its
  positions from its `[CLS]`.
"""
