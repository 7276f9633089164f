"""Large input files read in pieces by several workers (the corpus job's first steps, before
``ReadAndClean``; wired in ``corpus/build.py``).

A file is one work item of ``ReadAndClean``, so a corpus given as one 34 GB file would be read and
cleaned by one worker while every other one waited for the dedup shuffle, which needs all of the
input (what that cost at 34 GB: docs/corpus.md, "Large input files"). A file of lines (``text``,
``jsonl``, ``blocks``; a compressed one over :data:`COPY_OVER` times ``split_bytes`` once
decompressed) or a Parquet file larger than ``split_bytes`` is read in pieces instead:

1. :func:`plan` reads the file once, in order: its SHA-256 and size (what the whole-file read
   would have recorded) and the cuts, each the first line start at or after a multiple of
   ``split_bytes`` (in ``blocks``, the first blank line there, so that no block straddles a cut),
   with the number of that line (newlines counted, ``bytes.count``: no line is parsed); a Parquet
   file's pieces are runs of whole row groups of about ``split_bytes`` (its footer says their rows);
2. each :class:`Piece` goes to a worker of its own and is read as the whole file would be from its
   first line (row) to its last (``piece_reader.read_piece``), numbering its lines from the cut's: its
   records and rejects are the whole file's, line for line;
3. the pieces' rows (records in, rejected, damage, change) and the plan's (bytes, SHA-256) are
   combined into the file's one row of ``stats/files.jsonl`` (:class:`CombineRows`).

So the corpus is the same bytes whatever ``split_bytes`` is (it is an operational setting, out of
the artifact id). The price for a file of lines is a second read, sequential and cheap next to
cleaning (SHA-256 and a newline count); a Parquet file's whole read made that pass already, for its
SHA-256. A compressed stream cannot be entered in the middle, so a large
compressed file's plan decompresses it once and writes its pieces as copies
(``corpus/piece_copies.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Iterable, Iterator

import apache_beam as beam

from kolectra.corpus import compress, input_reads, inputs, outputs, parquet, piece_copies, reader
from kolectra.corpus.neardup import TALLY
from kolectra.corpus.progress import WorkerCounts

LINE_FORMATS = ("text", "jsonl", "blocks")
PLAN_CHUNK = 4 << 20  # bytes a read of the plan's pass: large, sequential reads on a store too
PIECE_ROWS = "piece_rows"  # the tag of (source, part of its row) outputs: a piece's or a plan's
# a blank line a cut may fall on, in blocks: at most this many whitespace bytes (and never more than
# max_line_bytes, or the reader would call it an over-long line, not a blank one)
BLANK_MAX = 4096
# A compressed file is copied in pieces (decompressed once, written again: piece_copies) only when it
# is over this many times split_bytes once decompressed: a smaller one is read whole at a cost like
# a piece's, and many of them spread over the workers as they are
COPY_OVER = 8


@dataclasses.dataclass(frozen=True)
class Piece:
    """Lines ``first_line``... of a file, the bytes ``[start, end)``; of a Parquet file
    (``row_groups``), its row groups ``[start, end)``, the first row numbered ``first_line``; of a
    compressed file, the decompressed bytes ``[start, end)``, read from their ``copy``.
    ``index`` counts from 0."""

    index: int
    start: int
    end: int
    first_line: int
    row_groups: bool = False
    copy: str | None = None  # a compressed file's piece: its lines, decompressed, in this zstd file (piece_copies)


def splittable(listed: inputs.InputFile, fmt: str, split_bytes: int) -> bool:
    """Whether ``listed`` is read in pieces: over ``split_bytes``, uncompressed, in a line format or
    Parquet (cut between row groups); or compressed, in a line format, over :data:`COPY_OVER` times
    ``split_bytes`` once decompressed (its pieces are copies: ``corpus/piece_copies.py``)."""
    if listed.bytes <= split_bytes:
        return False
    kind = reader.resolve_format(listed.path, fmt)
    if compress.codec_of(listed.path) is None:
        return kind in (*LINE_FORMATS, "parquet")
    return kind in LINE_FORMATS and outputs.expected_input_bytes([(listed.path, listed.bytes)]) > COPY_OVER * split_bytes


def cuts(chunks: Iterable[bytes], every: int, blocks: bool, blank_max: int = BLANK_MAX) -> Iterator[tuple[int, int]]:
    """``(offset, line)`` of each cut in the bytes ``chunks`` give in order: the first line start at
    or after each multiple of ``every`` that no earlier cut passed (``blocks``: the first start of a
    blank line, at most ``blank_max`` whitespace bytes), and that line's 1-based number. Pure."""
    blank = re.compile(rb"\n[ \t\r\x0b\x0c]{0,%d}\n" % blank_max)
    base = 0  # the file offset of buf[0]
    newlines = 0  # newlines before buf
    target = every
    buf = b""
    for chunk in chunks:
        buf += chunk
        while True:
            at = max(0, target - base - 1)  # the newline that ends the line before a cut at target
            if blocks:
                found = blank.search(buf, at)
                cut = None if found is None else found.start() + 1
            else:
                nl = buf.find(b"\n", at)
                cut = None if nl < 0 else nl + 1
            if cut is None:
                break
            line = newlines + buf.count(b"\n", 0, cut) + 1
            yield base + cut, line
            target = (base + cut) // every * every + every
        keep = blank_max + 2 if blocks else 1  # what a match across the chunks' boundary needs
        if len(buf) > keep:
            drop = len(buf) - keep
            newlines += buf.count(b"\n", 0, drop)
            base += drop
            buf = buf[drop:]


def plan(listed: inputs.InputFile, split_bytes: int, fmt: str, max_line_bytes: int,
         counts: WorkerCounts | None = None, copies: str | None = None, stem: str = "") -> tuple[dict, list[Piece]]:
    """One sequential read of the file: its ``{"bytes", "sha256"}`` (and ``identity`` where the
    store pinned the read, as ``reader.read_file`` records it) and its pieces; the bytes read go to
    ``counts`` as ``indexed`` (progress; for a Parquet or compressed file as ``bytes``, the read's own,
    since its pieces' reads count none). A compressed file's pieces are copies written under
    ``copies``, named from ``stem``. Raises what opening or reading raised: the caller then reads
    the file whole, which dead-letters it the usual way (a Parquet file that ``fmt`` auto takes for
    lines by its name, Hive's ``000000_0``, raises so: ``reader.read_file`` says what it is)."""
    by_name = fmt == "auto"
    fmt = reader.resolve_format(listed.path, fmt)
    if compress.codec_of(listed.path) is not None:
        if copies is None:
            raise ValueError("a compressed file's pieces need a folder for their copies")
        cut = functools.partial(cuts, every=split_bytes, blocks=fmt == "blocks", blank_max=min(BLANK_MAX, max_line_bytes))
        if by_name:  # Hive's 000000_0.gz: its decompressed pages were copied as lines (exit 0)
            cut = functools.partial(_lines_of, cut, listed.path, fmt)
        digest, done = piece_copies.spill(listed, cut, copies, stem, counts)
        return digest, [Piece(i, start, end, line, copy=path) for i, (start, end, line, path) in enumerate(done)]
    raw, _ = compress.open_hashed(listed.where)
    # a Parquet file's pass is the one its whole read makes for its SHA-256: the read's progress
    counter = "bytes" if fmt == "parquet" else "indexed"

    def chunks() -> Iterator[bytes]:
        while chunk := raw.read(PLAN_CHUNK):
            if by_name and fmt != "parquet" and raw.bytes == len(chunk) and parquet.opens_parquet(chunk):
                raise ValueError(f"{listed.path}: {parquet.misnamed(fmt)}")
            if counts is not None:
                counts.add(**{counter: len(chunk)})
            yield chunk

    with raw:
        found = [] if fmt == "parquet" else list(cuts(chunks(), split_bytes, fmt == "blocks",
                                                       min(BLANK_MAX, max_line_bytes)))
        for _ in chunks():  # what is left: all of a Parquet file
            pass
        digest = {"bytes": raw.bytes, "sha256": raw.sha256.hexdigest()}
        if (pinned := raw.pinned_identity(listed.path)) is not None:
            digest["identity"] = pinned
    if fmt == "parquet":
        with parquet.open_seekable(listed.where) as f:
            return digest, row_group_pieces(parquet.row_groups(f), split_bytes)
    found = [(offset, line) for offset, line in found if offset < raw.bytes]  # a cut at the end starts nothing
    if raw.read_whole():  # a server that answers a range with the whole file: a piece would download all before it
        found = []
    starts = [(0, 1), *found]
    ends = [offset for offset, _ in found] + [raw.bytes]
    return digest, [Piece(i, start, end, line) for i, ((start, line), end) in enumerate(zip(starts, ends))]


def _lines_of(cut, path: str, fmt: str, chunks: Iterator[bytes]):
    """``cut(chunks)``, once the first chunk is seen not to open a Parquet file (raised: the file
    is then read whole, and ``reader.read_file`` says what it is)."""
    def checked() -> Iterator[bytes]:
        first = True
        for chunk in chunks:
            if first and parquet.opens_parquet(chunk):
                raise ValueError(f"{path}: {parquet.misnamed(fmt)}")
            first = False
            yield chunk

    return cut(checked())


def row_group_pieces(groups: list[tuple[int, int]], split_bytes: int) -> list[Piece]:
    """A Parquet file's row groups ((rows, bytes) each) as pieces of consecutive groups, each closed
    once it holds ``split_bytes`` (a group is never cut). Pure."""
    out: list[Piece] = []
    start = size = 0
    rows = 0  # before the piece being filled
    for i, (n, group_bytes) in enumerate(groups):
        size += group_bytes
        if size >= split_bytes or i == len(groups) - 1:
            out.append(Piece(len(out), start, i + 1, rows + 1, row_groups=True))
            rows += sum(r for r, _ in groups[start:i + 1])
            start, size = i + 1, 0
    return out


class PlanPieces(beam.DoFn):
    """(key, [(rank, (file, source))]) of large files -> ``((rank, piece), (file, source, Piece))``
    work items, and each file's plan row (bytes, SHA-256, change since the listing) and its
    input-file tally; a file that cannot be planned (gone, unreadable) goes on whole as
    ``(rank, (file, source))``, to be dead-lettered by its read."""

    def __init__(self, split_bytes: int, fmt: str, max_line_bytes: int, progress_dir: str | None = None,
                 copies: str | None = None):
        self.split_bytes, self.fmt, self.max_line_bytes = split_bytes, fmt, max_line_bytes
        self.progress_dir, self.copies = progress_dir, copies

    def setup(self):
        self.counts = WorkerCounts(self.progress_dir)

    def process(self, keyed):
        for rank, (listed, source) in keyed[1]:
            try:
                digest, pieces = plan(listed, self.split_bytes, self.fmt, self.max_line_bytes, self.counts,
                                      self.copies, f"{rank:09d}")
            except Exception:  # noqa: BLE001 - the whole-file read names the error as a damaged_file reject
                yield rank, (listed, source)
                continue
            for piece in pieces:
                yield (rank, piece.index), (listed, source, piece)
            row = {"at": -1, "bytes": digest["bytes"], "sha256": digest["sha256"]}
            changed = input_reads.changed_since(listed, digest["bytes"], digest.get("identity"))
            if changed:
                row["changed"] = changed
            yield beam.pvalue.TaggedOutput(PIECE_ROWS, (source, row))
            yield beam.pvalue.TaggedOutput(TALLY, (outputs.INPUT_FILES, 1))
        self.counts.flush()


def piece_changed(listed: inputs.InputFile, piece: Piece, bytes_read: int, read_identity: str | None) -> str | None:
    """Why the file no longer matches its listing after a piece's read, or None (as
    ``input_reads.changed_since`` says it of a whole file's read)."""
    if piece.copy is not None:  # read from the plan's copy: the plan compared the file with its listing
        return None
    if not piece.row_groups and bytes_read != piece.end - piece.start:
        return f"bytes {piece.start}-{piece.end} of it read as {bytes_read} bytes"
    return input_reads.changed_since(listed, listed.bytes, read_identity)


_SUMMED = ("records_in", "rejected")
_FIRST = ("damaged", "changed", outputs.READ_FAILED)  # the first in the file's order, as the whole file's read would name it


class CombineRows(beam.CombineFn):
    """A file's row of ``stats/files.jsonl`` from its plan's part (``at`` -1: bytes, SHA-256, change)
    and its pieces' (``at``: the piece's start; records in, rejected, damage, change): counts
    summed, the first damage and change in the file's order."""

    def create_accumulator(self):
        return {k: 0 for k in _SUMMED}

    def add_input(self, acc, row):
        at = row["at"]
        return self.merge_accumulators([acc, {k: (at, v) if k in _FIRST else v for k, v in row.items() if k != "at"}])

    def merge_accumulators(self, accs):
        out = self.create_accumulator()
        for acc in accs:
            for k, v in acc.items():
                if k in _SUMMED:
                    out[k] += v
                elif k in _FIRST:
                    out[k] = min(out.get(k, v), v)
                else:
                    out[k] = v
        return out

    def extract_output(self, acc):
        return {k: v[1] if k in _FIRST else v for k, v in acc.items()}
