"""Rows of the training file that reappear in the scored file: counted and warned about.

Training on the scored file itself is refused (``train_on_eval``), but only a byte-identical file
was caught: the same rows reordered, or a copy saved with CRLF line ends, passed silently and
the score measured memorisation. Rows are compared on their text columns after NFC and with
every run of whitespace (CR and LF included) made one space, so such copies match; labels and
ids are left out (a copied review under another id is still the same review). Empty texts never
count as overlap.

A row's key is a 16-byte hash of those normalised texts, not the texts: the carve and the check
hold one key per row of the whole file (a tuple of the normalised texts was a second copy of the
file, about 500 bytes a KorNLI-sized pair against 49; docs/finetune.md, "Memory and large task files").
"""

from __future__ import annotations

import hashlib
import unicodedata

TEXT_COLUMNS = ("text", "text_pair", "tokens", "question", "context")  # what the tasks' readers produce


def _normalise(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_normalise(v) for v in value)
    return " ".join(unicodedata.normalize("NFC", "" if value is None else str(value)).split())


def text_key(row: dict) -> bytes | None:
    """A row's normalised text columns as a 128-bit blake2b hash (None for a row without text): the
    unit a dev split is carved by.  Joined by a tab, which no normalised text holds, so two rows have
    one key exactly when their normalised columns are equal (up to hash collisions, negligible)."""
    key = [_normalise(row[c]) for c in TEXT_COLUMNS if c in row]
    if not any(key):
        return None
    return hashlib.blake2b("\t".join(key).encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _keys(ds) -> list[bytes | None]:
    """Every row's :func:`text_key`."""
    cols = [c for c in TEXT_COLUMNS if c in ds.column_names]
    return [text_key(dict(zip(cols, row))) for row in zip(*(ds[c] for c in cols))] if cols else []


class Keys:
    """Each dataset's row keys, computed once: a run's overlap checks (test against train+dev, dev
    against train) ask for the training rows' keys more than once, and normalising them is the
    check's cost (about 18 us a pair row)."""

    def __init__(self):
        self._done: dict[int, tuple[object, list]] = {}  # id -> (the dataset, kept so the id stays its own; keys)

    def __call__(self, ds) -> list[bytes | None]:
        if id(ds) not in self._done:
            self._done[id(ds)] = (ds, _keys(ds))
        return self._done[id(ds)][1]


def overlap(seen_in: list, scored, keys=_keys) -> tuple[int, int]:
    """(scored rows whose normalised text is also a row of one of ``seen_in``'s, scored rows).

    ``keys``: a dataset -> its rows' keys (a :class:`Keys` to compute each dataset's once)."""
    seen = {k for ds in seen_in for k in keys(ds) if k}
    scored_keys = keys(scored)
    return sum(1 for k in scored_keys if k and k in seen), len(scored_keys)
