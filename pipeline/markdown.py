"""Strings someone chose (folder and file names, artifact names, task labels, hosts, corpus text)
made safe to put into the Markdown reports (:mod:`pipeline.report`, :mod:`pipeline.study.report`).

A name with ``|`` would split a table cell and move every score after it under another task's
column; a newline ends the table row; a backtick ends an inline code span, three of them the
lineage's code block; ``<script>`` is raw HTML to a Markdown renderer. So:

- :func:`text` - shown as itself in prose or a table cell: one line, HTML characters as entities,
  the punctuation that makes Markdown structure (``\\ ` * [ ] |``) backslash-escaped;
- :func:`code` - inline code whose fence is longer than any backtick run inside it (``in_table``:
  ``|`` escaped too, which GitHub's tables split on even inside code);
- :func:`fenced` - a code block whose fence no line inside can close.

What is already Markdown (a bold label, a cell built from :func:`code`) is a :class:`Md`, which
:func:`table` leaves as it is; every other string cell goes through :func:`text`.
"""

from __future__ import annotations

import html
import re

_LINE_BREAKS = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")
_PUNCT = re.compile(r"([\\`*\[\]|])")
_TICKS = re.compile(r"`+")


class Md(str):
    """A string that is Markdown already (not to be escaped again)."""


def one_line(value) -> str:
    return _LINE_BREAKS.sub(" ", str(value))


def text(value) -> Md:
    """``value`` as literal text on one line, in prose or a table cell."""
    return Md(_PUNCT.sub(r"\\\1", html.escape(one_line(value), quote=False)))


def code(value, in_table: bool = False) -> Md:
    """``value`` as inline code, whatever backticks it holds (CommonMark: a longer fence)."""
    s = one_line(value)
    fence = "`" * (max((len(t) for t in _TICKS.findall(s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" ") and s.strip()) else ""
    if in_table:
        s = s.replace("|", "\\|")
    return Md(f"{fence}{pad}{s}{pad}{fence}")


def fenced(lines: list[str]) -> list[str]:
    """``lines`` as a code block (each kept on one line): a backtick fence longer than any run of
    backticks inside, so no line can close it."""
    lines = [one_line(line) for line in lines]
    run = max((len(t) for line in lines for t in _TICKS.findall(line)), default=0)
    fence = "`" * max(3, run + 1)
    return [fence, *lines, fence]


def table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table; string cells (and headers) are escaped unless they are :class:`Md`."""
    def cell(v) -> str:
        if isinstance(v, bool):
            return str(v)
        if isinstance(v, float):  # a learning rate of 2e-05 is no 0.0000: under 0.001, significant digits
            return f"{v:.3e}" if 0 < abs(v) < 1e-3 else f"{v:,.4f}" if abs(v) < 100 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return v if isinstance(v, Md) else text(v)

    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out
