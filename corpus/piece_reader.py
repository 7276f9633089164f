"""Reading one piece of a large input file (``corpus/pieces.py`` plans the pieces; ``ReadAndClean``
in ``corpus/steps.py`` reads each as a work item): the lines of a byte range, the rows of a run of
Parquet row groups, or the lines of a compressed file's copy (``corpus/piece_copies.py``), each
numbered as in the whole file and turned into records and rejects by ``corpus/reader.py``'s rules
(a Parquet file's rows by ``corpus/parquet_records.py``'s), so that the pieces together give what
the whole file's read gives.
"""

from __future__ import annotations

from typing import IO, Iterator

from kolectra.corpus import compress, parquet_records, reader
from kolectra.corpus.input_reads import HashingReader, open_input, pinned_identity
from kolectra.corpus.record_rules import error_text


def read_piece(path: str, source: str, fmt: str, text_field: str, id_field: str, max_line_bytes: int,
               piece, digest: dict | None = None, keep_fields: tuple[str, ...] = ()) -> Iterator[dict]:
    """``reader.read_file`` of one piece of a file (``corpus/pieces.py``): of a file of lines, its bytes
    ``[start, end)``, whole lines, the first numbered ``first_line``; of a Parquet file, its row
    groups ``[start, end)``; of a compressed file, the lines of its ``copy``. The records and
    rejects the whole file's read gives for those lines or rows. ``digest`` receives the piece's
    ``bytes`` (none for row groups and copies: the plan's pass counted the file's) and ``identity``
    where the store pinned the read; the file's SHA-256 is the plan's."""
    fmt = reader.resolve_format(path, fmt)
    if piece.copy is not None:  # a compressed file's piece (corpus/piece_copies.py): its lines, copied
        yield from _read_copy(piece.copy, source, fmt, text_field, id_field, max_line_bytes, keep_fields,
                              piece.first_line, digest)
        return
    if fmt == "parquet":
        opened: list = []
        if digest is not None:
            digest["raw"] = _NOTHING_READ
        yield from parquet_records.parquet_rows(path, source, text_field, id_field, max_line_bytes, keep_fields,
                                                range(piece.start, piece.end), piece.first_line - 1, opened)
        if digest is not None:
            digest["bytes"] = 0
            if opened and (pinned := pinned_identity(path, opened[0])) is not None:
                digest["identity"] = pinned
            del digest["raw"]
        return
    f = None
    try:
        f = open_input(path)
        f.seek(piece.start)
    except reader.ReadFailed:  # the server's or store's failure after the listing: named by the job's read step
        if f is not None:
            f.close()
        raise
    except Exception as e:  # noqa: BLE001 - gone since the plan read it: a dead letter, and the file's change
        if f is not None:
            f.close()
        yield {"source": source, "line": piece.first_line, "reason": "damaged_file", "detail": f"cannot open: {error_text(e)}"}
        return
    raw = HashingReader(_Bounded(f, piece.end - piece.start), path)
    if digest is not None:
        digest["raw"] = raw
    with raw:
        yield from reader.read_lines(raw, path, source, fmt, text_field, id_field, max_line_bytes, keep_fields,
                                     piece.first_line)
        raw.drain()
        if digest is not None:
            digest["bytes"] = raw.bytes
            if (pinned := pinned_identity(path, f)) is not None:
                digest["identity"] = pinned
            del digest["raw"]


def _read_copy(copy: str, source: str, fmt: str, text_field: str, id_field: str, max_line_bytes: int,
               keep_fields: tuple[str, ...], first_line: int, digest: dict | None) -> Iterator[dict]:
    """The records and rejects of a compressed file's copied piece, its lines numbered from
    ``first_line``; its bytes were counted by the plan's read (progress), so ``digest`` gets none."""
    if digest is not None:
        digest["raw"] = _NOTHING_READ
    try:
        raw, stream = compress.open_hashed(copy)
    except Exception as e:  # noqa: BLE001 - the job's own copy gone: a dead letter naming it
        yield {"source": source, "line": first_line, "reason": "damaged_file", "detail": f"cannot open its copy: {error_text(e)}"}
    else:
        with raw, stream:
            yield from reader.read_lines(stream, copy, source, fmt, text_field, id_field, max_line_bytes,
                                         keep_fields, first_line)
    if digest is not None:
        digest["bytes"] = 0
        del digest["raw"]


class _Counted:
    bytes = 0


_NOTHING_READ = _Counted()  # a row-group or copied piece's progress: its file's bytes were counted by the plan


class _Bounded:
    """``read(n)`` of at most ``size`` bytes of ``raw``, from where it stands."""

    def __init__(self, raw: IO[bytes], size: int):
        self._raw, self._left = raw, size

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        data = self._raw.read(n) if n else b""
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._raw.close()
