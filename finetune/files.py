"""The fine-tuning stage's files: the error for bad inputs, deterministic JSON writers, file identity.

Torch-free, so the readers (:mod:`kolectra.finetune.readers`) and the report code import it
without pulling in the training runtime.  :class:`FinetuneError` is a user-input error: the CLI
prints it as one line (``kolectra finetune: error: <file>:<line>: ...``).
"""

from __future__ import annotations

import codecs
import hashlib
import json
import math
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

from kolectra.core import filehash, storage
from kolectra.core.errors import UserInputError


class FinetuneError(UserInputError):
    """Bad input to the fine-tuning stage; the message names the file (and line or JSON path)."""


class Reason(str):
    """Why a row (or sentence) is bad: the message itself (a ``str``, shown as it always was) and ``key``, a
    stable snake_case name of the kind of fault, counted by kind in ``metrics.json`` (``bad_rows_by_reason``),
    so that a file's rows add up by reason: rows in = rows used + the reasons' counts."""

    key: str

    def __new__(cls, key: str, message: str) -> "Reason":
        made = super().__new__(cls, message)
        made.key = key
        return made


def reason_key(why: str) -> str:
    """A bad row's reason key (``other``: a message no reader named)."""
    return getattr(why, "key", "other")


def by_reason(bad: Iterable[tuple[int, str]]) -> dict[str, int]:
    """How many of ``bad`` ((line, why) pairs) each reason key counts, by key (sorted: the same bad rows give the
    same dict, as ``metrics.json``, written with sorted keys, holds it)."""
    return dict(sorted(Counter(reason_key(why) for _, why in bad).items()))


def shown_bad(bad: list[tuple[int, str]], unit: str) -> str:
    """``line 3: why; lines 7, 11: why2``: offenders of one reason named once with their lines, in order of the first
    line of each. A file whose every row is bad alike (pandas' quoted TSV, a BIOES file) had its long reason five
    times over in one line, the lines between hard to find."""
    reasons: dict[str, list[int]] = {}
    for n, why in bad:
        reasons.setdefault(why, []).append(n)
    return "; ".join(f"{unit}{'s' if len(ns) > 1 else ''} {', '.join(map(str, ns))}: {why}" for why, ns in reasons.items())


# Where metrics.json keeps a data file's reader counts (``rows``, ``bad_rows``, ``bad_rows_by_reason``, ``bad_lines``):
# the file tasks' and nsmc's train, dev and test files, the probe's eval file
COUNTED_FILES = ("train_file", "dev_file", "test_file", "eval_file")
SHOWN_REASONS = SHOWN_LINES = 3  # in the bad-rows line: the commonest reasons, the first bad lines
BAD_UNITS = {"ner": "sentence(s)"}  # what a task's bad row is called (else "row(s)")


def bad_rows_line(stats: dict, key: str, name: str | None = None, what: str = "row(s)") -> str | None:
    """One line on a data file's bad rows left out within ``max_bad_fraction``, from its counts (``stats``: a reader's,
    as ``metrics.json`` keeps them under ``key``, or read back from it); None when it has none::

        test.tsv: 7 bad row(s) left out (empty_label 4, wrong_column_count 2, repeated_header 1; lines 2, 5:
        empty label; line 9: ...; 4 more; test_file.bad_rows_by_reason, .bad_lines in metrics.json)

    the three commonest reasons with their counts (ties by key), then the first three bad lines (rows of a saved
    dataset) with their reasons. ``name``: the file's (else ``stats["path"]``, else ``key``). The nsmc task and the
    file tasks had each their own wording (nsmc: every reason and the first line; the file tasks: these)."""
    n_bad = stats.get("bad_rows") or 0
    if not n_bad:
        return None
    kinds = sorted((stats.get("bad_rows_by_reason") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    top = ", ".join(f"{k} {n}" for k, n in kinds[:SHOWN_REASONS])
    if len(kinds) > SHOWN_REASONS:
        top += f", {len(kinds) - SHOWN_REASONS} more kind{'s' if len(kinds) > SHOWN_REASONS + 1 else ''}"
    first = stats.get("bad_lines") or []
    unit = "row" if first and "row" in first[0] else "line"
    shown = [(b.get(unit), b.get("reason")) for b in first[:SHOWN_LINES]]
    more = f"{n_bad - len(shown)} more" if n_bad > len(shown) else ""
    said = "; ".join(part for part in (top, shown_bad(shown, unit), more) if part)
    return (f"{name or stats.get('path') or key}: {n_bad} bad {what} left out ({said}; "
            f"{key}.bad_rows_by_reason, .bad_lines in metrics.json)")


def bad_rows_lines(task: str, metrics: dict) -> list[str]:
    """``task: line`` (:func:`bad_rows_line`) for each data file ``metrics`` (a task's facts, or ``metrics.json``)
    counts bad rows of, in the order of :data:`COUNTED_FILES`."""
    what = BAD_UNITS.get(task, "row(s)")
    return [f"{task}: {line}" for key in COUNTED_FILES
            if isinstance(stats := metrics.get(key), dict) and (line := bad_rows_line(stats, key, what=what))]


def say_bad(task: str, stats: dict, key: str, name: str | None = None) -> list[str]:
    """:func:`bad_rows_line` as a warning, shown under ``-q`` too (as a KorQuAD question left out of training is):
    the file's figures are over fewer rows than it holds. Before 2026-12-02 a progress line, which ``-q`` hid.
    Returns the line said (none: ``[]``) for the eval's ``stats.warnings``, which ``kolectra run``'s summary,
    ``kolectra report`` and ``artifacts show`` list: before 2026-12-02 it was said on stderr alone."""
    from kolectra.core.stage import warn  # noqa: PLC0415

    if line := bad_rows_line(stats, key, name, BAD_UNITS.get(task, "row(s)")):
        warn(f"{task}: {line}")
        return [f"{task}: {line}"]
    return []


def say_bad_files(task: str, metrics: dict) -> list[str]:
    """:func:`say_bad` for each data file ``metrics`` (a task's facts) counts; the lines said."""
    from kolectra.core.stage import warn  # noqa: PLC0415

    lines = bad_rows_lines(task, metrics)
    for line in lines:
        warn(line)
    return lines


def scored_file_losses(metrics: dict) -> str:
    """``test file: 7 bad rows left out``: the bad rows the scored file lost (``test_file``; a probe's ``eval_file``),
    which ``kolectra report`` notes beside the score (a score on a file short of 7% of its rows is not comparable
    with a published one); "" when it lost none or its counts are not recorded (KorQuAD's dev file counts none)."""
    for key in ("test_file", "eval_file"):
        stats = metrics.get(key)
        n = stats.get("bad_rows") if isinstance(stats, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            unit = "sentence" if metrics.get("task") == "ner" else "row"
            return f"{key.replace('_', ' ')}: {n:,} bad {unit}{'s' if n != 1 else ''} left out"
    return ""


URL_FILE = ("is a URL, and a task's data files are read from this machine's disk (the store root may be a "
            "bucket, its inputs not): copy the file here first")


def folded_url(path: str | Path) -> bool:
    """Whether ``path`` is a URL made a Path: argparse's ``type=Path`` folds ``s3://b/k`` into ``s3:/b/k``."""
    return re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", str(path)) is not None


def as_given(path: str | Path) -> str:
    """``path`` as the user typed it: a store URL that ``type=Path`` folded (``s3:/b/k``) with its ``//`` back."""
    return storage.one_slash_url(path) or str(path)


def data_file_problem(path: Path, folder_ok: bool = False) -> str | None:
    """Why ``path`` cannot be a task's data file, worded to follow "data file" (None: it can): a
    FIFO or device would block the reader or never end; a folder is data only where a saved
    dataset is accepted."""
    path = Path(path)
    if path.is_file() or (folder_ok and path.is_dir()):
        return None
    if path.is_dir():
        return "is a folder, not a file"
    if path.exists():
        return "is not a regular file (a pipe, socket or device: reading it could block or never end)"
    if folded_url(path):  # "not found" misled: as if the object were missing
        return URL_FILE
    if not str(path).isascii() and codecs.lookup(sys.getfilesystemencoding()).name != "utf-8":
        # a non-UTF-8 locale with Python's UTF-8 mode off: the argument is decoded by the C library and the
        # file system's names by Python's codec, which disagree on a UTF-8 name (다른이름.tsv under EUC-KR)
        return (f"not found; Python reads file names and arguments as {sys.getfilesystemencoding()} here (the "
                "locale), which can misspell a UTF-8 name: run with PYTHONUTF8=1 or a UTF-8 locale (C.UTF-8)")
    return "not found"


def column_name(name: str) -> str:
    """A column's name as the file tasks compare names: NFC, as their labels and tags. A header saved on macOS may
    spell ``문장`` in decomposed Hangul (NFD): "no column '문장'; its columns are: 문장, ..." had refused it."""
    return name if name.isascii() else unicodedata.normalize("NFC", name)


def finite(obj):
    """``obj`` with every NaN or infinite float as None: strict JSON, which any reader parses
    (Python's ``json`` would write ``NaN``, which most others refuse)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def write_json(path: Path, obj, ascii_only: bool = False) -> None:
    """Sorted keys, UTF-8, trailing newline: the same result gives the same bytes. ``ascii_only``:
    every other character as a ``\\uXXXX`` escape, for a file another program opens in its locale's
    encoding (the official KorQuAD script opens its prediction file so)."""
    Path(path).write_text(json.dumps(finite(obj), ensure_ascii=ascii_only, indent=2, sort_keys=True,
                                     allow_nan=False) + "\n", encoding="utf-8")


def write_jsonl(path: Path, records: Iterable[dict]) -> None:
    """One JSON object per line, keys in the order given (e.g. predictions for error analysis)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for r in records:
            f.write(json.dumps(finite(r), ensure_ascii=False, allow_nan=False) + "\n")


def sha256(path: Path) -> str:
    """A file's sha256, read once per process while the file is unchanged (:mod:`kolectra.core.filehash`:
    the tokenizer files the store's check of the checkpoint already hashed are not read again)."""
    return filehash.sha256(path)


def same_content(a: Path, b: Path) -> bool:
    """The same file, or two files (or saved-dataset folders) with the same bytes (a copy of the evaluation file)."""
    a, b = Path(a), Path(b)
    if a.resolve() == b.resolve():
        return True
    if a.is_dir() or b.is_dir():  # saved datasets: the same files with the same bytes
        return a.is_dir() and b.is_dir() and tree_hash(a) == tree_hash(b)
    return a.stat().st_size == b.stat().st_size and sha256(a) == sha256(b)


def tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(folder).as_posix()}\0{sha256(f)}\n".encode())
    return h.hexdigest()


def text_lines(path: Path) -> list[str]:
    """The file's lines, split on LF only (a CR before it dropped); other separators stay in the text.
    A file with no LF at all and a CR is split on CR (old Mac line ends), its lines numbered as an editor shows them.

    A byte-order mark opening the file (Windows editors write one) is dropped: left in, it would be
    part of the first JSON line (invalid) or of the first CoNLL token."""
    return list(iter_text_lines(path))


def iter_text_lines(path: Path) -> Iterator[str]:
    """:func:`text_lines` one at a time, read as they are asked for: a reader that keeps only what it
    needs of each line holds no list of the file's lines (docs/finetune.md, "Memory and large task files")."""
    try:
        # a file that is not UTF-8 is refused before its first line, as when read whole
        end = "\r" if _decode_all(path) == "cr" else "\n"
        with open(path, encoding="utf-8", newline=end) as f:
            first = True
            for line in f:
                if line.endswith(end):
                    line = line[:-1]
                if first:
                    line, first = line.removeprefix("\ufeff"), False
                yield line[:-1] if line.endswith("\r") else line
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    except OSError as e:
        raise FinetuneError(f"{path}: cannot read ({e})") from None


def _decode_all(path: Path) -> str:
    """Decode the file in 64 KiB blocks, keeping nothing: UnicodeDecodeError if it is not UTF-8.

    Returns its line ends: ``"cr"`` for a file with a CR and no LF at all (classic Mac OS, and Excel for
    Mac's "CSV (Macintosh)" / tab-delimited text, end lines with CR alone), else ``"lf"``. Read by LF such
    a file was one line: its header ran on through every row ("no column 'label'; its columns are: text,
    label\r가..."). A CR inside an LF file stays text, as it always did."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    cr = lf = False
    with open(path, "rb") as f:
        while block := f.read(1 << 16):
            decoder.decode(block)
            cr, lf = cr or b"\r" in block, lf or b"\n" in block
    decoder.decode(b"", final=True)
    return "cr" if cr and not lf else "lf"


PARQUET_HINT = "read it as Parquet: name it .parquet, or pass --set format=parquet"
# Files that are not text at all, by their first bytes: what they are, and how to get a UTF-8 text file from them.
# "not UTF-8 ... iconv -f <its encoding>" sent the user to look for a text encoding a gzip file or a workbook has not
CONTAINERS = (
    (b"\x1f\x8b", "gzip-compressed", "decompress it first: gunzip -k {path}"),
    (b"BZh9", "bzip2-compressed", "decompress it first: bunzip2 -k {path}"),  # bzip2's default block size
    (b"\xfd7zXZ\x00", "xz-compressed", "decompress it first: unxz -k {path}"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "decompress it first: unzstd {path}"),
    (b"PAR1", "a Parquet file", PARQUET_HINT),
    (b"PK\x03\x04", "a zip archive (an Excel .xlsx workbook is one)",
     "unzip it, or save the sheet from Excel as 'CSV UTF-8 (Comma delimited) (*.csv)'"),
    (b"\xd0\xcf\x11\xe0", "an Excel 97-2003 (.xls) workbook",
     "save the sheet from Excel as 'CSV UTF-8 (Comma delimited) (*.csv)'"),
)


def container(path: Path, head: bytes | None = None) -> str | None:
    """What a file that opens with ``head`` (None: its first bytes, read here) is and how to get text from it,
    when it is no text file (else None)."""
    if head is None:
        try:
            with open(path, "rb") as f:
                head = f.read(8)
        except OSError:
            return None
    for magic, what, fix in CONTAINERS:
        if head.startswith(magic):
            return f"{path}: {what}, not a text file; " + fix.format(path=path, folder=path.with_suffix(""))
    return None


def utf16(head: bytes) -> str | None:
    """``utf-16`` (or its byte order) when ``head`` looks like UTF-16: a byte-order mark FF FE / FE FF (Excel's
    "Unicode Text" and Notepad's "Unicode" save so), or every other byte NUL (the mark left off); else None."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    # UTF-8 and cp949 text hold no NUL byte; UTF-16 has one in the high byte of every ASCII character (a
    # space, tab, digit or line end: a share of Korean text too, whose syllables have none)
    head = head[:4096]
    even, odd = head[::2].count(0), head[1::2].count(0)
    if len(head) >= 8 and max(even, odd) >= 0.05 * len(head) / 2 and min(even, odd) * 4 <= max(even, odd):
        return "utf-16le" if odd > even else "utf-16be"
    return None


def not_utf8(path: Path) -> FinetuneError:
    """The error for a data file that is not UTF-8: the line and byte offset of the first bad
    sequence, and the command that converts it. A Korean file saved on Windows is usually cp949 (a
    superset of EUC-KR): when the bytes read as cp949 the hint names it; UTF-16 (Excel's "Unicode
    Text") is named by its byte-order mark or its NUL bytes. A compressed file, a Parquet file or a
    workbook is named as what it is, with what to do (:data:`CONTAINERS`).

    Read a block at a time, keeping nothing: the file's bytes and its cp949 text had been held whole
    for the message (a 144 MB cp949 file: 316 MB, a few GB's file an out-of-memory kill, not a line)."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(4096)
    if found := container(path, head[:8]):
        return FinetuneError(found)
    bad = _first_bad_utf8(path)
    if bad is None:
        return FinetuneError(f"{path}: not UTF-8")  # the file changed since the reader refused it
    start, byte, reason, lf, cr = bad
    line = (lf if lf or not cr else cr) + 1  # CR-only (old Mac): lines end in CR
    where = f"{path}:{line}: not UTF-8 ({reason}: byte 0x{byte:02x} at offset {start})"
    said = ""
    if encoding := utf16(head):
        said = ("it is UTF-16 (Excel's 'Unicode Text' and Notepad's 'Unicode' save so): " if encoding == "utf-16"
                else f"it reads as UTF-16 without a byte-order mark ({encoding}; NUL bytes beside its ASCII): ")
    elif _decodes(path, "cp949"):
        encoding, said = "cp949", "it reads as cp949 (EUC-KR, as Windows saves Korean text): "
    else:
        encoding = "<its encoding>"
    fix = f"iconv -f {encoding} -t utf-8 {path} > {path.with_name(path.stem + '.utf8' + path.suffix)}"
    return FinetuneError(f"{where}; {said}convert it with: {fix}")


def _first_bad_utf8(path: Path) -> tuple[int, int, str, int, int] | None:
    """(offset, byte, reason, LFs before it, CRs before it when the file has no LF) of the first sequence that
    is not UTF-8, else None; the LF count is 0 only for a file with no LF at all (its lines are counted by CR)."""
    decoder, offset, lf, cr = codecs.getincrementaldecoder("utf-8")(), 0, 0, 0
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 16)
            pending = decoder.getstate()[0]
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as e:
                data = pending + block
                start = offset - len(pending) + e.start
                lf += data.count(b"\n", 0, e.start)
                cr += data.count(b"\r", 0, e.start)
                if not lf:  # none before it: whether the file has one at all decides how its lines end
                    lf_after = b"\n" in data[e.start:] or any(b"\n" in rest for rest in iter(lambda: f.read(1 << 16), b""))
                    return start, data[e.start], e.reason, 0, 0 if lf_after or not cr else cr
                return start, data[e.start], e.reason, lf, cr
            if not block:
                return None
            lf, cr, offset = lf + block.count(b"\n"), cr + block.count(b"\r"), offset + len(block)


def _decodes(path: Path, encoding: str) -> bool:
    """Whether the whole file decodes as ``encoding``, read a block at a time."""
    decoder = codecs.getincrementaldecoder(encoding)()
    try:
        with open(path, "rb") as f:
            while block := f.read(1 << 16):
                decoder.decode(block)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def bad_limit(max_bad_fraction: float, bad: int, total: int) -> str:
    """The limit a file's malformed rows passed, and the setting that would let them through."""
    if bad == total:  # raising the limit cannot help: the format or the columns are wrong
        return f"limit max_bad_fraction={max_bad_fraction:g}; none is readable: check the file's format and columns"
    return (f"limit max_bad_fraction={max_bad_fraction:g}; to go on with the {total - bad} good ones, "
            f"raise it with --set max_bad_fraction={_ceil_fraction(bad, total)}")


def _ceil_fraction(bad: int, total: int) -> str:
    """The least two-significant-digit fraction that lets ``bad`` of ``total`` rows through the
    readers' test (``bad > fraction * total`` refuses), as it would be typed after ``--set``."""
    step = 10.0 ** (math.floor(math.log10(bad / total)) - 1)
    n = math.ceil(bad / total / step)
    while bad > float(f"{n * step:.2g}") * total:
        n += 1
    return f"{min(n * step, 1.0):.2g}"
