"""Parquet files for the corpus reader: the rows of the columns a corpus needs, in bounded batches,
and their values as JSON values. ``corpus/parquet_records.py`` turns the rows into records and rejects by the
same rules as JSONL lines (``--format parquet``, or ``auto`` on a ``.parquet`` file).

A page that fails to decode loses the rest of its row group, not of the file: the next group is read
(the reader dead-letters each such group), so a file read whole and read as pieces of whole row
groups (``corpus/pieces.py``) give the same records, however the pieces are cut.

Memory: only the named columns that the file has are read, one row group at a time, in batches
(``pyarrow.parquet.ParquetFile.iter_batches``) of :data:`BATCH_ROWS` rows, or fewer where the row
group's read columns (their uncompressed bytes in the footer) would make a batch larger than
:data:`BATCH_BYTES` (rows of 300 kB: 27 a batch), never the whole file nor a whole row group: pages
are read through a :data:`READ_BUFFER` buffer, not each column chunk in one read. A
dictionary-encoded string column, which the footer counts by its distinct values, is read as its
dictionary or in batches of its longest value (:func:`plan`); a column whose Arrow type is a
dictionary (pandas' category) as its values, planned so too (:func:`read_groups`). What pyarrow
cannot split is a page, read and decompressed whole (its writer puts up to 1,024 rows in a page):
docs/corpus.md has the numbers. A file
is opened for random access (Parquet's footer is at its end) by ``corpus/inputs.py``: a local path
only while it is a regular file, a store URL through :mod:`kolectra.core.storage` (fsspec, the
artifact store's credentials).

Values (:func:`plain`): nested lists and structs become arrays and objects, a map a list of
``[key, value]`` pairs, timestamps, dates and times ISO 8601 strings, durations seconds, decimals
their exact digits in a string (a float would round them), binary UTF-8 text (bytes that are not
UTF-8 replaced, and said so), anything else (a UUID, of the arrow.uuid type) its text.
"""

from __future__ import annotations

import datetime
import decimal
from typing import IO, Iterator, Sequence

from kolectra.core import storage
from kolectra.corpus import http_reads, suffixes
from kolectra.corpus.input_reads import open_input
from kolectra.corpus.inputs import is_remote

BATCH_ROWS = 1024  # rows a batch at most: a few MB of web text
BATCH_BYTES = 8 << 20  # a batch's share of its row group's uncompressed bytes (read columns), at least a row
READ_BUFFER = 1 << 20  # pages are read through a buffer of this size (0, pyarrow's default, read a column chunk at once)
DICTIONARY_COPIES, DICTIONARY_ENTRY = 3, 200  # Arrow holds a column read as a dictionary at up to 3 times its bytes and 200 a row
REMOTE_READ_BUFFER = 8 << 20  # the same for a store's object: each fill is one ranged GET
PROBE_BUFFER = 2 << 20  # a dictionary page and the first data page (writers close each near 1 MB): one read
SUFFIXES = suffixes.PARQUET
MAGIC = b"PAR1"  # a Parquet file's first (and last) four bytes
HEAD = 5  # the first bytes that tell a Parquet file from a text file (:func:`opens_parquet`)


def opens_parquet(head: bytes) -> bool:
    """Whether a file's first :data:`HEAD` bytes are a Parquet file's: its magic ``PAR1``, then the
    Thrift header of its first page (or of its footer, where no row was written), whose first byte
    is 0x15 (field 1, an i32) whoever wrote it. A text file whose first word is PAR1 (a part number)
    is text: taken for Parquet by the magic alone, it was refused before the job, or dead-lettered."""
    return head[: len(MAGIC)] == MAGIC and head[len(MAGIC): HEAD] == b"\x15"


def misnamed(fmt: str) -> str:
    """What a file is that :func:`opens_parquet` finds Parquet while ``--format auto`` takes it for ``fmt``
    by its name (Hive's ``000000_0``): the one sentence the check before the job (``corpus/field_check.py``),
    the reader's ``damaged_file`` dead letter and the pieces' plan say it in, each followed by its remedy."""
    return f"a Parquet file (it opens with {MAGIC.decode()}), which --format auto reads as {fmt} by its name"


def compressed_whole(codec: str) -> str:
    """The remedy after :func:`misnamed` where the file is compressed whole (Hive's ``000000_0.gz``), which
    ``--format parquet`` would not read either (its footer is at the end of the decompressed stream)."""
    return f"compressed whole ({codec}), which no format reads: decompress it, and name it *.parquet"


def open_seekable(path: str, one_way: bool = False) -> IO[bytes]:
    """``path`` opened for random access: a local path only while it is a regular file (a FIFO would
    hang the read); a store's object without fsspec's read-ahead cache, which keeps one region of
    the object: the pages of two columns read in turn refetched a block (s3fs: 50 MB) at every
    switch, 36 times a file's bytes. pyarrow's buffer (:data:`REMOTE_READ_BUFFER` a column) reads ahead.
    An http(s) URL's reads are tried again where their failure may pass, as a text file's are
    (:mod:`kolectra.corpus.http_reads`; a 503 amid its rows failed the job); a server that takes no range
    fails as before (``skip_most=0``: never read as one GET, whose reader could not seek back), unless ``one_way``
    (a read of the file's first bytes, on from there: it may be read as one GET)."""
    if is_remote(path) and storage.scheme(path) in ("http", "https"):
        return http_reads.ranged_or_whole(http_reads.opened(path, cache_type="none"), path,
                                          skip_most=None if one_way else 0)
    if is_remote(path):
        return storage.open_file(path, cache_type="none")
    return open_input(path)


def read_groups(f: IO[bytes], columns: Sequence[str], row_groups: range | None = None, buffer: int | None = None
                ) -> tuple[dict[str, str], Iterator[tuple[int, Iterator[dict]]]]:
    """(the Arrow type of each of ``columns`` the file has, for each of ``row_groups`` (default all)
    its row count from the footer and its rows as ``{column: value}`` over those columns). A group's
    rows are decoded as they are iterated, so a page that fails to decode raises there, and the
    next group can still be read: a row group's pages are located from the footer, not from the
    group before it. A file with none of the columns still yields one empty row for each row.
    ``buffer``: the pages' read buffer where not the default (a store's object's 8 MiB, a local file's
    1 MiB): a sample of a few rows (corpus/checked_json.py) reads 1 MiB at a time on a store too."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet inputs need it
    from fsspec.spec import AbstractBufferedFile  # noqa: PLC0415 - a store's file (open_seekable)

    remote = isinstance(f, (AbstractBufferedFile, http_reads.RangesOrWhole))
    buffer = buffer or (REMOTE_READ_BUFFER if remote else READ_BUFFER)
    pf = pq.ParquetFile(f, buffer_size=buffer, pre_buffer=False)
    schema = pf.schema_arrow
    groups = range(pf.num_row_groups) if row_groups is None else row_groups
    wanted = [c for c in dict.fromkeys(columns) if c in schema.names]
    for c in wanted:  # pyarrow writes such a file; reading it said 'Column text does not exist in schema'
        if (n := len(schema.get_all_field_indices(c))) > 1:
            if groups.start:  # a later piece of the file (corpus/pieces.py): the first piece's dead letter is
                return {}, iter(())  # the file's, as its whole read's (one a piece failed max_reject_ratio)
            raise Unreadable(f"{n} columns of the file are named {c!r}: which one to read is not known",
                             pf.metadata.num_rows)

    readers: dict = {}
    # a category column (pandas' category: the Arrow schema stored in the footer types it a dictionary)
    # is read as its values by a reader over the footer without that schema: read as a dictionary,
    # Arrow hashed the dictionary page (every distinct value of the group: pyarrow writes a category's
    # values as one page, whatever its size) into a table and copied it into each batch, 5.5 times
    # the page held where a page read as values holds 2 (docs/corpus.md)
    categories = [c for c in wanted if _category(schema.field(c).type)]
    footers = {False: pf.metadata, True: _without_arrow_schema(pf, categories) if categories else None}
    if footers[True] is None:
        categories = []

    def reader(dictionary: Sequence[str] = (), size: int = buffer, values: bool = False):  # the footer is not read again
        key = (tuple(dictionary), size, values)  # one a kind: a file of many small groups opened one a group
        if key not in readers:
            readers[key] = pq.ParquetFile(f, metadata=footers[values], read_dictionary=list(dictionary) or None,
                                          buffer_size=size, pre_buffer=False)
        return readers[key]

    return ({c: str(schema.field(c).type) for c in wanted},
            ((pf.metadata.row_group(g).num_rows, _group_rows(pf, reader, wanted, g, categories)) for g in groups))


def row_groups(f: IO[bytes]) -> list[tuple[int, int]]:
    """(rows, uncompressed bytes) of each of the file's row groups, from its footer."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet inputs need it

    meta = pq.ParquetFile(f).metadata
    return [(meta.row_group(i).num_rows, meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups)]


def column_names(f: IO[bytes]) -> list[str]:
    """The names of the file's columns, from its footer (no row is read)."""
    import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet inputs need it

    return list(pq.ParquetFile(f).schema_arrow.names)


def _group_rows(pf, reader, wanted: list[str], group: int, categories: Sequence[str] = ()) -> Iterator[dict]:
    meta = pf.metadata.row_group(group)
    if not wanted:
        yield from ({} for _ in range(meta.num_rows))
        return
    if not categories:
        rows, dictionary = plan(pf, reader, wanted, group)
        yield from _rows(reader(dictionary) if dictionary else pf, wanted, rows, group)
        return
    # the category columns as their values (planned as any string column), the others as before; the
    # two readers' rows, batches of the same size over the same group, are zipped back together
    rows, dictionary = plan(reader(values=True), reader, wanted, group, categories)
    others = [c for c in wanted if c not in categories]
    indexed = [c for c in dictionary if c in others]
    parts = [_rows(reader(indexed) if indexed else pf, others, rows, group),
             _rows(reader([c for c in dictionary if c in categories], values=True), list(categories), rows, group)]
    for left, right in zip(*parts):
        left.update(right)
        yield {c: left[c] for c in wanted}


def _rows(source, columns: list[str], rows: int, group: int) -> Iterator[dict]:
    """``columns``' rows of ``group`` as ``{column: value}``, decoded ``rows`` at a time (none: empty rows)."""
    if not columns:
        yield from ({} for _ in range(source.metadata.row_group(group).num_rows))
        return
    for batch in source.iter_batches(batch_size=rows, row_groups=[group], columns=columns, use_threads=False):
        values = [_values(batch.column(c)) for c in columns]
        for i in range(batch.num_rows):
            yield {c: column[i] for c, column in zip(columns, values)}


def batch_rows(pf, wanted: list[str], group: int) -> int:
    """Rows a batch of ``group`` by its footer: :data:`BATCH_ROWS`, or as many as hold
    :data:`BATCH_BYTES` of the ``wanted`` columns' uncompressed bytes at the group's mean row size
    (at least 1). Where a group's batches fall changes only what a damaged page loses of its group
    (the batch it is in)."""
    meta = pf.metadata.row_group(group)
    top = set(wanted)
    size = sum(meta.column(j).total_uncompressed_size
               for j, path in enumerate(pf.reader.column_paths) if path[0] in top)
    return max(1, min(BATCH_ROWS, BATCH_BYTES * meta.num_rows // max(size, 1)))


def plan(pf, reader, wanted: list[str], group: int, categories: Sequence[str] = ()) -> tuple[int, list[str]]:
    """(rows a batch of ``group``, the ``wanted`` columns read as dictionaries). The footer counts a
    dictionary-encoded column's distinct values once, its rows as indices: 1,000 rows of one 300 kB
    string are 300 kB there and 300 MB decoded. So a string or binary column with a dictionary page
    is read as its dictionary and indices (``read_dictionary``; a row's value is made when its batch
    is, one Python object a distinct value) while what Arrow may hold for such columns adds up to
    :data:`BATCH_BYTES`: it hashes pages that fell back to plain into the same dictionary and keeps
    it for the whole group, a copy in each batch (:data:`DICTIONARY_COPIES` times the footer's
    bytes, :data:`DICTIONARY_ENTRY` a row). Another such column is decoded, in batches of at most
    :data:`BATCH_BYTES` over its dictionary's longest value (:func:`longest_value`) as well as
    :func:`batch_rows`' share. Where that page is over :data:`PROBE_BUFFER` (pyarrow's writer
    closes a string column's near 1 MB, but writes a dictionary array's values, pandas' category,
    as one page of every distinct value of the group, and so does a category written without its
    Arrow schema), or the column is one of the ``categories`` (which ``pf`` types as strings), its
    longest value is bounded by the column's bytes in the footer instead: read as a dictionary, as
    the probe reads it, such a page was held about five times over (60 MB: 270 MiB of Arrow memory)."""
    meta = pf.metadata.row_group(group)
    rows, top, schema = batch_rows(pf, wanted, group), set(wanted), pf.schema_arrow
    held, dictionary, longest = 0, [], 0
    for j, path in enumerate(pf.reader.column_paths):
        column = meta.column(j)
        if len(path) != 1 or path[0] not in top or not column.has_dictionary_page or not _bytes(
                schema.field(path[0]).type):
            continue
        cost = DICTIONARY_COPIES * column.total_uncompressed_size + DICTIONARY_ENTRY * column.num_values
        if held + cost <= BATCH_BYTES:
            held += cost
            dictionary.append(path[0])
        else:
            bound = path[0] in categories or _dictionary_page(column) > PROBE_BUFFER
            longest += column.total_uncompressed_size if bound else longest_value(reader, path[0], group)
    return (max(1, min(rows, BATCH_BYTES // longest)) if longest else rows), dictionary


def _dictionary_page(column) -> int:
    """The stored bytes of a column chunk's dictionary page, from the footer (it precedes the data pages)."""
    start = column.dictionary_page_offset
    return column.data_page_offset - start if start else 0


def longest_value(reader, column: str, group: int) -> int:
    """Bytes of the longest value in ``column``'s dictionary page in ``group``: the page and the
    group's first row are read (through a buffer of :data:`PROBE_BUFFER`), nothing else."""
    import pyarrow.compute as pc  # noqa: PLC0415 - only Parquet inputs need it

    first = next(reader((column,), PROBE_BUFFER).iter_batches(batch_size=1, row_groups=[group], columns=[column],
                                                            use_threads=False), None)
    if first is None:
        return 0
    return pc.max(pc.binary_length(first.column(0).dictionary)).as_py() or 0


def _bytes(kind) -> bool:
    import pyarrow as pa  # noqa: PLC0415 - only Parquet inputs need it

    return (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
            or pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind))


def _category(kind) -> bool:
    """Whether an Arrow type is a dictionary of strings or bytes (pandas' category of text)."""
    import pyarrow as pa  # noqa: PLC0415 - only Parquet inputs need it

    return pa.types.is_dictionary(kind) and _bytes(kind.value_type)


ARROW_SCHEMA_KEY = b"\x18\x0cARROW:schema"  # its key in the footer's Thrift: field 1, a binary of 12 bytes


def _without_arrow_schema(pf, categories: Sequence[str]):
    """``pf``'s footer with the Arrow schema pyarrow stored in it renamed, so that a reader over it
    types each column by its Parquet type alone: the ``categories`` as strings (or binary). The
    footer is pickled to its Thrift bytes and the key's name swapped for another of its length. None
    where that does not give those columns as values (the key not there once): they are read as
    dictionaries then."""
    import pyarrow as pa  # noqa: PLC0415 - only Parquet inputs need it

    try:
        rebuild, (footer,) = pf.metadata.__reduce__()
        data = footer.to_pybytes()
        if data.count(ARROW_SCHEMA_KEY) != 1:
            return None
        metadata = rebuild(pa.py_buffer(data.replace(ARROW_SCHEMA_KEY, b"\x18\x0cARROW:unused")))
        schema = metadata.schema.to_arrow_schema()
    except Exception:  # noqa: BLE001 - a footer pyarrow read but would not write back: read as before
        return None
    return metadata if all(_bytes(schema.field(c).type) for c in categories) else None


class Unreadable(ValueError):
    """A file whose footer was read but whose rows cannot be: ``rows``, the rows it would have given."""

    def __init__(self, message: str, rows: int):
        super().__init__(message)
        self.rows = rows


class NotUtf8:
    """A string value whose bytes are not UTF-8 (a writer that did not check them): its row's
    ``invalid_utf8`` reject (``corpus/parquet_records.py``), as a JSONL line's. ``detail``: the byte and its
    offset in the value."""

    __slots__ = ("detail",)

    def __init__(self, detail: str):
        self.detail = detail


def _values(column) -> list:
    """A batch's column as Python values; a string value that is not UTF-8 is a :class:`NotUtf8`
    (``to_pylist`` fails on the whole batch for one, which lost the rest of its row group)."""
    if hasattr(column, "dictionary"):  # read as its dictionary: a distinct value made once, shared by its rows
        import pyarrow.compute as pc  # noqa: PLC0415 - only Parquet inputs need it

        used = pc.unique(column.indices).drop_null()
        value = dict(zip(used.to_pylist(), _values(column.dictionary.take(used))))
        if column.null_count:
            return [None if i is None else value[i] for i in column.indices.to_pylist()]
        return list(map(value.__getitem__, column.indices.to_pylist()))
    try:
        return column.to_pylist()
    except UnicodeDecodeError:
        return [_value(column, i) for i in range(len(column))]


def _value(column, i: int):
    try:
        return column[i].as_py()
    except UnicodeDecodeError as e:
        return NotUtf8(f"byte {e.object[e.start]:#04x} at offset {e.start}")


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
    if value is None or isinstance(value, (str, int, float)):
        return value, False
    # an extension type's object: pyarrow reads the arrow.uuid type as uuid.UUID, which ended the job
    # in 'internal error: TypeError: Object of type UUID is not JSON serializable'; its text instead
    return str(value), False
