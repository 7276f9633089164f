"""Which local names a corpus ``--input`` glob matches: the regular expression Beam's
``FileSystem.translate_pattern`` makes of it (apache_beam/io/filesystem.py, itself after Python 2.7's
``fnmatch.translate``), written out here so that listing the inputs imports no Beam.

The listing imported ``apache_beam.io.filesystem`` for this one function: 1.8-2.2 CPU s and 196 MB
peak RSS by itself, most of the 2.4-2.6 CPU s and 211 MB of a ``kolectra corpus`` run again over a
published corpus (the "reused" answer, now 0.5-0.7 s and 51 MB; docs/benchmarks.md). The
translation is Beam's, character for character, quirks included, since which files a glob names
decides the request id and what docs/corpus.md says; tests/test_local_glob.py holds it equal to
Beam's own on every pattern of up to four characters of an awkward alphabet and to
``FileSystems.match`` on a folder of awkward names.

- ``**`` is ``.*`` (any characters, ``/`` included); ``*`` is ``[^/\\\\]*`` (none of ``/`` or ``\\``);
  ``***`` is ``**`` then ``*``.
- ``?`` is ``.``: any one character, ``/`` included (Beam's, unlike ``fnmatch`` and the shell).
- ``[...]`` is a class as ``fnmatch`` reads it: ``[!a]`` is ``[^a]``, a ``]`` first is a member
  (``[]]``, ``[!]]``), a ``^`` first is a member, a backslash is a member (there is no way to quote a
  character); a ``[`` without its ``]`` is a literal ``[``.
- Anything else is itself (``re.escape``); the whole name must match (``\\Z``, dot-all).
"""

from __future__ import annotations

import re


def translate_pattern(pattern: str) -> str:
    """The regular expression (a string for ``re.compile``) of a local glob, as Beam's
    ``FileSystem.translate_pattern`` gives it."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if i < n and pattern[i] == "*":
                out.append(".*")
                i += 1
            else:
                out.append(r"[^/\\]*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            j = pattern.find("]", j)
            if j < 0:  # no closing bracket: a literal "[", the rest read on
                out.append(r"\[")
            else:
                members = pattern[i:j].replace("\\", "\\\\")
                i = j + 1
                if members[0] == "!":
                    members = "^" + members[1:]
                elif members[0] == "^":
                    members = "\\" + members
                out.append(f"[{members}]")
        else:
            out.append(re.escape(c))
    return "(?ms)" + "".join(out) + r"\Z"
