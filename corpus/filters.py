"""Document filters of the corpus stage: pure functions on the normalised text that return the
reason a document is dropped, or ``None`` to keep it.

The reason string is the counter name in ``stats.json``'s ``dropped`` map, so every filter is
visible in the artifact. :func:`first_failure` runs them in a fixed order and reports the first
one that fires; cheap length checks go first. Exact duplicates are dropped later by the
pipeline's dedup step under the reason ``duplicate``.
"""

from __future__ import annotations

from typing import Callable

from corpus.config import CorpusConfig

Filter = Callable[[str, CorpusConfig], "str | None"]


def empty(text: str, cfg: CorpusConfig) -> str | None:
    return "empty" if not text else None


def too_short(text: str, cfg: CorpusConfig) -> str | None:
    return "too_short" if len(text) < cfg.min_chars else None


def too_long(text: str, cfg: CorpusConfig) -> str | None:
    # Very long "documents" are usually concatenation accidents (a whole dump on one line) and
    # make Kiwi's per-document work unbounded.
    return "too_long" if len(text) > cfg.max_chars else None


FILTERS: tuple[Filter, ...] = (empty, too_short, too_long)
DROP_REASONS: tuple[str, ...] = ("empty", "too_short", "too_long", "duplicate")


def first_failure(text: str, cfg: CorpusConfig, filters: tuple[Filter, ...] = FILTERS) -> str | None:
    for f in filters:
        reason = f(text, cfg)
        if reason is not None:
            return reason
    return None
