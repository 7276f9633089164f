"""The corpus artifact's document format, shared by every stage that reads a corpus.

Each kept document is one JSON line in ``data/<split>-NNNNN-of-MMMMM.jsonl.gz``::

    {"id": str, "source": str, "text": str,
     "sentences": [[start, end], ...],
     "morphs": [[start, end, tag], ...]}

Offsets are Python string indices into ``text`` (the cleaned, NFC text); morphemes are surface
spans of that text, never Kiwi's normalised forms, so later stages (vocab, examples) never run
the analyser again. ``split`` is ``train`` or ``valid``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Iterator

DATA_DIR = "data"
SPLITS = ("train", "valid")


def shard_paths(corpus_dir: Path, split: str = "train") -> list[Path]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return sorted(Path(corpus_dir, DATA_DIR).glob(f"{split}-*.jsonl*"))


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def iter_documents(corpus_dir: Path, split: str = "train") -> Iterator[dict]:
    """Documents of one split in shard order (deterministic)."""
    for path in shard_paths(corpus_dir, split):
        with _open(path) as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def sentences(doc: dict) -> list[str]:
    text = doc["text"]
    return [text[s:e] for s, e in doc["sentences"]]


def sentence_morphs(doc: dict) -> list[list[str]]:
    """Per sentence, the surface strings of its morphemes (in order)."""
    text = doc["text"]
    out: list[list[str]] = []
    morphs = doc["morphs"]
    i = 0
    for s, e in doc["sentences"]:
        cur = []
        while i < len(morphs) and morphs[i][0] < e:
            ms, me = morphs[i][0], morphs[i][1]
            if ms >= s:
                cur.append(text[ms:me])
            i += 1
        out.append(cur)
    return out
