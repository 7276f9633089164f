"""Reader for the NSMC TSV files (``id<TAB>document<TAB>label`` with a header line).

Feeds ``finetune.nsmc`` (last stage of the chain).  The format is plain TSV with no quoting,
so the reader splits on tab and newline only: a stray ``"`` in a review stays a character
(a CSV reader would merge rows up to the next quote), ``NA``/``null``/``nan`` stay text (pandas
would turn them into missing values), and other Unicode line separators (U+2028, \\x0b, \\x1c,
which ``str.splitlines`` would split on) stay inside the document.  Empty documents are kept
(a test set is scored on all its rows) and counted.  An empty line, or one of spaces and tabs alone
(an editor's trailing line), holds no row: skipped and counted (``blank_lines``), as the file tasks'
readers do, so ``lines`` = ``rows`` + ``bad_rows`` + ``blank_lines``.  A row with the wrong column count or a
label other than 0/1 is a *bad row*: counted with its line number and by reason (``bad_rows_by_reason``), and if more than
``max_bad_fraction`` of the rows are bad the file is rejected with the first offenders named.

The file is read a line at a time (:func:`finetune.files.iter_text_lines`): what is held is the
rows as columns (a list each of ids, reviews, labels and line numbers: no object a row) and the
counts, never the list of its lines beside them.  :attr:`NsmcFile.rows` gives them as
:class:`NsmcRow` objects for callers that want one a row.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from kolectra.finetune.files import FinetuneError, Reason, bad_limit, iter_text_lines

HEADER = ("id", "document", "label")
_SHOWN_BAD = 20  # line numbers listed in the stats / error message


@dataclasses.dataclass(frozen=True, slots=True)  # slots: no __dict__ a row
class NsmcRow:
    line: int  # 1-based line number in the file (the header is line 1)
    id: str
    document: str
    label: int


@dataclasses.dataclass
class NsmcFile:
    # the usable rows in file order: "id", "text" (the review), "label" (0/1), "line" (1-based, the header line 1),
    # a list each, in the order of the task's Arrow columns
    columns: dict[str, list]
    stats: dict

    @property
    def rows(self) -> list[NsmcRow]:
        """The rows as :class:`NsmcRow` objects (made on each call; the task reads :attr:`columns`)."""
        c = self.columns
        return [NsmcRow(line=n, id=i, document=t, label=y) for i, t, y, n in zip(c["id"], c["text"], c["label"], c["line"])]


def parse_fields(text: str) -> tuple[str, str, int] | str:
    """One data line -> (id, review, label), or the reason it is bad."""
    fields = text.split("\t")
    if len(fields) != 3:
        return Reason("wrong_column_count", f"expected 3 tab-separated columns, got {len(fields)}")
    rid, document, label = fields
    if label not in ("0", "1"):
        return Reason("label_not_0_or_1", f"label must be 0 or 1, got {label!r}")
    if not rid.strip():
        return Reason("empty_id", "empty id")
    return rid, document, int(label)


def parse_line(text: str, line: int) -> NsmcRow | str:
    """One data line -> a row, or the reason it is bad."""
    parsed = parse_fields(text)
    return parsed if isinstance(parsed, str) else NsmcRow(line, *parsed)


def read_nsmc(path: Path, max_bad_fraction: float = 0.001) -> NsmcFile:
    path = Path(path)
    lines = iter_text_lines(path)  # LF only: a stray CR or U+2028 inside a review stays in it
    header = next(lines, None)
    if header is None:
        raise FinetuneError(f"{path}: empty file (expected header 'id\\tdocument\\tlabel')")
    header = header.lstrip("\ufeff")
    if tuple(header.split("\t")) != HEADER:
        raise FinetuneError(f"{path}:1: expected header 'id\\tdocument\\tlabel', got {header[:80]!r}")

    columns: dict[str, list] = {"id": [], "text": [], "label": [], "line": []}
    add_id, add_text, add_label, add_line = (columns[k].append for k in ("id", "text", "label", "line"))
    bad: list[tuple[int, str]] = []
    reasons: Counter[str] = Counter()  # every bad row's reason key (bad keeps the first ones only)
    n_data = empty = positive = blank = 0
    ids: set[str] = set()
    for n_data, text in enumerate(lines, start=1):
        if not text.strip():  # no row: a malformed one (3 columns expected, got 1) refused a small file at 0.001
            blank += 1
            continue
        parsed = parse_fields(text)
        if isinstance(parsed, str):
            reasons[parsed.key] += 1
            if len(bad) <= _SHOWN_BAD:  # the count is n_data less the rows: the first offenders are all shown
                bad.append((n_data + 1, parsed))
            continue
        rid, document, label = parsed
        add_id(rid)
        add_text(document)
        add_label(label)
        add_line(n_data + 1)
        ids.add(rid)
        empty += not document.strip()
        positive += label
    n_rows = len(columns["line"])
    if n_data == blank:
        raise FinetuneError(f"{path}: a header and no rows (expected 'id\\tdocument\\tlabel' lines after it)")
    n_bad = n_data - blank - n_rows
    if n_bad and n_bad > max_bad_fraction * (n_data - blank):
        shown = "; ".join(f"line {ln}: {why}" for ln, why in bad[:5])
        raise FinetuneError(f"{path}: {n_bad} of {n_data - blank} rows are malformed "
                            f"({bad_limit(max_bad_fraction, n_bad, n_data - blank)}): {shown}")
    stats = {
        "lines": n_data,
        "rows": n_rows,
        "bad_rows": n_bad,
        "bad_rows_by_reason": dict(sorted(reasons.items())),  # bad_rows = their sum
        "bad_lines": [{"line": ln, "reason": why} for ln, why in bad[:_SHOWN_BAD]],
        "blank_lines": blank,
        "empty_documents": empty,
        "duplicate_ids": n_rows - len(ids),
        "labels": {"0": n_rows - positive, "1": positive},
    }
    return NsmcFile(columns=columns, stats=stats)

