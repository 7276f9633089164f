"""Which rows of a text task's file are used, and what their label is: the rules the readers of
``classify`` and ``regress`` (:meth:`finetune.text_task.TextTask.load`, their ``target``) apply to a record,
here without the tasks' model and training imports (torch), so that :mod:`finetune.eval_texts` (``kolectra
report``'s check of the scored texts against the pretraining corpus) takes the very rows a run scored by
calling them too.  A row is used when :func:`take_row` keeps it: its text(s) are text (:func:`row_of`) and
its label is one the task's target makes a value of (:func:`class_label`, :func:`score_value`); any other is
a bad row (:class:`BadRow`), counted with its line.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Callable

from kolectra.core.errors import UserInputError
from kolectra.finetune.files import Reason, reason_key
from kolectra.finetune.readers.arrow_rows import Unnamed


class BadRow(UserInputError):
    """Raised by :meth:`TextTask.target`: the row is counted as bad, with this reason and its line; ``key`` names the
    reason's kind (:class:`finetune.files.Reason`, ``bad_rows_by_reason`` in metrics.json)."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key

    def reason(self) -> Reason:
        return Reason(self.key, str(self))


def row_of(record: dict, text: str, pair: str | None, label: str) -> dict | str:
    """The row's text(s) and raw label, or why it cannot be used."""
    for column in (text, pair, label):
        if column is not None and column not in record:
            inside = [k for k in record if k.startswith(f"{column}.")]  # JSONL objects are flattened to dotted names
            return Reason("missing_column", (f"{column!r} is an object ({', '.join(inside[:3])}"
                                             f"{', ...' if len(inside) > 3 else ''}): a dotted name reaches a field of "
                                             f"it, e.g. {inside[0]!r}") if inside else f"no {column!r} field")
    out = {"text": record[text], "label": record[label]}
    if pair is not None:
        out["text_pair"] = record[pair]
    for key, column in (("text", text), ("text_pair", pair)):
        if key in out and out[key] is None:  # JSON null, a Parquet null (pandas' None or NaN): "got NoneType" had said
            return Reason("empty_text", f"{column!r} is empty (null)")
        if key in out and not isinstance(out[key], str):
            return Reason("text_not_a_string", f"{column!r} is not text (got {type(out[key]).__name__})")
    return out


# A whole number written as a float, as text: pandas' to_csv of an integer column with a gap (NaN) writes 1.0
WHOLE_FLOAT = re.compile(r"(-?[0-9]{1,18})\.0+")
BOOLEAN_CODES = {"false": 0, "true": 1}  # a boolean label's code under label_names (:func:`named`)


def label_text(value) -> str:
    """A label as the text it is compared by: ``1``, ``1.0`` and ``"1"`` are one class, ``1.5`` is refused.

    A JSON or Parquet boolean (``"label": true``) is the class ``true`` or ``false``, JSON's spelling, the same
    class as the text ``true`` of a TSV file (sorted: ``false`` is class 0, ``true`` class 1, as their integers);
    each row had been refused as bad ("label must be text or an integer, got True"), the whole file with it.

    NFC: a label typed in decomposed Hangul (NFD, as files saved on macOS may hold) is the same class as
    the composed one; compared as they were, ``스포츠`` and its NFD spelling were two classes printed
    alike, and an NFD test label "not among the training labels (스포츠, ...)".  The text ``1.0`` is ``1``
    too, as the JSON number is: a CSV or TSV pandas wrote from a label column with a gap holds ``0.0``,
    ``1.0``, which were classes of their own (a test file written without the gap, ``1``, was "not among the
    training labels (0.0, 1.0)"; ``label_names`` refused them as text that is none of its names)."""
    if isinstance(value, Unnamed):  # before int, its base: -1 would be a class "-1"
        raise BadRow(f"label {value!r}", "unnamed_label_code")
    if isinstance(value, str) and (text := visible_edges(value)):
        if whole := WHOLE_FLOAT.fullmatch(text):
            return str(int(whole.group(1)))
        return unicodedata.normalize("NFC", text)
    if isinstance(value, bool):  # before int, its base: True would be the class "1"
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():  # 1.0: pandas writes an int column with a gap as floats
        return str(int(value))
    empty = value in ("", None) or (isinstance(value, str) and not visible_edges(value))
    raise BadRow("empty label" if empty else f"label must be text or an integer, got {value!r}",
                 "empty_label" if empty else "label_not_text_or_integer")


def visible_edges(text: str) -> str:
    """``text`` without whitespace or invisible format characters (Unicode Cf: a zero-width space, a
    byte-order mark, a direction mark, a soft hyphen) at its ends: ``pos\u200b`` (copied from a web page)
    had been a class of its own, printed as ``pos`` beside ``pos``."""
    start, end = 0, len(text)
    while start < end and (text[start].isspace() or unicodedata.category(text[start]) == "Cf"):
        start += 1
    while end > start and (text[end - 1].isspace() or unicodedata.category(text[end - 1]) == "Cf"):
        end -= 1
    return text[start:end]


def named(label: str, names: tuple[str, ...]) -> str:
    """``label`` (as :func:`label_text` made it) through ``label_names``: a code ``k`` is ``names[k]``, a name
    stays; else a bad row. Without names, the label itself.

    A boolean that is none of the names is a code as Python, pandas and numpy count it: ``false`` 0, ``true`` 1
    (``label_names=negative,positive`` names a JSON ``false`` negative), in any case (pandas' ``to_csv`` writes
    ``True``, Excel ``TRUE``); a file of booleans with label_names had been refused, "leave label_names out"."""
    if not names:
        return label
    if re.fullmatch(r"[0-9]+", label) and int(label) < len(names):
        return names[int(label)]
    if label in names:
        return label
    if (code := BOOLEAN_CODES.get(label.casefold())) is not None:
        if spelt := [n for n in names if n.casefold() == label.casefold()]:  # names True,False: by name, not code
            return spelt[0]
        if code < len(names):
            return names[code]
        raise BadRow(f"label {label!r} is the code {code} (false 0, true 1), past label_names' one name",
                     "label_not_in_label_names")
    raise BadRow(f"label {label!r} is neither a code of label_names (0 to {len(names) - 1}) nor one of its names",
                 "label_not_in_label_names")


def score_value(value) -> float:
    """A label as a finite number (text or JSON number). A text score's edges are dropped as a classify label's are
    (:func:`visible_edges`: whitespace, a zero-width space, a byte-order mark): ``3.5\u200b`` is 3.5 (before
    2026-12-02 a bad row, "score must be a number", the character unseen). A decimal comma (``3,5``) is no number:
    a bad row of its own reason, ``score_decimal_comma``, saying so (never read as 3.5: the file says which it is)."""
    # no score: JSON null, a Parquet null (pandas' NaN), an empty field; "score must be a number, got None" had
    # read as a value to correct, not one missing
    raw = value  # as the file has it, in the reason: an invisible character there is shown escaped
    if isinstance(value, str):
        value = visible_edges(value)
    if value is None or (isinstance(value, str) and not value):
        raise BadRow("empty score" + (" (null)" if value is None else ""), "empty_score")
    if isinstance(value, Unnamed):  # a class-label column's -1: no score, though an int
        raise BadRow(f"score must be a number, got {raw!r}", "score_not_a_number")
    if isinstance(value, bool):  # before float(), which reads True as 1.0; "got True" read as a value to correct
        # one reason for true and false alike: a refused file's message names the rows of each reason once
        raise BadRow("score must be a number, not a boolean (a JSON or Parquet true/false; never read as 1/0)",
                     "score_boolean")
    # float() also reads "1_0" as 10 (Python's digit grouping): a typo, not a score
    if isinstance(value, str) and "_" in value:
        raise BadRow(f"score must be a number, got {raw!r}", "score_not_a_number")
    try:
        x = float(value)
    except OverflowError:  # a JSON integer past float's range (float() of a str gives inf instead)
        raise BadRow(f"score must be finite, got an integer of {len(str(abs(value)))} digits", "score_infinite") from None
    except (TypeError, ValueError):
        if isinstance(value, str) and (dotted := decimal_comma(value)):
            raise BadRow(f"score must be a number, got {raw!r} (a decimal comma? then write {dotted!r}: "
                         "regress reads no decimal comma)", DECIMAL_COMMA) from None
        raise BadRow(f"score must be a number, got {raw!r}", "score_not_a_number") from None
    if not math.isfinite(x):
        raise BadRow(f"score must be finite, got {raw!r}", "score_nan" if math.isnan(x) else "score_infinite")
    return x


DECIMAL_COMMA = "score_decimal_comma"  # the reason key of a score written with a decimal comma (bad_rows_by_reason)


def decimal_comma(text: str) -> str | None:
    """``text`` with its one comma a dot when that makes it a finite number (``3,5`` -> ``3.5``: a spreadsheet of a
    locale that writes a decimal comma saved it so), else None."""
    if text.count(",") != 1:
        return None
    dotted = text.replace(",", ".")
    try:
        return dotted if math.isfinite(float(dotted)) else None
    except ValueError:
        return None


def take_row(record: dict, names: tuple[str, str | None, str], target: Callable[[object], object]) -> dict:
    """The row ``record`` holds (``text`` (, ``text_pair``), ``label`` as ``target`` made it) under the columns
    ``names`` (text, pair or None, label); :class:`BadRow` when it cannot be used."""
    row = row_of(record, *names)
    if isinstance(row, str):
        raise BadRow(row, reason_key(row))
    row["label"] = target(row["label"])
    return row


def label_names(names) -> tuple[str, ...]:
    """``label_names`` as classify compares labels with them: NFC, their edges' spaces dropped."""
    return tuple(unicodedata.normalize("NFC", n.strip()) for n in names)


def class_label(value, names: tuple[str, ...], saw: Callable[[str, bool], None] | None = None) -> str:
    """A classify label as the task keeps it (:meth:`finetune.classify.Classify.target`): :func:`label_text`, then
    named through ``names`` (:func:`label_names`; :func:`named`); :class:`BadRow` when it is no class. ``saw``
    is told the label's text and whether ``names`` named it (the task's notes for its refusals)."""
    label = label_text(value)
    try:
        kept = named(label, names)
    except BadRow:
        if saw:
            saw(label, False)
        raise
    if saw:
        saw(label, True)
    return kept
