"""Text that came from data shown on a terminal: a manifest's names and values, the names of a root's
directories or a bucket's objects. A root from elsewhere (a shared bucket, a copy, a download) may put
terminal escape sequences there (``ESC ] 0 ;`` retitles the window, ``ESC [ 2 J`` clears the screen,
``ESC ] 52`` writes the clipboard in some terminals), a carriage return that overwrites what the line
said, or a right-to-left override that shows a name backwards. :func:`shown` writes each such
character as its Python escape (``\\x1b``), as ``ls`` and ``git`` quote such names."""

from __future__ import annotations

import re

# C0 and C1 controls (the line break aside, where ``lines``) and DEL; the bidirectional embeddings,
# overrides and isolates (Cf, which Korean text does not need)
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# what json.dumps leaves as it is of those (it escapes C0 in strings; the line breaks between items stay)
_NOT_JSON_ESCAPED = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: str, lines: bool = False) -> str:
    """``text`` with every control character escaped (the tab kept; with ``lines``, line breaks too)."""
    pattern = _CONTROL_BUT_LINES if lines else _CONTROL
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def first_few(parts: list[str], most: int = 5, sep: str = "; ") -> str:
    """The first ``most`` of ``parts`` joined by ``sep``, the others counted (``; and 995 more``): a line that
    named every one of 1,000 files (a bucket rewritten during a job) buried what it said of each."""
    more = f"{sep}and {len(parts) - most} more" if len(parts) > most else ""
    return sep.join(parts[:most]) + more


def shown_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``, which escapes only C0 controls) with the
    other characters :func:`shown` escapes written as JSON ``\\uXXXX`` escapes: the same JSON value,
    nothing a terminal acts on. They can stand only inside strings, where such an escape is valid."""
    return _NOT_JSON_ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
