"""A file that is one JSON array (KLUE's own ``klue-ynat-v1.1_train.json``, ``klue-sts-...``, ``klue-nli-...``),
read an item at a time.

Feeds :mod:`finetune.readers.jsonl_rows` (the JSONL reader of :mod:`finetune.readers.tables` hands such a
file here).  ``json.loads`` of the whole file held its text and every item's dict at once: a 93 MB array of
news titles peaked at 436 MB where the
same rows as JSON Lines stay at the interpreter's 18 MB, against the file tasks' rule of holding neither a
file's lines nor a dict a record (docs/finetune.md, "Memory and large task files").  Here a buffer of about
1 MiB and the item being parsed are held (``json.JSONDecoder.raw_decode`` from a position in the buffer).

An item that is not valid JSON cannot be stepped over (where it ends is unknown), so it refuses the file
naming the item and its line, as does anything after the closing ``]`` (JSON Lines whose lines are arrays).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from kolectra.finetune.files import FinetuneError, _decode_all, not_utf8

BLOCK = 1 << 20  # characters read at a time
SPACE = " \t\r\n"
# How near the held text's end a parse error must be to be a value cut by it rather than broken: a cut token
# ("tru", "-Infinit", "1.5e+", "\\u12") fails at its start, never more than this before the end (an unterminated
# string, said at its opening quote, is one too). A broken item had the whole rest of the file read in, looking
# for its end: a 93 MB array with item 4 broken peaked at 396 MB, as a few GB's file would be killed, not refused.
CUT = 16


def is_array(path: Path) -> bool:
    """Whether the file opens with ``[`` (after a byte-order mark and whitespace): one JSON array, not JSON Lines."""
    with open(path, "rb") as f:
        head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


class _Text:
    """The file's text from a position, a block at a time, with the line of that position."""

    def __init__(self, f):
        self.f, self.buf, self.pos, self.line, self.ended = f, "", 0, 1, False

    def more(self, need: int) -> bool:
        """Hold ``need`` characters from the position (dropping those before it); False at the end of the file."""
        if self.pos:
            self.buf, self.pos = self.buf[self.pos:], 0
        while len(self.buf) < need and not self.ended:
            block = self.f.read(max(BLOCK, need - len(self.buf)))
            self.ended = not block
            self.buf += block
        return len(self.buf) >= need

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the file), the lines passed counted."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in SPACE:
                self.line += self.buf[self.pos] == "\n"
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more(1):
                return ""

    def value(self, decoder, where: str):
        """The JSON value at the position; read on while it runs past what is held (a number cut at a block's
        end parses as a shorter one: one not followed by a delimiter near the end is read again with more)."""
        need = BLOCK
        while True:
            try:
                value, end = decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                if not self.ended and (e.pos >= len(self.buf) - CUT or e.msg.startswith("Unterminated string")):
                    self.more(len(self.buf) - self.pos + need)  # cut by the end of what is held: read on
                    need *= 2
                    continue
                line = self.line + self.buf.count("\n", self.pos, e.pos)
                raise FinetuneError(f"{where.format(line=line)} is not valid JSON ({e.msg})") from None
            except RecursionError:
                raise FinetuneError(f"{where.format(line=self.line)} is nested too deep to read") from None
            except ValueError as e:  # an integer past Python's conversion limit
                raise FinetuneError(f"{where.format(line=self.line)} is not readable JSON "
                                    f"({str(e).split(';')[0][:120]})") from None
            # a number, true, false or null may be cut at the buffer's end ("3" of "3.25"): closed only by what
            # follows; what follows well before the end ("1x") is the caller's to refuse, not a reason to read on
            if (isinstance(value, (dict, list, str)) or self.ended or end + CUT <= len(self.buf)
                    or any(c in ",]}" + SPACE for c in self.buf[end:end + 1])):
                break
            self.more(len(self.buf) - self.pos + need)
            need *= 2
        self.line += self.buf.count("\n", self.pos, end)
        self.pos = end
        return value


def array_items(path: Path) -> Iterator[tuple[int, int, object]]:
    """``(item number from 1, line it starts on, value)`` for each item of the file's one JSON array."""
    try:
        _decode_all(path)  # not UTF-8: refused before the first item, as a text file is before its first line
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8-sig", newline="") as f:
        text = _Text(f)
        text.peek()
        text.pos += 1  # the "[" is_array found
        n, c = 0, text.peek()
        while c != "]":
            if c == "":
                raise FinetuneError(f"{path}:{text.line}: the JSON array is never closed (the file ends inside it)")
            n += 1
            start = text.line
            value = text.value(decoder, f"{path}:{{line}}: item {n} of the JSON array")
            yield n, start, value
            c = text.peek()
            if c == ",":
                text.pos += 1
                if (c := text.peek()) == "]":
                    raise FinetuneError(f"{path}:{text.line}: the JSON array has a ',' before its ']'")
            elif c not in ("]", ""):
                raise FinetuneError(f"{path}:{text.line}: expected ',' or ']' after item {n} of the JSON array, "
                                    f"got {c!r}")
        text.pos += 1
        if (c := text.peek()) != "":
            raise FinetuneError(f"{path}:{text.line}: more after the JSON array closes ({c!r}): one JSON array, or "
                                "JSON Lines (one object a line), is read")
