"""The shard JSON the corpus job's local memory check counts for its inputs (``corpus/memory_model.py``'s
fits are per MB of it): the job's plan counts 3.5 bytes of JSON an input byte whatever the input
(``outputs.JSON_PER_INPUT_BYTE``); the check counts the inputs' text as the fits count the reviews' text, a
text file's byte as all text, a JSONL file's by the share of its bytes that is text, a Parquet file's by
the text its rows hold, each read from a sample before a local job (docs/scale.md, "Plain text", "Parquet
by its text")."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable

from kolectra.core import storage
from kolectra.corpus import compress, outputs, parquet, read_failures, reader
from kolectra.corpus.inputs import InputFile, is_remote

# corpus/memory_model.py's fits are per MB of the shard JSON the job plans by, 3.5 bytes an input byte whatever the
# format (outputs.JSON_PER_INPUT_BYTE), measured on the reviews' JSONL, whose lines are half text: 6.9
# bytes of that JSON a byte of text. A text file is all text, so it was counted at half that for the same
# text, and what grows with the input follows the text (its packed chunks in the shuffles): the first 4
# review files as plain text peaked at 992 MB where the check said 953 (their JSONL: 944-973 against
# 1,098), and at 34 GB of text the check said 179 GB against 290 by the plain-text fit of 2026-12-01
# (docs/scale.md, "Plain text"). So the check counts a text or blocks file's byte as that many bytes of
# the JSON, as the fits count the reviews' text, and a JSONL file's as that times the share of its bytes
# that is text, sampled (the reviews' 0.51 gives the plan's 3.5; a crawl's {"url", "text"}, nearly all
# text, would be counted at half its text as plain text was); the shard plan (and so the worker term, by
# its shards) is unchanged.
TEXT_JSON_PER_INPUT_BYTE = 7.0
TEXT_FORMATS = ("text", "blocks")  # reader.resolve_format's formats whose records are all text
SHARE_FILES, SHARE_BYTES = 4, 1 << 16  # JSONL files sampled for their text's share, and the bytes read of each
# where an uncompressed JSONL file's lines are read (its start, then evenly spaced): its first 64 kB alone took
# a file whose first records are short beside their other fields for all such (jsonl_text_share)
SHARE_PLACES = 4
# A Parquet file counted as the JSONL it is taken to hold (outputs.EXPANSION's 2.4 a stored byte, the reviews'
# with all their columns, snappy), 8.4 bytes of JSON a stored byte, whatever its columns hold; the job reads
# only the text, id and kept columns, and what grows follows the text: the first 4 review files with a
# 256-float embedding column beside (92 MB a file, 7.2 MB of text) were counted at 5.4 GB where the job
# peaked near 1, and their text alone in zstd (4.25 MB a file: 1.7 text bytes a stored byte) at 4.97 bytes
# of JSON a byte of text against the 7 the fits count (docs/scale.md, "Parquet by its text"). So a Parquet
# file's rows (its footer) times the mean text of its first rows (SHARE_BYTES of them), read from up to
# SHARE_FILES of them before a local job, give the text a stored byte holds (its kept fields' JSON counted
# as text), each such byte counted as a text file's is.


def checked_json_bytes(listed: Iterable[InputFile], expanded: Iterable[float], fmt: str,
                       jsonl_share: float | None = None, parquet_text: float | None = None) -> float:
    """The shard JSON the local memory check counts for these inputs, ``expanded`` their sizes once
    decompressed in the listing's order (``memory_model.expanded_sizes``): the job's plan
    (``outputs.JSON_PER_INPUT_BYTE`` a byte), but a text or blocks file's byte as
    :data:`TEXT_JSON_PER_INPUT_BYTE`, as the fits count the text of the reviews' JSONL (above), a
    JSONL file's as that times ``jsonl_share``, the share of its bytes that is text
    (:func:`jsonl_text_share`), where that says more than the plan, and a Parquet file's stored byte as
    that times ``parquet_text``, the bytes of text a stored byte holds (:func:`parquet_text_per_byte`),
    where it was read."""
    jsonl = max(outputs.JSON_PER_INPUT_BYTE, TEXT_JSON_PER_INPUT_BYTE * (jsonl_share or 0.0))
    per_byte = {**dict.fromkeys(TEXT_FORMATS, TEXT_JSON_PER_INPUT_BYTE), "jsonl": jsonl}
    total = 0.0
    for f, size in zip(listed, expanded):
        kind = reader.resolve_format(f.path, fmt)
        if kind == "parquet" and parquet_text is not None:  # by its stored bytes: its columns hold the text
            total += f.bytes * TEXT_JSON_PER_INPUT_BYTE * parquet_text
        else:
            total += size * per_byte.get(kind, outputs.JSON_PER_INPUT_BYTE)
    return total


def checked_note(listed: Iterable[InputFile], fmt: str, jsonl_share: float | None,
                 parquet_text: float | None = None) -> str:
    """How :func:`checked_json_bytes` counted these inputs where that differs from the plan, for the check's line."""
    said = []
    if any(reader.resolve_format(f.path, fmt) in TEXT_FORMATS for f in listed):
        said.append(f"a text file's byte counted as {TEXT_JSON_PER_INPUT_BYTE:g} bytes of it")
    if jsonl_share is not None and TEXT_JSON_PER_INPUT_BYTE * jsonl_share > outputs.JSON_PER_INPUT_BYTE:
        said.append(f"a JSONL file's as {TEXT_JSON_PER_INPUT_BYTE * jsonl_share:.1f}, {jsonl_share:.0%} of its bytes "
                    "being text")
    if parquet_text is not None:
        said.append(f"a Parquet file's stored byte as {TEXT_JSON_PER_INPUT_BYTE * parquet_text:.3g}, its rows holding "
                    f"{parquet_text:.3g} bytes of text a stored byte")
    return ", ".join(said)


def _sampled(listed: Iterable[InputFile], fmt: str, kind: str) -> list[InputFile] | None:
    """Up to :data:`SHARE_FILES` of the inputs of this format, evenly spaced over the listing; None without one."""
    of_kind = [i for i, f in enumerate(listed) if reader.resolve_format(f.path, fmt) == kind]
    if not of_kind:
        return None
    step = max(1, len(of_kind) // SHARE_FILES)
    wanted = set(of_kind[::step][:SHARE_FILES])
    return [f for i, f in enumerate(listed) if i in wanted]


@read_failures.before_the_job()  # its reads' failures are passed over: tried again once
def jsonl_text_share(listed: Iterable[InputFile], fmt: str, text_field: str, max_line_bytes: int) -> float | None:
    """The share of the JSONL inputs' bytes that is their records' text (``text_field``, UTF-8), read
    from :data:`SHARE_BYTES` of up to :data:`SHARE_FILES` of them, evenly spaced over the listing: the
    reviews' JSONL is half text (their other fields the rest), a crawl's ``{"url", "text"}`` nearly all.
    A compressed file's start is read (and an http(s) file's); an uncompressed one's lines at
    :data:`SHARE_PLACES` places spread over it, its start the first (a part of the bytes each), as a file
    whose first records are short and later ones long is not its start. None without JSONL inputs or a line read; a file that cannot be
    read is passed over (the job dead-letters it), a place that cannot be reached (a server that takes
    no range) ends the file's sample. Read before a local job only, where the check counts it."""
    sampled = _sampled(listed, fmt, "jsonl")
    if sampled is None:
        return None
    text = total = 0
    for f in sampled:
        # an http(s) file is read through a 5 MB cache (compress.open_sample): a block a place, its start alone
        spread = (compress.codec_of(f.path) is None and f.bytes > SHARE_PLACES * SHARE_BYTES
                  and not (is_remote(f.path) and storage.scheme(f.path) in ("http", "https")))
        places = [f.bytes * k // SHARE_PLACES for k in range(SHARE_PLACES)] if spread else [0]
        try:
            with compress.open_sample(f.where) as stream:
                for start in places:
                    if start:
                        stream.seek(start)
                    read = 0
                    lines = reader.iter_lines(_Head(stream, 4 * SHARE_BYTES, max_line_bytes + 2), max_line_bytes)
                    for _, raw in itertools.islice(lines, 1 if start else 0, None):  # a line cut by the place: not one
                        if raw is None:
                            continue
                        read += len(raw) + 1
                        total += len(raw) + 1
                        text += _text_bytes(raw, text_field)
                        if read >= SHARE_BYTES // len(places):
                            break
        except Exception:  # noqa: BLE001 - unreadable here is unreadable in the job, which names it
            continue
    return text / total if total else None


@read_failures.before_the_job()  # its reads' failures are passed over: tried again once
def parquet_text_per_byte(listed: Iterable[InputFile], fmt: str, text_field: str,
                          keep_fields: tuple[str, ...] = ()) -> float | None:
    """The bytes of text the Parquet inputs' rows hold per stored byte (``text_field``, UTF-8, and the
    ``keep_fields`` a document carries, as JSON): for each of up to :data:`SHARE_FILES` of them, evenly
    spaced over the listing, its rows from its footer times the mean of its first rows' values, read
    until :data:`SHARE_BYTES` (those columns alone, through a 1 MiB buffer, a store's object's too: never
    a whole row group). None without Parquet inputs or a row read; a file that cannot be read is passed over (the
    job dead-letters it). Read before a local job only, where the check counts it."""
    sampled = _sampled(listed, fmt, "parquet")
    if sampled is None:
        return None
    text = stored = 0.0
    for f in sampled:
        try:
            with parquet.open_seekable(f.where) as stream:
                # pages through 1 MiB: a store's 8 MiB read-ahead fetched 10.5 MB of a 39 MB object for 64 kB
                _, groups = parquet.read_groups(stream, (text_field, *keep_fields), buffer=parquet.READ_BUFFER)
                rows = seen = held = 0
                for group_rows, values in groups:  # a group's rows are decoded only where iterated
                    rows += group_rows
                    for row in itertools.islice(values, group_rows) if held < SHARE_BYTES else ():
                        seen, held = seen + 1, held + _row_bytes(row, text_field)
                        if held >= SHARE_BYTES:
                            break
        except Exception:  # noqa: BLE001 - unreadable here is unreadable in the job, which names it
            continue
        if seen:
            text, stored = text + rows * held / seen, stored + f.bytes
    return text / stored if stored else None


def _row_bytes(row: dict, text_field: str) -> int:
    """A Parquet row's text bytes (its kept fields' as JSON)."""
    held = 0
    for column, value in row.items():
        if column == text_field and isinstance(value, (str, bytes)):
            held += len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else len(value)
        elif column != text_field and value is not None:
            held += len(json.dumps(parquet.plain(value)[0], ensure_ascii=False, default=str).encode("utf-8", "replace"))
    return held


class _Head:
    """The first ``limit`` bytes of a stream, and past them the rest of the line they end in, up to
    ``line_most`` bytes more (a line longer than the job's ``max_line_bytes`` is one it rejects): a sample
    of lines ends there. Cut at the limit, a record over about 128 kB was a line of no text (its JSON
    unparsable), a file of 200 kB records taken for half text and one of a single 900 kB record for none."""

    def __init__(self, stream, limit: int, line_most: int = 0):
        self.stream, self.left, self.line_left = stream, limit, line_most
        self.in_line = False  # what was handed out so far ends inside a line

    def read1(self, n: int = -1) -> bytes:
        if self.left > 0:
            data = self.stream.read(min(n if n >= 0 else self.left, self.left))
            self.left = self.left - len(data) if data else 0
            self.in_line = bool(data) and not data.endswith(b"\n")
            return data
        if not self.in_line or self.line_left <= 0:
            return b""
        data = self.stream.read(min(n if n > 0 else self.line_left, self.line_left))
        if (nl := data.find(b"\n")) >= 0:
            data = data[: nl + 1]
        self.line_left = self.line_left - len(data) if data else 0
        self.in_line = bool(data) and nl < 0
        return data

    read = read1


def _text_bytes(raw: bytes, text_field: str) -> int:
    try:
        value = json.loads(raw).get(text_field) if raw.strip() else None
    except (ValueError, AttributeError):
        return 0
    return len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0
