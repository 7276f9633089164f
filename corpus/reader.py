"""Bounded, forgiving input reader of the corpus stage: files -> records or rejects.

Beam's ``ReadFromText`` fails the whole job on one undecodable byte and holds arbitrarily long
lines in memory; here every line becomes either a *record* ``{"source", "line", "id", "text"}``
or a *reject* ``{"source", "line", "reason", "detail"}`` (``line`` is 1-based), so bad input is
counted and written under ``rejects/`` instead of crashing the job. Files are opened by
``corpus/inputs.py`` (a store URL through the storage layer; a local path only while it is a regular
file: one replaced by a FIFO or a device since the listing is a ``damaged_file`` reject, ``cannot
open``) and decompressed by extension (.gz, .bz2, .zst; see ``corpus/compress.py``).

Formats: ``text`` is one document per line; ``jsonl`` is one JSON object per line with the
document under ``text_field``; ``parquet`` is one document per row, its text in the column
``text_field`` (``corpus/parquet.py`` reads the rows, ``corpus/parquet_records.py`` makes them
records and rejects; a row's ``line`` is its 1-based number, and its reject also names ``row``, the
0-based offset). A blank line in either format is an empty record (dropped later as
``empty``), so every line of every input is accounted for in ``records_in``. ``blocks`` is one
document per run of non-blank lines (joined with newlines), blank lines separating documents; a
record's ``line`` is the block's first line, and a block is bounded by ``max_line_bytes`` too.

What a line can hold that the rest of the pipeline cannot: a UTF-8 byte-order mark opening the
file (skipped), and lone surrogates escaped in JSON (``"\\ud800"``: valid JSON, but no UTF-8
encoding exists, and Beam's coders would fail the whole job on it). They are removed from the
text (as cleaning would) and replaced by U+FFFD in the id, and the record says it was
``repaired``. A line that is valid JSON but that Python's parser refuses (an integer over
``sys.get_int_max_str_digits()``, nesting past the recursion limit) is an ``unparsable_json``
reject, and anything else one line makes fail an ``unreadable_record`` reject: never the end of
its file. Ids: a string as it is, a JSON number in one canonical spelling (:func:`canonical_id`),
anything else an ``invalid_id`` reject. A file whose decompression fails midway (a truncated or corrupted archive, a
``.zst`` that is not zstd) or cannot be opened ends in one reject naming the codec's error and
the line where reading stopped, reason ``damaged_file``; the bytes before it are kept. A store URL whose
server or store fails the read after the listing (an expired signed URL's 403, a 503 that outlasts the
retries, a deleted object: ``corpus/read_failures.py``) is no damage: its ReadFailed is raised, for the
job's read step to name the file (the job then fails, exit 2).
"""

from __future__ import annotations

import json
from typing import IO, Iterator

from kolectra.corpus import compress, parquet, parquet_records, suffixes
from kolectra.corpus.field_values import MAX_FIELD_DEPTH, SURROGATE, kept_fields, scrub_field  # noqa: F401  (MAX_FIELD_DEPTH, scrub_field: API)
from kolectra.corpus.inputs import InputError, expand  # noqa: F401  (InputError: part of this module's API)
from kolectra.corpus.parquet_records import parquet_rows  # noqa: F401  (this module's API, as before its move)
from kolectra.corpus.read_failures import ReadFailed
from kolectra.corpus.record_rules import FIELD_REPAIRED, canonical_id, error_text
from kolectra.corpus.source_names import source_namer, source_names  # noqa: F401  (this module's API)

REJECT_REASONS = (
    "line_too_long",
    "block_too_long",
    "invalid_utf8",
    "invalid_json",
    "unparsable_json",
    "not_an_object",
    "missing_text",
    "text_not_string",
    "invalid_id",
    "unreadable_record",
    "damaged_file",
)
REPAIRED_REASONS = ("lone_surrogate",)  # records kept after a repair, counted in stats.json
COMPRESSION_SUFFIXES = tuple(compress.SUFFIXES)
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
FIELD_FORMATS = ("jsonl", "parquet")  # the formats whose records have fields (id_field, keep_fields)


def resolve_format(path: str, fmt: str) -> str:
    """``text``, ``jsonl`` or ``parquet`` for this file; ``auto`` decides by the extension (under
    compression: Parquet compresses inside the file)."""
    if fmt != "auto":
        return fmt
    name = suffixes.file_name(path)
    if name.endswith(parquet.SUFFIXES):
        return "parquet"
    for suffix in COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return "jsonl" if name.endswith(JSONL_SUFFIXES) else "text"


def expand_inputs(patterns: list[str]) -> list[str]:
    """Every file the paths/globs name (an existing literal path wins), sorted; see ``corpus/inputs.py``."""
    return expand(patterns)


def iter_lines(stream: IO[bytes], max_line_bytes: int, chunk_bytes: int = 1 << 16,
               first_line: int = 1) -> Iterator[tuple[int, bytes | None]]:
    """``(line_number, bytes)`` per ``\\n``-terminated line (``\\r\\n`` tolerated), numbered from
    ``first_line``; ``None`` for a line longer than ``max_line_bytes``, whose remainder is skipped
    without being held in memory."""
    lineno = first_line - 1
    buf = b""
    overflow = False  # inside a line already known to be too long
    # read1: what the decompressor has, without waiting for a full chunk, so the lines before a
    # damaged spot are handed out before the codec's error (read(n) would drop them with it)
    read = getattr(stream, "read1", stream.read)
    while True:
        chunk = read(chunk_bytes)
        if not chunk:
            break
        buf += chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            lineno += 1
            line = buf[start:nl]
            if overflow or _too_long(line, max_line_bytes):
                yield lineno, None
            else:
                yield lineno, line.rstrip(b"\r")
            overflow = False
            start = nl + 1
        buf = buf[start:]
        if len(buf) > max_line_bytes + 1:  # +1: a trailing \r is not content
            overflow = True
            buf = b""
    if buf or overflow:
        lineno += 1
        yield lineno, (None if overflow or _too_long(buf, max_line_bytes) else buf.rstrip(b"\r"))


def _too_long(line: bytes, max_line_bytes: int) -> bool:
    """Whether a line (without its ``\\n``) is over ``max_line_bytes``, the ``\\r`` of a ``\\r\\n``
    not counted: the bound :func:`iter_lines` holds a line still being read to, so a line ending
    in ``\\r\\r`` is judged the same wherever the chunks of the read fall (a whole file's and a
    piece's fall in different places; its content alone was compared with the limit)."""
    return len(line) - line.endswith(b"\r") > max_line_bytes


def iter_blocks(lines: Iterator[tuple[int, bytes | None]], max_bytes: int) -> Iterator[tuple[int, list[bytes], tuple[str, int] | None]]:
    """Group ``iter_lines`` output into blank-line separated blocks:
    ``(first_line, lines, None)`` or ``(first_line, [], (reason, offending_line))``."""
    start, parts, size, bad = None, [], 0, None
    for lineno, raw in lines:
        if raw is not None and not raw.strip():
            if start is not None:
                yield start, ([] if bad else parts), bad
            start, parts, size, bad = None, [], 0, None
            continue
        if start is None:
            start = lineno
        if bad:
            continue  # skip the rest of a rejected block without holding it
        if raw is None:
            bad = ("line_too_long", lineno)
            continue
        size += len(raw) + 1
        if size > max_bytes:
            bad = ("block_too_long", lineno)
        else:
            parts.append(raw)
    if start is not None:
        yield start, ([] if bad else parts), bad


def parse_line(raw: bytes, fmt: str, text_field: str, id_field: str) -> tuple[str, str | None] | tuple[None, str, str]:
    """``(text, id_or_None)`` for a good line, ``(None, reason, detail)`` for a reject. Pure."""
    parsed = _parse(raw, fmt, text_field, id_field)
    return parsed if parsed[0] is None else parsed[:2]


def _parse(raw: bytes, fmt: str, text_field: str, id_field: str) -> tuple:
    """:func:`parse_line`, with the parsed JSON object (None for text) as a third item of a good line."""
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, "invalid_utf8", f"byte {raw[e.start]:#04x} at offset {e.start}"
    if fmt == "text" or not decoded.strip():
        return decoded, None, None
    try:
        obj = json.loads(decoded)
    except json.JSONDecodeError as e:
        return None, "invalid_json", e.msg + f" at column {e.colno}"
    except RecursionError:  # valid JSON, but nested deeper than Python's parser (and stack) allows
        return None, "unparsable_json", "nested too deeply for Python's JSON parser"
    except (ValueError, OverflowError, MemoryError) as e:  # e.g. an integer over sys.get_int_max_str_digits()
        return None, "unparsable_json", f"valid JSON that Python's parser refuses: {str(e).split(';')[0][:200]}"
    if not isinstance(obj, dict):
        return None, "not_an_object", f"a JSON {_json_type(obj)}"
    text = obj.get(text_field)
    if text is None:
        return None, "missing_text", f"no {text_field!r} field (or null)"
    if not isinstance(text, str):
        return None, "text_not_string", f"{text_field!r} is a JSON {_json_type(text)}"
    doc_id = obj.get(id_field)
    if doc_id is None or isinstance(doc_id, str):
        return text, doc_id, obj
    canonical = canonical_id(doc_id)
    if canonical is None:
        return None, "invalid_id", f"{id_field!r} is a JSON {_json_type(doc_id)}; an id must be a string or a number"
    return text, canonical, obj


def _json_type(value) -> str:
    """A parsed value's JSON type name (``object``, ``array``, ``boolean`` ...), for details."""
    for kind, name in ((bool, "boolean"), (dict, "object"), (list, "array"), (str, "string"), (int, "number"),
                       (float, "number")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


BOM = b"\xef\xbb\xbf"


def repair_surrogates(text: str, doc_id: str | None) -> tuple[str, str | None, bool]:
    """Lone surrogates out of the text (cleaning drops them too) and as U+FFFD into the id."""
    if SURROGATE.search(text) is None and (doc_id is None or SURROGATE.search(doc_id) is None):
        return text, doc_id, False
    return SURROGATE.sub("", text), (None if doc_id is None else SURROGATE.sub("\ufffd", doc_id)), True


def read_file(path: str, source: str, fmt: str, text_field: str, id_field: str, max_line_bytes: int,
              digest: dict | None = None, keep_fields: tuple[str, ...] = ()) -> Iterator[dict]:
    """Records and rejects of one file, in line order. A reject has a ``reason`` key; a record
    whose text or id had to be repaired has ``repaired``. With ``keep_fields``, every record has
    ``fields``: their values (:func:`kept_fields`; all None in text and blocks files, which have no
    fields). ``digest``, if given, receives the
    ``bytes`` and ``sha256`` of the raw (still compressed) bytes read, the whole file even when
    its decompression failed (and, while reading, ``raw``: the hashing stream, for progress)."""
    by_name = fmt == "auto"
    fmt = resolve_format(path, fmt)
    if fmt == "parquet":
        yield from parquet_records.read_parquet(path, source, text_field, id_field, max_line_bytes, digest, keep_fields)
        return
    try:
        raw, stream = compress.open_hashed(path)
    except ReadFailed:  # a store or server that failed after the listing: the job's read step names it
        raise
    except Exception as e:  # noqa: BLE001 - gone, unreadable, not allowed: one dead letter naming the error
        yield {"source": source, "line": 1, "reason": "damaged_file", "detail": f"cannot open: {error_text(e)}"}
        return
    if digest is not None:
        digest["raw"] = raw
    with raw:
        with stream:
            try:  # a Parquet file named otherwise (Hive's 000000_0) would be read as lines of its pages
                head = stream.read(parquet.HEAD) if by_name else b""
            except ReadFailed:
                raise
            except Exception as e:  # noqa: BLE001 - a damaged archive: as read_lines says it
                head = None
                yield {"source": source, "line": 1, "reason": "damaged_file",
                       "detail": f"{compress.codec_of(path) or 'read'} error after line 0: {error_text(e)}"}
            if head is not None and parquet.opens_parquet(head):
                remedy = ("give --format parquet, or name it *.parquet" if not (codec := compress.codec_of(path)) else
                          parquet.compressed_whole(codec))
                yield {"source": source, "line": 1, "reason": "damaged_file",
                       "detail": f"{parquet.misnamed(fmt)}: {remedy}"}
            elif head is not None:
                yield from read_lines(_Replayed(head, stream) if head else stream, path, source, fmt, text_field,
                                      id_field, max_line_bytes, keep_fields)
            raw.drain()
    if digest is not None:
        digest.update(bytes=raw.bytes, sha256=raw.sha256.hexdigest())
        if (pinned := raw.pinned_identity(path)) is not None:  # the version every read was pinned to (S3)
            digest["identity"] = pinned
        del digest["raw"]


class _Replayed:
    """A stream whose first bytes (``head``) were read already, given back before the rest."""

    def __init__(self, head: bytes, stream: IO[bytes]):
        self.head, self.stream = head, stream

    def read1(self, size: int = -1) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out
        return getattr(self.stream, "read1", self.stream.read)(size)

    def read(self, size: int = -1) -> bytes:
        out, self.head = self.head, b""
        if size < 0:
            return out + self.stream.read()
        if size <= len(out):
            out, self.head = out[:size], out[size:]
            return out
        return out + self.stream.read(size - len(out))


def read_lines(stream: IO[bytes], path: str, source: str, fmt: str, text_field: str, id_field: str,
               max_line_bytes: int, keep_fields: tuple[str, ...], first_line: int = 1) -> Iterator[dict]:
    """The records and rejects of ``stream``'s lines (a text, JSONL or blocks file's, or a piece's
    from ``first_line``); a read that fails midway ends them with a ``damaged_file`` reject."""
    lineno = first_line - 1
    read = [lineno]  # blocks: the last line read (a record's line is its block's first)
    try:
        if fmt == "blocks":
            for rec in _read_blocks(stream, source, max_line_bytes, first_line, read):
                if keep_fields and "reason" not in rec:
                    rec["fields"] = (None,) * len(keep_fields)
                yield rec
        else:
            for lineno, line in iter_lines(stream, max_line_bytes, first_line=first_line):
                yield _record(line, lineno, source, fmt, text_field, id_field, max_line_bytes, keep_fields)
    except ReadFailed:  # not the file's damage: the server's or store's failure, which the job names (steps.py)
        raise
    except Exception as e:  # noqa: BLE001 - a truncated or corrupted archive: the codec fails midway
        lineno = max(lineno, read[0])
        yield {"source": source, "line": lineno + 1, "reason": "damaged_file",
               "detail": f"{compress.codec_of(path) or 'read'} error after line {lineno}: {error_text(e)}"}


def _record(raw: bytes | None, lineno: int, source: str, fmt: str, text_field: str, id_field: str,
            max_line_bytes: int, keep_fields: tuple[str, ...] = ()) -> dict:
    """One line's record or reject. Whatever one line makes fail is that line's reject: an
    exception escaping here would end the file's read as ``damaged_file`` and lose every line after it."""
    try:
        return _parse_record(raw, lineno, source, fmt, text_field, id_field, max_line_bytes, keep_fields)
    except Exception as e:  # noqa: BLE001 - RecursionError included
        return {"source": source, "line": lineno, "reason": "unreadable_record", "detail": error_text(e)[:300]}


def _parse_record(raw: bytes | None, lineno: int, source: str, fmt: str, text_field: str, id_field: str,
                  max_line_bytes: int, keep_fields: tuple[str, ...] = ()) -> dict:
    if raw is None:
        return {"source": source, "line": lineno, "reason": "line_too_long", "detail": f"over {max_line_bytes} bytes"}
    if lineno == 1 and raw.startswith(BOM):
        raw = raw[len(BOM):]
    parsed = _parse(raw, fmt, text_field, id_field)
    if parsed[0] is None:
        return {"source": source, "line": lineno, "reason": parsed[1], "detail": parsed[2]}
    text, doc_id, repaired = repair_surrogates(*parsed[:2])
    rec = {"source": source, "line": lineno, "id": doc_id or f"{source}:{lineno}", "text": text}
    if repaired:
        rec["repaired"] = "lone_surrogate"
    if keep_fields:
        rec["fields"], field_repaired = kept_fields(parsed[2], keep_fields)
        if field_repaired and not repaired:
            rec["repaired"] = FIELD_REPAIRED
    return rec


def _read_blocks(stream: IO[bytes], source: str, max_bytes: int, first_line: int = 1,
                 read: list | None = None) -> Iterator[dict]:
    """The records and rejects of ``stream``'s blocks; ``read[0]`` is kept at the number of the last
    line read (a damage's spot: the lines of the block it cut short were read, not given)."""
    lines = _counted(iter_lines(stream, max_bytes, first_line=first_line), read if read is not None else [0])
    first = next(lines, None)
    if first is not None and first[0] == 1 and first[1] is not None and first[1].startswith(BOM):
        first = (first[0], first[1][len(BOM):])
    lines = _chain(first, lines)
    for start, parts, bad in iter_blocks(lines, max_bytes):
        if bad:
            yield {"source": source, "line": start, "reason": bad[0], "detail": f"at line {bad[1]}, over {max_bytes} bytes"}
            continue
        parsed = parse_line(b"\n".join(parts), "text", "", "")
        if parsed[0] is None:
            yield {"source": source, "line": start, "reason": parsed[1], "detail": parsed[2]}
        else:
            yield {"source": source, "line": start, "id": f"{source}:{start}", "text": parsed[0]}


def _counted(lines: Iterator[tuple[int, bytes | None]], read: list) -> Iterator[tuple[int, bytes | None]]:
    for line in lines:
        read[0] = line[0]
        yield line


def _chain(first, rest):
    if first is not None:
        yield first
    yield from rest
