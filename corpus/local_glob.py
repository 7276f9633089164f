"""Which local names a corpus ``--input`` glob matches: the same regular expression Beam's
``FileSystem.translate_pattern`` makes of it, so that listing the inputs imports no Beam.

The listing imported ``apache_beam.io.filesystem`` for that one function: 1.8-2.2 CPU s and 196 MB
peak RSS by itself, most of the 2.4-2.6 CPU s and 211 MB of a ``kolectra corpus`` run again over a
published corpus (the "reused" answer, now 0.5-0.7 s and 51 MB; docs/benchmarks.md). Which files a
glob names decides the request id and what docs/corpus.md says, so the behaviour is Beam's, quirks
included; tests/test_local_glob.py holds the output equal to Beam's own on every pattern of up to
four characters of an awkward alphabet and the listing to ``FileSystems.match`` on a folder of
awkward names. The rules (read off Beam's documented behaviour and those tests):

- ``**`` is ``.*`` (any characters, ``/`` included); ``*`` is ``[^/\\\\]*`` (none of ``/`` or ``\\``);
  ``***`` is ``**`` then ``*``.
- ``?`` is ``.``: any one character, ``/`` included (Beam's, unlike ``fnmatch`` and the shell).
- ``[...]`` is a class: ``[!a]`` is ``[^a]``, a ``]`` first (after a ``!``) is a member (``[]]``,
  ``[!]]``), a ``^`` first is a member, a backslash is a member (there is no way to quote a
  character); a ``[`` without its ``]`` is a literal ``[``.
- Anything else is itself (``re.escape``); the whole name must match (``\\Z``, dot-all).
"""

from __future__ import annotations

import re

# one piece of a glob at a time: "**", "*", "?", a whole bracket class, or any one character. The
# possessive "!?+" and "\]?+" keep a leading "!" and "]" in the class for good: "[]" and "[!]" find no
# closing bracket after them and fall to the last branch (a literal "[")
_PIECE = re.compile(r"\*\*|\*|\?|\[!?+\]?+[^\]]*\]|.", re.DOTALL)


def _class(piece: str) -> str:
    members = piece[1:-1].replace("\\", "\\\\")  # a backslash is a member, never an escape
    if members.startswith("!"):
        return f"[^{members[1:]}]"
    if members.startswith("^"):  # a member, not a negation
        return f"[\\{members}]"
    return f"[{members}]"


_FIXED = {"**": ".*", "*": r"[^/\\]*", "?": "."}


def translate_pattern(pattern: str) -> str:
    """The regular expression (a string for ``re.compile``) of a local glob, as Beam's
    ``FileSystem.translate_pattern`` gives it."""
    parts = []
    for piece in _PIECE.findall(pattern):
        if piece in _FIXED:
            parts.append(_FIXED[piece])
        elif len(piece) > 1:  # a bracket class
            parts.append(_class(piece))
        else:
            parts.append(re.escape(piece))
    return "(?ms)" + "".join(parts) + r"\Z"
