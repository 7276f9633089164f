"""Reading the files users hold for a benchmark: TSV, CSV or JSONL with a header, or a saved ``datasets`` folder.

Feeds the file-driven tasks of the last stage (``finetune.classify``, ``finetune.regress``,
``finetune.ner``).  :func:`read_table` turns one file into :class:`Table` records (column name ->
value, each with its line number) and counts the rows that cannot be read; the task then takes its
columns with :meth:`Table.column` (a wrong name lists the columns the file has).  :func:`open_table`
gives the same records one at a time, read as they are asked for (a task that keeps a few values of
each row holds neither the file's lines nor its records).

Why not ``datasets.load_dataset("csv", ...)`` for the text formats: it reads through pandas, which
turns ``NA``/``null`` into missing values, merges rows across a stray ``"`` (KorSTS and KorNLI
have such rows) and reports neither the line of a bad row nor how many were dropped.  So:

* **TSV** (``.tsv``, ``.txt``) is split on tab and LF only, like the NSMC reader: no quoting, a
  quote is a character; a CR before the LF is dropped.  An empty line (a trailing one, say; or one
  of spaces and tabs alone, which an editor leaves) holds no row, as every task reads two columns at least: skipped and counted, ``blank_lines`` (CSV and
  JSONL too), not a malformed row.
* **CSV** (``.csv``) goes through the standard library's ``csv`` module (RFC 4180 quoting, a
  quoted field may hold newlines); a row's number is the line it starts on.
* **JSONL** (``.jsonl``, ``.json``, ``.ndjson``): one object per line (a byte-order mark opening a line, as
  files joined with ``cat`` each bring one, dropped), blank lines skipped; nested
  objects are reachable with dotted names (``labels.label``); the columns are the keys of every
  object (an optional field may be missing from the first).  A file that is one JSON array of objects
  (KLUE's own ``klue-ynat-v1.1_train.json``, ``klue-sts-...``, ``klue-nli-...``) is read an item at a time, its items
  numbered as rows, an item at a time (:mod:`finetune.readers.json_array`).
* **Parquet** (``.parquet``, ``.pq``): read a batch of rows at a time through Arrow, a row's number its row; the class-label
  columns ``Dataset.to_parquet`` describes in the file's metadata give their names, as a saved dataset's do.
* **A folder** written by ``Dataset.save_to_disk`` is read with ``datasets.load_from_disk``;
  struct columns are flattened to dotted names (KLUE-STS's ``labels.label``) and class-label
  columns give their names (KLUE-YNAT's topics, KLUE-NER's tags), not their integer codes.

A row with the wrong number of fields (or a JSONL line that is not an object), or one that repeats
the header (two files joined with ``cat``), is a *bad row*:
counted, its line kept for ``metrics.json``; above ``max_bad_fraction`` of the rows the file is
refused with the first offenders named (:func:`check_bad`).
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Iterable, Iterator

from kolectra.finetune.files import (
    FinetuneError,
    Reason,
    bad_limit,
    by_reason,
    column_name,
    container,
    iter_text_lines,
    not_utf8,
    shown_bad,
)
from kolectra.finetune.readers.arrow_rows import parquet_rows, saved_rows
from kolectra.finetune.readers.jsonl_rows import jsonl_records

FORMATS = ("auto", "tsv", "csv", "jsonl", "datasets", "parquet", "quoted_tsv")
SUFFIXES = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl",
            ".parquet": "parquet", ".pq": "parquet"}
SHOWN_BAD = 20  # bad lines listed in metrics.json


@dataclasses.dataclass
class Table:
    path: Path
    columns: list[str]
    # (line in the file, or row of a saved dataset, from 1; values by column); from :func:`open_table`, an
    # iterator that reads the file as it is consumed, adding to ``bad`` and ``blank`` (and for JSONL ``columns``)
    records: list[tuple[int, dict]] | Iterator[tuple[int, dict]]
    bad: list[tuple[int, str]]  # (line, why) of the rows that could not be read
    unit: str = "line"  # "line": a text file; "row": a saved dataset
    blank: int | None = None  # empty lines skipped (TSV, CSV, JSONL): lines = (header) + rows + bad + blank
    complete: bool = True  # whether ``columns`` names them all (JSONL's, from open_table: only once read)
    taken: int | None = None  # a task that consumed ``records`` without keeping them: how many it took
    # CSV rows read over several lines (a quoted field holding line breaks, or a " that opens a field and is
    # never closed), the lines they took past their first, and the first such row's (first, last) line
    multiline: int = 0
    continued: int = 0
    first_multiline: tuple[int, int] | None = None
    # TSV rows with a field quoted as a CSV writer quotes it ("a ""b"""), read as text quotes and all, and the first's line
    quoted: int = 0
    first_quoted: int | None = None
    # rows of one field more than the header whose first is a number: R's write.table's row names, unnamed in its header
    row_names: int = 0

    @property
    def rows(self) -> int:
        """Readable rows: ``records``, or those a task took from them."""
        return self.taken if self.taken is not None else len(self.records)

    def where(self, n: int) -> str:
        """``file:12`` for a line of a text file, ``folder row 12`` for a saved dataset."""
        return f"{self.path}:{n}" if self.unit == "line" else f"{self.path} row {n}"

    def column(self, name: str, key: str) -> str:
        """``name`` as the table names it (:func:`column_name`: NFC) if the table has it; otherwise an error naming
        ``key`` (the setting) and the columns it has."""
        if column_name(name) not in self.columns:
            # a CR within a name: lines ending in CR alone, with an LF somewhere (a CR-only file is split on CR),
            # so the header ran on through the rows; shown as it was, the CR hid the rows behind the name
            cr = any("\r" in c for c in self.columns)
            # at most SHOWN names: pandas' default to_json made a column a row ("text.0" .. "text.99999"), a line of MBs
            shown = ", ".join(c.replace("\r", "\\r").replace("\t", "\\t") for c in self.columns[:SHOWN])
            if len(self.columns) > SHOWN:
                shown += f", ... ({len(self.columns):,} in all)"
            raise FinetuneError(f"{self.path}: no column {name!r} ({key}); its columns are: {shown or '(none)'}"
                                + ("; a column name holds a CR (\\r): the file's lines end in CR alone, as old Mac "
                                   "programs write, with an LF somewhere; convert them: tr '\\r' '\\n'" if cr else
                                   PANDAS_COLUMNS if _rows_as_columns(self.columns, name) else
                                   QUOTED_NAMES if f'"{column_name(name)}"' in self.columns else
                                   other_format(self.columns, name)))
        return column_name(name)

    def stats(self) -> dict:
        return {"path": self.path.name, "rows": self.rows, "bad_rows": len(self.bad),
                "bad_rows_by_reason": by_reason(self.bad),
                "bad_lines": [{self.unit: n, "reason": why} for n, why in self.bad[:SHOWN_BAD]],
                **({"blank_lines": self.blank} if self.blank is not None else {}),
                **({"multiline_rows": self.multiline, "continued_lines": self.continued} if self.multiline else {})}

    def quoting_note(self) -> str | None:
        """One line on a TSV file's rows whose fields are quoted as CSV writers quote them (None: none are)."""
        if not self.quoted:
            return None
        return (f"{self.path.name}: {self.quoted} row(s) hold a field quoted as CSV writers quote a text holding a \" "
                f"(\"a \"\"b\"\" c\"; the first on line {self.first_quoted}), as pandas' to_csv(sep='\\t') writes: "
                "TSV is read without quoting, so the quotes stay in the text (and a quoted tab or line break splits "
                "its row); --set format=quoted_tsv reads that quoting")

    def multiline_note(self) -> str | None:
        """One line on the rows read over several lines (None: there were none): a quote a text opens
        with and never closes runs the field on through the lines after it, merging rows unseen."""
        if not self.multiline:
            return None
        first, last = self.first_multiline
        return (f"{self.path.name}: {self.multiline} row(s) read over several lines ({self.continued} line(s) past "
                f"their first; the first row, lines {first}-{last}): a quoted field holding line breaks, or a \" "
                "opening a field and never closed; a file without CSV quoting reads as TSV: --set format=tsv")


SHOWN = 30  # column names an error lists
# pandas' DataFrame.to_json() default (orient="columns") writes one object of columns, each {row: value}: read as
# JSON Lines, one row whose columns are text.0, text.1, ... (nested objects are reached by dotted names)
PANDAS_COLUMNS = ("; the file is one object of columns, each an object of rows (pandas' DataFrame.to_json() "
                  "default, orient='columns'): write it as rows, df.to_json(PATH, orient='records', lines=True, "
                  "force_ascii=False)")

# every name of a TSV header in quotes (R's write.table with sep="\t", csv.QUOTE_ALL): "no column 'text'; its columns
# are: "text", "label"" said nothing of why, and a --text-column '"text"' would train on texts and labels in quotes
QUOTED_NAMES = ("; its names are in quotes, as a CSV writer quotes every field (R's write.table, Python's "
                "csv.QUOTE_ALL): TSV is read without quoting, so the quotes would stay in the texts and labels too; "
                "--set format=quoted_tsv reads that quoting")


def _rows_as_columns(columns: list[str], name: str) -> bool:
    """Whether ``name``'s rows are columns ``name.<row>``: pandas' default to_json, whose row labels are the frame's
    index (a split or a filtered frame starts past 0: ``text.50``, or a shuffled ``text.145``; not only ``text.0``)."""
    return any(c.startswith(f"{name}.") and c[len(name) + 1:].isdigit() for c in columns)


def other_format(columns: list[str], name: str) -> str:
    """Why a header of one column lacks ``name``, when it is another format's header (else ""): a CSV file
    named ``.txt`` (read as TSV), a TSV file named ``.csv``, JSON Lines named ``.txt``, a semicolon-separated
    CSV (Excel in locales whose decimal mark is a comma). The error had listed the whole line as one column."""
    if len(columns) != 1:
        return ""
    header = columns[0]
    if header.lstrip().startswith("{"):
        return "; the first line is a JSON object: JSON Lines, read with --set format=jsonl (or a .jsonl name)"
    for sep, what in ((",", "commas: a CSV file, read with --set format=csv (or a .csv name)"),
                      ("\t", "tabs: a TSV file, read with --set format=tsv (or a .tsv name)"),
                      (";", "semicolons, which no format here reads: save it comma-separated (CSV) or as TSV")):
        if name in (part.strip().strip('"') for part in header.split(sep)):
            return f"; the header line splits on {what}"
    return ""


def detect(path: Path, fmt: str = "auto") -> str:
    """The format to read ``path`` with: ``fmt`` itself, or for ``auto`` by folder / file extension."""
    if fmt != "auto":
        return fmt
    if path.is_dir():
        return "datasets"
    found = SUFFIXES.get(path.suffix.lower())
    if found is None and (what := container(path)):  # a .gz, .parquet or .xlsx: what it is, not "pass --set format"
        raise FinetuneError(what)
    if found is None:
        raise FinetuneError(f"{path}: cannot tell its format from the name; pass --set format=tsv, csv, jsonl or parquet")
    return found


def read_table(path: Path, fmt: str = "auto", read: Iterable[str] | None = None) -> Table:
    """The file's table, its records read whole (a list); ``read``: as for :func:`open_table`."""
    return _whole(open_table(path, fmt, read))


def _whole(table: Table) -> Table:
    table.records = list(table.records)
    table.complete = True
    return table


def read_tsv(path: Path) -> Table:
    return _whole(open_tsv(path))


def read_csv(path: Path) -> Table:
    return _whole(open_csv(path))


def read_jsonl(path: Path) -> Table:
    return _whole(open_jsonl(path))


def read_saved(path: Path) -> Table:
    return _whole(open_saved(path))


def read_parquet(path: Path) -> Table:
    return _whole(open_parquet(path))


def open_table(path: Path, fmt: str = "auto", read: Iterable[str] | None = None) -> Table:
    """The file's table with ``records`` an iterator: each record is read when asked for, so a reader
    that keeps only some of each row's values never holds the file's lines or records (docs/finetune.md,
    "Memory and large task files").  Its counts (``bad``, ``blank``) are final once it is exhausted;
    so is a JSONL file's ``columns`` (``complete``).  The header (or saved dataset) is read at once.
    ``read``: the columns the task reads (None: all), the only values of a JSONL row checked for a
    lone surrogate (:func:`finetune.readers.jsonl_rows.lone_surrogate`)."""
    path = Path(path)
    if not path.exists():
        raise FinetuneError(f"{path}: no such file or folder")
    kind = detect(path, fmt)
    readers = {"tsv": open_tsv, "csv": open_csv, "jsonl": open_jsonl, "datasets": open_saved, "parquet": open_parquet,
               "quoted_tsv": open_quoted_tsv}
    if kind not in readers:
        raise FinetuneError(f"format: must be one of {', '.join(FORMATS)}, got {kind!r}")
    if kind != "datasets" and path.is_dir():
        raise FinetuneError(f"{path}: a folder, but format={kind} reads a file")
    if kind == "datasets" and not path.is_dir():
        raise FinetuneError(f"{path}: a file, but format=datasets reads a folder written by save_to_disk")
    return open_jsonl(path, read) if kind == "jsonl" else readers[kind](path)


def _header(path: Path, fields: list[str]) -> list[str]:
    fields = [column_name(f.strip()) for f in fields]  # NFC: a header saved on macOS may be decomposed
    if fields:
        fields[0] = fields[0].lstrip("\ufeff")
    if not any(fields):
        raise FinetuneError(f"{path}:1: expected a header line naming the columns")
    while not fields[-1]:  # "a\tb\t": a trailing separator names no column (rows may carry it too)
        fields.pop()
    fields = [f or f"column_{i}" for i, f in enumerate(fields, start=1)]  # an unnamed column in between
    dup = sorted({f for f in fields if fields.count(f) > 1})
    if dup:
        raise FinetuneError(f"{path}:1: the header names {', '.join(map(repr, dup))} more than once")
    return fields


def _without_trailing_empties(fields: list[str], width: int) -> list[str]:
    """A row's empty fields past the header's columns (a trailing separator) are not columns."""
    while len(fields) > width and not fields[-1]:
        fields = fields[:-1]
    return fields


WRONG_COLUMNS, HEADER_AGAIN = "wrong_column_count", "repeated_header"  # their reason keys (bad_rows_by_reason)
REPEATED_HEADER = "repeats the header line (files joined with their headers, as `cat a.tsv b.tsv` does?)"


def repeats_header(fields: list[str], columns: list[str]) -> bool:
    """Whether a row is the header again: two files joined whole (KorNLI's SNLI and MNLI training files,
    each with its header) put the second header among the rows, where its label column's name read as
    one more class (``gold_label``, one row) or its score column's as a score that is no number."""
    if len(fields) != len(columns):
        return False
    names = [f.strip() for f in fields]
    first = names[0].lstrip("\ufeff")
    # a byte-order mark before a quoted first name (R's write.csv with fileEncoding="UTF-8-BOM", a QUOTE_ALL
    # writer): mid-file the csv module keeps the quotes after the mark, so the header was a row, its label a class
    firsts = {first} | ({first[1:-1].replace('""', '"')} if first != names[0] and len(first) > 1
                        and first[0] == first[-1] == '"' else set())
    # column_name: a header written in decomposed Hangul repeats the names _header composed
    return any(all(column_name(f) == c or (not f and c == f"column_{i}")
                   for i, (f, c) in enumerate(zip([f0, *names[1:]], columns), start=1)) for f0 in firsts)


def open_tsv(path: Path) -> Table:
    lines = iter_text_lines(path)
    header = next(lines, None)
    if header is None:
        raise FinetuneError(f"{path}: empty file (expected a header line naming the columns)")
    table = Table(path, _header(path, header.split("\t")), [], [], blank=0)
    table.records = _tsv_records(table, lines)
    return table


def _tsv_records(table: Table, lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    columns = table.columns
    for n, line in enumerate(lines, start=2):
        fields = _without_trailing_empties(line.split("\t"), len(columns))
        if not line.strip():  # no row (spaces or tabs alone too, as in JSONL): every task reads two columns at least
            table.blank += 1
        elif len(fields) != len(columns):
            table.row_names += row_name(fields, columns)
            table.bad.append((n, Reason(WRONG_COLUMNS, f"expected {len(columns)} tab-separated columns, got "
                                        f"{len(fields)}" + (QUOTED_SPLIT if '"' in line else ""))))
        elif repeats_header(fields, columns):
            table.bad.append((n, Reason(HEADER_AGAIN, REPEATED_HEADER)))
        else:
            if '""' in line and any(csv_quoted(f) for f in fields):
                table.quoted += 1
                table.first_quoted = table.first_quoted or n
            yield n, dict(zip(columns, fields))


def row_name(fields: list[str], columns: list[str]) -> bool:
    """Whether a row that does not fit the header has one field more, a number first: a row name."""
    return len(fields) == len(columns) + 1 and fields[0].strip().strip('"').isdigit()


QUOTED_SPLIT = (" (a quoted field holding a tab or line break, as pandas' to_csv(sep='\\t') writes? --set "
                "format=quoted_tsv reads CSV quoting)")


def csv_quoted(field: str) -> bool:
    """Whether a TSV field is a text quoted as a CSV writer quotes one holding a quote: wrapped in quotes, each
    quote inside doubled (``"a ""b"" c"``). A text that merely starts with a quote (KorSTS's, NSMC's) is not."""
    return len(field) > 3 and field[0] == field[-1] == '"' and '""' in field[1:-1] and \
        not field[1:-1].replace('""', "").count('"')


# The longest CSV field read (characters): the csv module's default, 131,072, refused a long document that
# TSV reads; a bound still, for a " never closed runs a field on to the end of the file.
FIELD_LIMIT = 1 << 24


def open_csv(path: Path, delimiter: str = ",") -> Table:
    table = Table(path, [], [], [], blank=0)
    records = _csv_records(table, delimiter)
    next(records)  # the header, read now: table.columns
    table.records = records
    return table


def open_quoted_tsv(path: Path) -> Table:
    """Tab-separated with CSV's quoting (pandas' ``to_csv(sep="\\t")``): a field in quotes may hold tabs, line
    breaks and doubled quotes; read as CSV is, its rows over several lines counted alike."""
    return open_csv(path, "\t")


def _csv_records(table: Table, delimiter: str = ",") -> Iterator[tuple[int, dict] | None]:
    """Yields None once the header is read (``table.columns``), then the records."""
    path, sep = table.path, "comma" if delimiter == "," else "tab"
    limit = csv.field_size_limit(FIELD_LIMIT)  # the module's is process-wide: put back when done
    try:
        # utf-8-sig: the byte-order mark goes before the parser sees it; left in front of a quoted first
        # name (Excel's and pandas' utf-8-sig files quote it: \ufeff"text") the quotes stayed in the name
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter=delimiter)
            columns = table.columns = _header(path, next(reader, []))
            yield None
            start = reader.line_num + 1
            for fields in reader:
                fields = _without_trailing_empties(fields, len(columns))
                if reader.line_num > start:  # counted, so the lines add up: a stray " merges rows unseen
                    table.multiline += 1
                    table.continued += reader.line_num - start
                    table.first_multiline = table.first_multiline or (start, reader.line_num)
                if not any(f.strip() for f in fields) and reader.line_num == start:  # an empty line, as in TSV
                    table.blank += 1
                elif len(fields) != len(columns):
                    table.row_names += row_name(fields, columns)
                    spans = f" (read over lines {start}-{reader.line_num}: a \" never closed?)" \
                        if reader.line_num > start else ""
                    table.bad.append((start, Reason(WRONG_COLUMNS, f"expected {len(columns)} {sep}-separated columns, "
                                                                   f"got {len(fields)}{spans}")))
                elif repeats_header(fields, columns):
                    table.bad.append((start, Reason(HEADER_AGAIN, REPEATED_HEADER.replace(".tsv", ".csv")
                                                    if sep == "comma" else REPEATED_HEADER)))
                else:
                    yield start, dict(zip(columns, fields))
                start = reader.line_num + 1
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    except csv.Error as e:
        if "field limit" in str(e):  # the line the reader reached says nothing: name where the row began
            why = (f"read up to line {reader.line_num}: a \" opening a field and never closed runs it on through "
                   "the lines after it; a file without CSV quoting reads as TSV: --set format=tsv"
                   if reader.line_num > start else "a TSV file has no such limit")
            raise FinetuneError(f"{path}:{start}: the row starting here has a field of more than "
                                f"{FIELD_LIMIT:,} characters ({why})") from None
        raise FinetuneError(f"{path}:{reader.line_num}: cannot read as CSV ({e})") from None
    finally:
        csv.field_size_limit(limit)


def open_jsonl(path: Path, read: Iterable[str] | None = None) -> Table:
    table = Table(path, [], [], [], blank=0, complete=False)
    table.records = jsonl_records(table, None if read is None else frozenset(read))
    return table


def open_saved(path: Path) -> Table:
    return Table(path, *saved_rows(path), [], unit="row")


def open_parquet(path: Path) -> Table:
    return Table(path, *parquet_rows(path), [], unit="row")


def check_bad(table: Table, max_bad_fraction: float, what: str = "rows") -> None:
    """Refuse the file when more than ``max_bad_fraction`` of its rows (``what``) are bad, naming the first five."""
    total = table.rows + len(table.bad)
    if table.bad and table.row_names == total:  # "none is readable: check the file's format and columns", but which?
        raise FinetuneError(f"{table.path}: every row has one field more than the header, a number first: row names, "
                            "as R's write.table writes them without a name in the header; write the file with "
                            "row.names=FALSE, or name that first column in the header line")
    if table.bad and len(table.bad) > max_bad_fraction * total:
        shown = shown_bad(table.bad[:5], table.unit)
        raise FinetuneError(f"{table.path}: {len(table.bad)} of {total} {what} are malformed "
                            f"({bad_limit(max_bad_fraction, len(table.bad), total)}): {shown}")
