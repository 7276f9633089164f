"""The rules every input format's records and rejects share: an id's one spelling (a JSON number's,
a Parquet number's), an error's one-line text in a reject's detail, and the mark of a kept field
repaired. Pure; ``corpus/reader.py`` (lines) and ``corpus/parquet_records.py`` (rows) both import
them, so neither imports the other.
"""

from __future__ import annotations

import math
import re

from kolectra.core import url_secrets

# a kept field (keep_fields) repaired: a lone surrogate or a NaN/infinity in it; counted only when
# keep_fields is set, so stats.json stays as it was without it
FIELD_REPAIRED = "kept_field"


def canonical_id(value) -> str | None:
    """The id a JSON number stands for, spelled one way: integers (and floats without a fraction,
    ``7.0``, ``7e0``) in decimal digits, other finite floats as Python's shortest repr (``1.5``).
    None for what cannot be an id: booleans, objects, arrays, NaN and infinities."""
    if isinstance(value, bool):
        return None  # a bool is an int to Python, but ``true`` names no document
    if isinstance(value, int):
        return str(value)  # parsing bounded it to int_max_str_digits, so this cannot fail
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    return None


def error_text(e: BaseException) -> str:
    """``Type: message`` on one line: Arrow's Thrift errors end in newlines and quote a byte raw
    (``don't know what type: \\x0f``), and the detail is printed in the run's error line."""
    text = re.sub(r"\s*[\r\n]+\s*", " ", f"{type(e).__name__}: {e}".strip())
    text = url_secrets.redacted(text)  # a store's error names the URL: not its signature (rejects are published)
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
