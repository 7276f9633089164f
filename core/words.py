"""Counts in the lines a user reads: ``1 step``, ``2 steps``, ``0 steps`` (:func:`counted`); the reasons that
counted, most first (:func:`reasons`)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, singular for exactly one: ``counted(1, "step")`` is ``1 step`` (it said ``1 steps``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def reasons(counts: object) -> str:
    """`` (invalid_json 2, not_an_object 1)``: the reasons of ``counts`` (reason -> count) that counted, most first,
    then by name; '' where none did (a dict of every reason, zeros too, was printed). What is not a whole number (a
    manifest from elsewhere holds any JSON there) is left out: ``artifacts show`` ended in an internal error on it."""
    counts = counts if isinstance(counts, dict) else {}
    counted = sorted(((k, n) for k, n in counts.items() if isinstance(n, int) and n), key=lambda kv: (-kv[1], kv[0]))
    said = ", ".join(f"{k} {n:,}" for k, n in counted)
    return f" ({said})" if said else ""
