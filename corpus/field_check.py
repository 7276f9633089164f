"""Before a corpus job: whether the first input's records have the ``text_field`` the job reads,
checked by the launcher (``corpus/build.py``) so that a wrong field is one line naming the fields
the records do have, not a job that rejects every record as ``missing_text`` and ends in the
reject ratio's refusal; and whether a file that ``--format auto`` reads as text is JSONL, whose every
document would be a raw JSON line. Reads the first input as the job's reader does (``corpus/reader.py``)."""

from __future__ import annotations

import json
from typing import Iterator

from kolectra.corpus import compress, parquet, read_failures, reader

# Records of the first input read by the launcher before the job, to see that they have text_field
FIELD_SAMPLE = 100
FIELDS_SHOWN = 20  # a record's field names in that message, at most
# What one request for a bucket's object reads ahead here: FIELD_SAMPLE records are a few hundred kB, read
# 64 kB at a time (uncached, a GET each); fsspec's default block is s3fs's 50 MB, a file of that size whole
STORE_BLOCK = 1 << 20


@read_failures.before_the_job()  # its reads' failures are passed over: tried again once
def text_field_problem(path: str, fmt: str, text_field: str, max_line_bytes: int) -> str | None:
    """Before the job: one line if ``path`` is JSONL whose first :data:`FIELD_SAMPLE` objects all
    lack the key ``text_field``, or Parquet without that column, naming the fields they do have
    (every record would be a ``missing_text`` reject, and the job would end in the reject ratio's
    refusal). None otherwise, and whenever it cannot tell (a file it cannot open, lines that are no
    JSON objects): the job's reader reports those as it reports any other."""
    fmt = reader.resolve_format(path, fmt)
    try:
        if fmt == "parquet":
            with parquet.open_seekable(path) as f:
                names = parquet.column_names(f)
            return None if text_field in names else \
                f"{path} has no column {text_field!r}; its columns are: {_shown(names)}"
        if fmt != "jsonl":
            return None
        fields: dict[str, None] = {}
        seen, more = 0, False
        for obj in _first_lines(path, max_line_bytes):
            if seen == FIELD_SAMPLE:
                more = True
                break
            if obj is None:
                continue
            if text_field in obj:
                return None
            seen += 1
            fields.update(dict.fromkeys(obj))
    except Exception:  # noqa: BLE001 - unreadable here is unreadable in the job, which names it per file
        return None
    if not seen:
        return None
    which = f"none of the first {seen} records of {path}" if more else f"no record in {path}"
    return f"{which} has a field {text_field!r}; its records have: {_shown(list(fields)) or '(no fields)'}"


@read_failures.before_the_job()  # its reads' failures are passed over: tried again once
def jsonl_as_text_problem(path: str, fmt: str, max_line_bytes: int) -> str | None:
    """Before the job: one line if ``--format auto`` reads ``path`` as text (its extension is not a
    JSONL one) while each of its first :data:`FIELD_SAMPLE` non-blank lines is a JSON object: every
    document would be a raw JSON line, braces, keys and ids included, and nothing would say so. An
    explicit ``--format text`` is taken as meant. None otherwise, and whenever it cannot tell."""
    if fmt != "auto" or reader.resolve_format(path, fmt) != "text":
        return None
    seen = 0
    try:
        for obj in _first_lines(path, max_line_bytes):
            if obj is None:
                return None
            seen += 1
            if seen == FIELD_SAMPLE:
                break
    except Exception:  # noqa: BLE001 - unreadable here is unreadable in the job, which names it per file
        return None
    if not seen:
        return None
    return (f"{path}: each of its first {seen} lines is a JSON object, but --format auto reads a file with this "
            "extension as text, a document a line, braces and keys included: use --format jsonl (its text in "
            "--text-field, default text), or --format text to keep the lines as they are")


@read_failures.before_the_job()  # its reads' failures are passed over: tried again once
def parquet_as_text_problem(path: str, fmt: str) -> str | None:
    """Before the job: one line if ``--format auto`` reads ``path`` as text or JSONL (its name does not
    end in ``.parquet`` or ``.pq``: a Hive table's files are named ``000000_0``) while its bytes, once
    decompressed, open with Parquet's magic ``PAR1``: each stretch of its pages between two newline
    bytes would be a document, control bytes cleaned away, and nothing would say so (2,000 rows of
    reviews became 2,000 documents such as '다음 줄 9Z정말 재밌는 ...', exit 0). None otherwise, and
    whenever it cannot tell."""
    if fmt != "auto" or reader.resolve_format(path, fmt) == "parquet":
        return None
    try:  # without fsspec's read-ahead (50 MB from s3fs for four bytes)
        with parquet.open_seekable(path, one_way=True) as raw, compress.decompress(raw, path) as stream:
            head = stream.read(parquet.HEAD)
    except Exception:  # noqa: BLE001 - unreadable here is unreadable in the job, which names it per file
        return None
    if not parquet.opens_parquet(head):
        return None
    codec = compress.codec_of(path)
    remedy = (f"{parquet.compressed_whole(codec)} (Parquet compresses inside the file)" if codec else
              "use --format parquet (with --text-field naming its text column), or name its files *.parquet")
    return f"{path} is {parquet.misnamed(reader.resolve_format(path, fmt))}, a document a line of its raw pages: {remedy}"


def _first_lines(path: str, max_line_bytes: int) -> Iterator[dict | None]:
    """The file's non-blank lines as the job's reader splits them (decompressed, the BOM dropped), each
    the JSON object it holds, or None (not an object, or over ``max_line_bytes``)."""
    with compress.open_sample(path, STORE_BLOCK) as stream:
        for lineno, raw in reader.iter_lines(stream, max_line_bytes):
            if raw is not None and not raw.strip():
                continue
            yield _object(raw[len(reader.BOM):] if lineno == 1 and raw and raw.startswith(reader.BOM) else raw)


def _object(raw: bytes | None) -> dict | None:
    try:
        obj = json.loads(raw) if raw and raw.strip() else None
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _shown(names: list[str]) -> str:
    more = f" ... ({len(names)} in all)" if len(names) > FIELDS_SHOWN else ""
    return ", ".join(names[:FIELDS_SHOWN]) + more
