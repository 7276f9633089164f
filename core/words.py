"""Counts in the lines a user reads: ``1 step``, ``2 steps``, ``0 steps`` (:func:`counted`)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, singular for exactly one: ``counted(1, "step")`` is ``1 step`` (it said ``1 steps``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
