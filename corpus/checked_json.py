"""The shard JSON the corpus job's local memory check counts for its inputs (``corpus/memory_model.py``'s
fits are per MB of it): the job's plan counts 3.5 bytes of JSON an input byte whatever the input
(``outputs.JSON_PER_INPUT_BYTE``); the check counts the inputs' text as the fits count the reviews' text, a
text file's byte as all text, a JSONL file's by the share of its bytes that is text, read from a sample
before a local job (docs/scale.md, "Plain text")."""

from __future__ import annotations

import json
from collections.abc import Iterable

from kolectra.corpus import compress, outputs, reader
from kolectra.corpus.inputs import InputFile

# corpus/memory_model.py's fits are per MB of the shard JSON the job plans by, 3.5 bytes an input byte whatever the
# format (outputs.JSON_PER_INPUT_BYTE), measured on the reviews' JSONL, whose lines are half text: 6.9
# bytes of that JSON a byte of text. A text file is all text, so it was counted at half that for the same
# text, and what grows with the input follows the text (its packed chunks in the shuffles): the first 4
# review files as plain text peaked at 992 MB where the check said 953 (their JSONL: 944-973 against
# 1,098), and at 34 GB of text the check said 179 GB against 290 by the plain-text fit of 2026-12-01
# (docs/scale.md, "Plain text"). So the check counts a text or blocks file's byte as that many bytes of
# the JSON, as the fits count the reviews' text, and a JSONL file's as that times the share of its bytes
# that is text, sampled (the reviews' 0.51 gives the plan's 3.5; a crawl's {"url", "text"}, nearly all
# text, would be counted at half its text as plain text was); the shard plan (and so the worker term, by
# its shards) is unchanged.
TEXT_JSON_PER_INPUT_BYTE = 7.0
TEXT_FORMATS = ("text", "blocks")  # reader.resolve_format's formats whose records are all text
SHARE_FILES, SHARE_BYTES = 4, 1 << 16  # JSONL files sampled for their text's share, and the bytes read of each


def checked_json_bytes(listed: Iterable[InputFile], expanded: Iterable[float], fmt: str,
                       jsonl_share: float | None = None) -> float:
    """The shard JSON the local memory check counts for these inputs, ``expanded`` their sizes once
    decompressed in the listing's order (``memory_model.expanded_sizes``): the job's plan
    (``outputs.JSON_PER_INPUT_BYTE`` a byte), but a text or blocks file's byte as
    :data:`TEXT_JSON_PER_INPUT_BYTE`, as the fits count the text of the reviews' JSONL (above), and a
    JSONL file's as that times ``jsonl_share``, the share of its bytes that is text
    (:func:`jsonl_text_share`), where that says more than the plan."""
    jsonl = max(outputs.JSON_PER_INPUT_BYTE, TEXT_JSON_PER_INPUT_BYTE * (jsonl_share or 0.0))
    per_byte = {**dict.fromkeys(TEXT_FORMATS, TEXT_JSON_PER_INPUT_BYTE), "jsonl": jsonl}
    return sum((size * per_byte.get(reader.resolve_format(f.path, fmt), outputs.JSON_PER_INPUT_BYTE)
                for f, size in zip(listed, expanded)), 0.0)


def checked_note(listed: Iterable[InputFile], fmt: str, jsonl_share: float | None) -> str:
    """How :func:`checked_json_bytes` counted these inputs where that differs from the plan, for the check's line."""
    said = []
    if any(reader.resolve_format(f.path, fmt) in TEXT_FORMATS for f in listed):
        said.append(f"a text file's byte counted as {TEXT_JSON_PER_INPUT_BYTE:g} bytes of it")
    if jsonl_share is not None and TEXT_JSON_PER_INPUT_BYTE * jsonl_share > outputs.JSON_PER_INPUT_BYTE:
        said.append(f"a JSONL file's as {TEXT_JSON_PER_INPUT_BYTE * jsonl_share:.1f}, {jsonl_share:.0%} of its bytes "
                    "being text")
    return ", ".join(said)


def jsonl_text_share(listed: Iterable[InputFile], fmt: str, text_field: str, max_line_bytes: int) -> float | None:
    """The share of the JSONL inputs' bytes that is their records' text (``text_field``, UTF-8), read
    from the first :data:`SHARE_BYTES` of up to :data:`SHARE_FILES` of them, evenly spaced over the
    listing: the reviews' JSONL is half text (their other fields the rest), a crawl's ``{"url", "text"}``
    nearly all. None without JSONL inputs or a line read; a file that cannot be read is passed over (the
    job dead-letters it). Read before a local job only, where the check counts it."""
    jsonl = [i for i, f in enumerate(listed) if reader.resolve_format(f.path, fmt) == "jsonl"]
    if not jsonl:
        return None
    step = max(1, len(jsonl) // SHARE_FILES)
    wanted = set(jsonl[::step][:SHARE_FILES])
    text = total = 0
    for f in (f for i, f in enumerate(listed) if i in wanted):
        try:
            with compress.open_sample(f.path) as stream:
                read = 0
                for _, raw in reader.iter_lines(_Head(stream, 4 * SHARE_BYTES), max_line_bytes):
                    if raw is None:
                        continue
                    read += len(raw) + 1
                    total += len(raw) + 1
                    text += _text_bytes(raw, text_field)
                    if read >= SHARE_BYTES:
                        break
        except Exception:  # noqa: BLE001 - unreadable here is unreadable in the job, which names it
            continue
    return text / total if total else None


class _Head:
    """The first ``limit`` bytes of a stream: a sample of lines ends there, however long a line is."""

    def __init__(self, stream, limit: int):
        self.stream, self.left = stream, limit

    def read1(self, n: int = -1) -> bytes:
        data = self.stream.read(min(n if n >= 0 else self.left, self.left)) if self.left > 0 else b""
        self.left -= len(data)
        return data

    read = read1


def _text_bytes(raw: bytes, text_field: str) -> int:
    try:
        value = json.loads(raw).get(text_field) if raw.strip() else None
    except (ValueError, AttributeError):
        return 0
    return len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0
