"""The JSON Lines rows of a fine-tuning table (:mod:`finetune.readers.tables`, ``format=jsonl``): one object a
line, or a file that is one JSON array of objects (read an item at a time, :mod:`finetune.readers.json_array`);
nested objects flattened to dotted names (:func:`flatten`), a row nested deeper than :data:`MAX_DEPTH` or holding
a lone surrogate in a column the task reads (:func:`lone_surrogate`) counted as a bad row.

:func:`jsonl_records` fills the ``tables.Table`` it is given as it is consumed (``bad``, ``blank``, and
``columns`` once read); ``tables`` is not imported here, as it imports this module.
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator

from kolectra.core.config_file import nested_deeper
from kolectra.finetune.files import FinetuneError, Reason, column_name, iter_text_lines
from kolectra.finetune.readers.json_array import array_items, is_array

# Objects and lists a JSON Lines row may nest (a task's row needs a few): deeper is a bad row.
MAX_DEPTH = 100


def flatten(obj: dict, prefix: str = "") -> dict:
    """``{"labels": {"label": 3.2}}`` -> ``{"labels.label": 3.2}`` (lists and scalars stay as they are); the keys
    NFC (:func:`finetune.files.column_name`), as a text file's header."""
    out = {}
    for k, v in obj.items():
        k = column_name(k)
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def lone_surrogate(values: dict, read: Iterable[str] | None = None) -> str | None:
    """The first field (``'text'``, ``'tokens[3]'``, or a key itself) holding a lone surrogate: JSON's
    ``"\\ud800"`` parses into a string that Arrow, the tokenizer and UTF-8 output refuse (a traceback
    later, where the row was no longer named). A pair (an escaped emoji) is one character and passes.
    Only the values of the columns in ``read`` (None: every column) are checked: Arrow never sees the
    others, and a row with a broken field the task does not read was used before the check came."""
    def bad(s) -> bool:
        if not isinstance(s, str) or s.isascii():
            return False
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    for key, value in values.items():
        if bad(key):
            return f"a key ({ascii(key)})"
        if read is not None and key not in read:
            continue
        if bad(value):
            return repr(key)
        if isinstance(value, list):
            for i, item in enumerate(value):
                if bad(item):
                    return f"{key!r}[{i}]"
    return None


def array_records(table, read: frozenset[str] | None) -> Iterator[tuple[int, dict]]:
    """A JSON array's objects, numbered from 1 (``row``), as JSON Lines' lines are: read an item at a time
    (:func:`finetune.readers.json_array.array_items`), never whole."""
    columns = {}
    table.unit, table.blank = "row", None  # items, not lines: no blank lines to count
    for n, _, obj in array_items(table.path):
        if not isinstance(obj, dict):
            table.bad.append((n, Reason("not_an_object", f"expected a JSON object, got {type(obj).__name__}")))
        elif nested_deeper(obj, MAX_DEPTH):
            table.bad.append((n, Reason("unreadable_json",
                                        f"not readable JSON (nested more than {MAX_DEPTH} levels deep)")))
        elif where := lone_surrogate(values := flatten(obj), read):
            table.bad.append((n, Reason("lone_surrogate", f"{where} has a lone surrogate (a JSON escape such as \\ud800 "
                                                    "that no UTF-8 text can hold; half of a character cut in two?)")))
        else:
            columns.update(dict.fromkeys(values))
            yield n, values
    if not columns:
        raise FinetuneError(f"{table.path}: a JSON array holding no object")
    table.columns, table.complete = list(columns), True


def jsonl_records(table, read: frozenset[str] | None = None) -> Iterator[tuple[int, dict]]:
    path, bad, columns, found = table.path, table.bad, {}, False
    if is_array(path):
        yield from array_records(table, read)
        return
    for n, line in enumerate(iter_text_lines(path), start=1):
        if not line.strip():
            table.blank += 1
            continue
        # A row the parser refuses is a bad row like any other, counted against max_bad_fraction:
        # besides malformed JSON (JSONDecodeError), an integer of more than 4,300 digits (ValueError:
        # Python's int conversion limit) and nesting deeper than MAX_DEPTH. The parser's own bound is
        # the process's recursion limit (RecursionError), which others raise (torch's Inductor makes it
        # at least 2,000 once it compiles), so the same row was bad or not by what ran before it.
        try:
            # a byte-order mark opening a line in the middle: files that each open with one, joined with cat
            obj = json.loads(line.removeprefix("\ufeff"))
            if nested_deeper(obj, MAX_DEPTH):
                raise RecursionError
            values = flatten(obj) if isinstance(obj, dict) else None
        except json.JSONDecodeError as e:
            bad.append((n, Reason("not_valid_json", f"not valid JSON ({e.msg})")))
            continue
        except ValueError as e:
            bad.append((n, Reason("unreadable_json", f"not readable JSON ({str(e).split(';')[0][:120]})")))
            continue
        except RecursionError:
            bad.append((n, Reason("unreadable_json", f"not readable JSON (nested more than {MAX_DEPTH} levels "
                                                     "deep)")))
            continue
        if values is None:
            bad.append((n, Reason("not_an_object", f"expected a JSON object, got {type(obj).__name__}")))
            continue
        if ("\\ud" in line or "\\uD" in line) and (where := lone_surrogate(values, read)):
            bad.append((n, Reason("lone_surrogate", f"{where} has a lone surrogate (a JSON escape such as \\ud800 that "
                                                 "no UTF-8 text can hold; half of a character cut in two?)")))
            continue
        # the columns: every key of every object, in the order first seen (an optional field may be
        # missing from the first object; a row without a column the task reads is a bad row)
        columns.update(dict.fromkeys(values))
        found = True
        yield n, values
    if not found and not bad:  # "no line holds a JSON object ... a JSON array ..." misled for a file of no lines
        raise FinetuneError(f"{path}: empty file (no JSON lines" + (f", {table.blank} blank ones" if table.blank else "")
                            + ")")
    if not found:  # a JSON array, or objects spread over several lines: JSON, not JSON Lines
        first = f"; line {bad[0][0]}: {bad[0][1]}" if bad else ""
        raise FinetuneError(f"{path}: no line holds a JSON object (JSON Lines: one object per line, or one JSON "
                            f"array of objects; an object over several lines is not read){first}")
    table.columns, table.complete = list(columns), True
