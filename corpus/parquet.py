"""Parquet files for the corpus reader: the rows of the columns a corpus needs, in bounded batches,
and their values as JSON values. ``corpus/reader.py`` turns the rows into records and rejects by the
same rules as JSONL lines (``--format parquet``, or ``auto`` on a ``.parquet`` file).

Memory: only the named columns that the file has are read, one row group at a time, in batches of
:data:`BATCH_ROWS` rows (``pyarrow.parquet.ParquetFile.iter_batches``), never the whole file. A file
is opened for random access (Parquet's footer is at its end) by ``corpus/inputs.py``: a local path
only while it is a regular file, a store URL through :mod:`kolectra.core.storage` (fsspec, the
artifact store's credentials).

Values (:func:`plain`): nested lists and structs become arrays and objects, a map a list of
``[key, value]`` pairs, timestamps, dates and times ISO 8601 strings, durations seconds, decimals
their exact digits in a string (a float would round them), binary UTF-8 text (bytes that are not
UTF-8 replaced, and said so).
"""

from __future__ import annotations

import datetime
import decimal
from typing import IO, Iterator, Sequence

from kolectra.corpus.inputs import open_input

BATCH_ROWS = 1024  # rows a batch: a few MB of web text (a row group is decoded once, whatever its size)
SUFFIXES = (".parquet", ".pq")


def open_seekable(path: str) -> IO[bytes]:
    return open_input(path)  # a local path only while it is a regular file (a FIFO would hang the read)


def read_rows(f: IO[bytes], columns: Sequence[str], row_groups: range | None = None) -> tuple[dict[str, str], Iterator[dict]]:
    """(the Arrow type of each of ``columns`` the file has, its rows (of ``row_groups``, default
    all) as ``{column: value}`` over those columns). A file with none of them still yields one
    empty row for each of its rows."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet inputs need it

    pf = pq.ParquetFile(f)
    schema = pf.schema_arrow
    wanted = [c for c in dict.fromkeys(columns) if c in schema.names]
    groups = range(pf.num_row_groups) if row_groups is None else row_groups
    return {c: str(schema.field(c).type) for c in wanted}, _rows(pf, wanted, groups)


def row_groups(f: IO[bytes]) -> list[tuple[int, int]]:
    """(rows, uncompressed bytes) of each of the file's row groups, from its footer."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet inputs need it

    meta = pq.ParquetFile(f).metadata
    return [(meta.row_group(i).num_rows, meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups)]


def column_names(f: IO[bytes]) -> list[str]:
    """The names of the file's columns, from its footer (no row is read)."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet inputs need it

    return list(pq.ParquetFile(f).schema_arrow.names)


def _rows(pf, wanted: list[str], groups: range) -> Iterator[dict]:
    for group in groups:
        if not wanted:
            yield from ({} for _ in range(pf.metadata.row_group(group).num_rows))
            continue
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=wanted, use_threads=False):
            values = [batch.column(c).to_pylist() for c in wanted]
            for i in range(batch.num_rows):
                yield {c: column[i] for c, column in zip(wanted, values)}


def plain(value) -> tuple[object, bool]:
    """A Parquet value (as ``to_pylist`` gives it) as a JSON value, and whether bytes that are not
    UTF-8 had to be replaced in it."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat(), False
    if isinstance(value, datetime.timedelta):
        return value.total_seconds(), False
    if isinstance(value, decimal.Decimal):
        return str(value), False
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8"), False
        except UnicodeDecodeError:
            return value.decode("utf-8", "replace"), True
    if isinstance(value, (list, tuple)):  # a map column is a list of (key, value) tuples
        items = [plain(v) for v in value]
        return [v for v, _ in items], any(lossy for _, lossy in items)
    if isinstance(value, dict):
        items = {str(k): plain(v) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, any(lossy for _, lossy in items.values())
    return value, False
