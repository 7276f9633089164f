"""A kept field's value as the corpus can hold it (``keep_fields``): the pure rules the reader
(``corpus/reader.py``; ``corpus/parquet_records.py`` for Parquet rows) applies to each value it keeps
beside a record's text, and counts as ``repaired`` when one changes a value."""

from __future__ import annotations

import math
import re

SURROGATE = re.compile("[\ud800-\udfff]")  # lone surrogates: valid in JSON, with no UTF-8 spelling


def kept_fields(obj: dict | None, names: tuple[str, ...]) -> tuple[tuple, bool]:
    """The values of ``names`` in a parsed line (None where absent or null, and for a text line,
    which has no fields), and whether any had to be repaired (:func:`scrub_field`)."""
    values, repaired = [], False
    for name in names:
        value, changed = scrub_field(obj.get(name) if obj is not None else None)
        values.append(value)
        repaired = repaired or changed
    return tuple(values), repaired


# What a kept field may hold: the corpus is read back by ``datasets``, which fails the whole corpus
# on one integer pandas' ujson or Arrow cannot hold ("Value is too big!"; the card declares a field
# of integers int64), and Python's own recursion would end a record nested a few hundred deep at
# whichever step meets it first (the stack depth differs by worker). So the rule is explicit: an
# integer outside int64, NaN or an infinity becomes null, and so does a whole value nested past
# MAX_FIELD_DEPTH arrays/objects (far above real records' nesting, far below the recursion limit).
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_FIELD_DEPTH = 64


class _TooDeep(Exception):
    pass


def scrub_field(value) -> tuple:
    """``(value, repaired)``: a kept field's value as the corpus can hold it. Lone surrogates become
    U+FFFD (no UTF-8 spelling exists for them); an integer outside int64, NaN or an infinity null
    (wherever it is inside the value); a value nested deeper than :data:`MAX_FIELD_DEPTH` null whole."""
    try:
        return _scrub(value, 0)
    except _TooDeep:
        return None, True


def _scrub(value, depth: int) -> tuple:
    if isinstance(value, str):
        return (value, False) if SURROGATE.search(value) is None else (SURROGATE.sub("\ufffd", value), True)
    if isinstance(value, bool):  # an int to Python, a boolean to JSON
        return value, False
    if isinstance(value, int):
        return (value, False) if INT64_MIN <= value <= INT64_MAX else (None, True)
    if isinstance(value, float) and not math.isfinite(value):
        return None, True
    if isinstance(value, (list, dict)) and depth >= MAX_FIELD_DEPTH:
        raise _TooDeep
    if isinstance(value, list):
        items = [_scrub(v, depth + 1) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    if isinstance(value, dict):
        items = [(_scrub(k, depth + 1), _scrub(v, depth + 1)) for k, v in value.items()]
        return {k: v for (k, _), (v, _) in items}, any(ck or cv for (_, ck), (_, cv) in items)
    return value, False
