"""Rows of the training file that reappear in the scored file: counted and warned about.

Training on the scored file itself is refused (``train_on_eval``), but only a byte-identical file
was caught: the same rows reordered, or a copy saved with CRLF line ends, passed silently and
the score measured memorisation. Rows are compared on their text columns after NFC and with
every run of whitespace (CR and LF included) made one space, so such copies match; labels and
ids are left out (a copied review under another id is still the same review). Empty texts never
count as overlap.
"""

from __future__ import annotations

import unicodedata

TEXT_COLUMNS = ("text", "text_pair", "tokens", "question", "context")  # what the tasks' readers produce


def _normalise(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_normalise(v) for v in value)
    return " ".join(unicodedata.normalize("NFC", "" if value is None else str(value)).split())


def text_key(row: dict) -> tuple[str, ...] | None:
    """A row's normalised text columns (None for a row without text): the unit a dev split is carved by."""
    key = tuple(_normalise(row[c]) for c in TEXT_COLUMNS if c in row)
    return key if any(key) else None


def _keys(ds) -> list[tuple[str, ...] | None]:
    """Every row's :func:`text_key`."""
    cols = [c for c in TEXT_COLUMNS if c in ds.column_names]
    return [text_key(dict(zip(cols, row))) for row in zip(*(ds[c] for c in cols))] if cols else []


def overlap(seen_in: list, scored) -> tuple[int, int]:
    """(scored rows whose normalised text is also a row of one of ``seen_in``'s, scored rows)."""
    seen = {k for ds in seen_in for k in _keys(ds) if k}
    keys = _keys(scored)
    return sum(1 for k in keys if k and k in seen), len(keys)
