"""A Parquet file's rows -> records and rejects of the corpus stage, by the rules ``corpus/reader.py``
applies to a JSONL line: ``reader.read_file`` hands a Parquet file here, and ``corpus/piece_reader.py``
a piece of its row groups. ``corpus/parquet.py`` opens the file and decodes its rows; a row's ``line`` is
its 1-based number, and its reject also names ``row``, the 0-based offset. The rules the formats share
(an id's spelling, an error's text) are ``corpus/record_rules.py``'s; nothing here imports the reader.
"""

from __future__ import annotations

import uuid
from typing import Iterator

from kolectra.corpus import compress, parquet, read_failures
from kolectra.corpus.field_values import scrub_field
from kolectra.corpus.read_failures import ReadFailed
from kolectra.corpus.record_rules import FIELD_REPAIRED, canonical_id, error_text


def read_parquet(path: str, source: str, text_field: str, id_field: str, max_text_bytes: int,
                 digest: dict | None, keep_fields: tuple[str, ...]) -> Iterator[dict]:
    """``reader.read_file`` of a Parquet file (``corpus/parquet.py``): its SHA-256 from one sequential
    pass over its bytes, then its rows in order, each a record or a reject by the JSONL rules. A
    reject carries ``row``, the 0-based row offset, beside ``line`` (the 1-based row number)."""
    try:
        raw, _ = compress.open_hashed(path)
        with raw:
            raw.drain()
    except ReadFailed:
        raise
    except Exception as e:  # noqa: BLE001 - gone, unreadable, not allowed: one dead letter naming the error
        yield {"source": source, "line": 1, "row": 0, "reason": "damaged_file", "detail": f"cannot open: {error_text(e)}"}
        return
    if digest is not None:
        digest["raw"] = raw  # hashed whole already: progress counts its bytes at once
    yield from parquet_rows(path, source, text_field, id_field, max_text_bytes, keep_fields)
    if digest is not None:
        digest.update(bytes=raw.bytes, sha256=raw.sha256.hexdigest())
        del digest["raw"]


def parquet_rows(path: str, source: str, text_field: str, id_field: str, max_text_bytes: int,
                 keep_fields: tuple[str, ...], row_groups: range | None = None, done: int = 0,
                 opened: list | None = None) -> Iterator[dict]:
    """The records and rejects of a Parquet file's rows (of ``row_groups``, the first of them
    ``done`` rows into the file); ``opened`` receives the file opened. A row group with a page that
    fails to decode gives its rows up to there and a ``damaged_file`` reject, and the next group is
    read: what a group gives depends on that group alone, so the file's records are the same whether
    it is read whole or as pieces of row groups (``corpus/pieces.py``, cut by ``split_bytes``)."""
    try:
        with parquet.open_seekable(path) as f:
            if opened is not None:
                opened.append(f)
            types, groups = parquet.read_groups(f, (text_field, id_field, *keep_fields), row_groups)
            for group_rows, rows in groups:
                end = done + group_rows
                try:
                    for row in rows:
                        try:
                            rec = _parquet_record(row, types, done, source, text_field, id_field, max_text_bytes,
                                                  keep_fields)
                        except Exception as e:  # noqa: BLE001 - what one row makes fail is that row's reject
                            rec = {"source": source, "line": done + 1, "row": done, "reason": "unreadable_record",
                                   "detail": error_text(e)[:300]}
                        done += 1
                        yield rec
                except ReadFailed:
                    raise
                except Exception as e:  # noqa: BLE001 - a page of this group that fails to decode
                    _raise_if_the_server(path, e)
                    yield _parquet_damage(source, done, e, end - done)
                done = end
    except ReadFailed:  # the server's or store's failure after the listing, not the file's damage
        raise
    except parquet.Unreadable as e:  # its footer read, its columns not: the rows it would give are known
        yield _parquet_damage(source, done, e, e.rows, "the file")
    except Exception as e:  # noqa: BLE001 - not Parquet (no magic bytes), a footer that cannot be read
        _raise_if_the_server(path, e)
        yield _parquet_damage(source, done, e)


def _raise_if_the_server(path: str, e: Exception) -> None:
    """An https Parquet file's read that its server failed (pyarrow raises aiohttp's error as it is; its
    random reads are fsspec's, not retried): the ReadFailed the job names, not the file's damage."""
    if path[:8].lower().startswith(("http://", "https://")) and (failed := read_failures.of(path, e)) is not None:
        raise failed from e


def _parquet_damage(source: str, done: int, e: Exception, lost: int | None = None, whose: str = "its row group") -> dict:
    """The dead letter of a file (``lost`` None: its footer, or the file, could not be read) or of
    a row group whose page failed to decode: it names the rows of the group not read (the footer
    counts them), so the file's rows add up: records and rejects, plus these."""
    rows = "" if not lost else f" ({lost:,} row(s) of {whose} not read: rows {done}-{done + lost - 1})"
    return {"source": source, "line": done + 1, "row": done, "reason": "damaged_file",
            "detail": f"parquet error after row {done}{rows}: {error_text(e)[:300]}"}


def _parquet_record(row: dict, types: dict, offset: int, source: str, text_field: str, id_field: str,
                    max_text_bytes: int, keep_fields: tuple[str, ...]) -> dict:
    """One row's record or reject (the rules of ``reader.parse_line`` for a JSON object)."""
    where = {"source": source, "line": offset + 1}
    for name, value in row.items():
        if type(value) is parquet.NotUtf8:  # as a JSONL line that is not UTF-8: the row is rejected
            return {**where, "row": offset, "reason": "invalid_utf8", "detail": f"{name!r}: {value.detail}"}
    text = row.get(text_field)
    if text is None:
        why = "null" if text_field in types else "not a column of the file"
        return {**where, "row": offset, "reason": "missing_text", "detail": f"{text_field!r} is {why}"}
    if not isinstance(text, str):
        return {**where, "row": offset, "reason": "text_not_string",
                "detail": f"{text_field!r} is a Parquet {types[text_field]} column; the text must be a string"}
    if len(text) > max_text_bytes // 4 and len(text.encode("utf-8")) > max_text_bytes:
        return {**where, "row": offset, "reason": "line_too_long", "detail": f"the text is over {max_text_bytes} bytes"}
    doc_id = row.get(id_field)
    if doc_id is not None and not isinstance(doc_id, str):
        doc_id = str(doc_id) if isinstance(doc_id, uuid.UUID) else canonical_id(doc_id)  # arrow.uuid: its text
        if doc_id is None:
            return {**where, "row": offset, "reason": "invalid_id",
                    "detail": f"{id_field!r} is a Parquet {types[id_field]}; an id must be a string or a number"}
    rec = {**where, "id": doc_id or f"{source}:{offset + 1}", "text": text}
    if keep_fields:
        values, repaired = [], False
        for name in keep_fields:
            value, lossy = parquet.plain(row.get(name))
            value, scrubbed = scrub_field(value)
            values.append(value)
            repaired = repaired or lossy or scrubbed
        rec["fields"] = tuple(values)
        if repaired:
            rec["repaired"] = FIELD_REPAIRED
    return rec
