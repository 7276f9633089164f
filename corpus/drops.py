"""Every dropped document, written to the artifact when ``write_dropped`` is set (off by default):
``dropped/<reason>-NNNNN-of-NNNNN.jsonl.gz``, one JSON line a document, as an exclusion writer
beside a filter keeps what it removed (datatrove's filters take one). ``samples/dropped.jsonl``
shows only a few a reason; these files let a reader judge a rule on all it dropped.

A line: ``{"reason", "source", "line", "id", "text"}``, the text as the rule saw it (cleaned and
normalised; masked when ``mask_pii`` is on, never the raw input), and for a ``near_duplicate`` the
(source, line) of the copy kept. An exact ``duplicate``'s kept copy is the one of the same text
with the smallest (source, line). Per reason, the lines of all its files equal ``stats.json`` ->
``dropped``.

Memory stays bounded whatever the corpus: the steps send drops in chunks that wait only up to
:data:`BUDGET` (``corpus/chunks.py``), and a reason's drops are spread over ``num_shards`` files
(the kept shards' count, from ``shard_bytes``) by their text's key, each written like a shard:
sorted by (source, line) in runs of at most ``sorted_files.RUN_BYTES``, spilled beyond that.
Files are written only for the (reason, part) that holds a drop.
"""

from __future__ import annotations

import json
import sys

from kolectra.core import scratch
from kolectra.corpus import outputs
from kolectra.corpus.chunks import BUDGET as STEP_BUDGET
from kolectra.corpus.chunks import KeyedChunks
from kolectra.corpus.sorted_files import sorted_lines, write_lines

DROPPED_DIR = "dropped"
DROPS = "drops"  # the tag of (file, packed [(position, JSON line)]) side outputs
CHUNK = 1024  # drops a chunk carries at most
BUDGET = STEP_BUDGET // 4  # bytes of drops a step holds waiting at most, beside its own chunks

_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), check_circular=False)


def part_name(reason: str, part: int, parts: int) -> str:
    return f"{DROPPED_DIR}/{reason}-{part:05d}-of-{parts:05d}.jsonl.gz"


def drop_row(reason: str, doc: dict) -> dict:
    row = {"reason": reason, "source": doc["source"], "line": doc["line"], "id": doc.get("id"), "text": doc["text"]}
    if "kept" in doc:
        row["kept"] = list(doc["kept"])
    return row


def drop_item(reason: str, doc: dict, parts: int) -> tuple[str, tuple, int]:
    """(file, (position, JSON line), size): the position sorts by (source, line), then the line."""
    line = _ENCODER.encode(drop_row(reason, doc))
    part = outputs.shard_of(outputs.text_key(doc["text"]), parts)
    return part_name(reason, part, parts), ((doc["source"], doc["line"], line), line), sys.getsizeof(line)


class DropChunks:
    """A step's drops on their way to :func:`write_part`: ``add(reason, doc)`` and ``drain()`` give
    (file, packed chunk) pairs to emit (:func:`outputs.pack_chunk`)."""

    def __init__(self, parts: int):
        self.parts = parts
        self.chunks = KeyedChunks(CHUNK, BUDGET)

    def add(self, reason: str, doc: dict):
        rel, item, size = drop_item(reason, doc, self.parts)
        return [(key, outputs.pack_chunk(chunk)) for key, chunk in self.chunks.add(rel, item, size)]

    def drain(self):
        return [(key, outputs.pack_chunk(chunk)) for key, chunk in self.chunks.drain()]


def packed_item(reason_doc: tuple[str, dict], parts: int) -> tuple[str, bytes]:
    """(reason, document) -> one drop as its own chunk (the near-dup step's drops travel one an element)."""
    rel, item, _ = drop_item(*reason_doc, parts)
    return rel, outputs.pack_chunk([item])


def write_part(item, out_dir: str) -> dict:
    """(file, packed chunks) -> that file, sorted by position and streamed like a shard."""
    rel, chunks = item
    with scratch.temporary_directory("dropped") as spill:
        return write_lines(out_dir, rel, sorted_lines(map(outputs.unpack_chunk, chunks), spill), gzipped=True)
