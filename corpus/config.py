"""Settings of the corpus stage (first link of the chain: raw text -> cleaned, segmented corpus).

One frozen dataclass, resolved into the artifact id by the lead's ``pipeline.artifacts``; the CLI
maps ``--format/--text-field/--id-field`` onto the fields of the same names and ``--set key=value``
onto any of them. Beam pipeline options (``--runner`` ...) are not part of this config: they decide
where the job runs, never what it produces.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pipeline.config import ConfigError


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    # input parsing
    format: Literal["auto", "text", "jsonl"] = "auto"  # auto: *.jsonl/*.json/*.ndjson[.gz|.bz2|.zst] -> jsonl
    text_field: str = "text"  # JSONL key holding the document text
    id_field: str = "id"  # JSONL key holding the document id (missing -> "<source>:<line>")
    max_line_bytes: int = 1 << 20  # longer lines are rejected (bounded memory per record)
    # filters, on the normalised text (lengths in Unicode code points)
    min_chars: int = 5
    max_chars: int = 100_000
    # output
    valid_fraction: float = 0.01  # held out by a stable hash of the normalised text
    num_shards: int = 4  # per split
    # a job whose rejected share (malformed input) exceeds this fails, naming the worst file
    max_reject_ratio: float = 0.05
    seed: int = 0  # salts the train/valid hash

    def __post_init__(self) -> None:
        # Fail at construction so a bad --set is reported before Beam starts.
        if self.format not in ("auto", "text", "jsonl"):
            raise ConfigError(f"format must be auto, text or jsonl, got {self.format!r}")
        if not 0.0 <= self.valid_fraction < 1.0:
            raise ConfigError(f"valid_fraction must be in [0, 1), got {self.valid_fraction}")
        if self.num_shards < 1:
            raise ConfigError(f"num_shards must be >= 1, got {self.num_shards}")
        if self.min_chars < 0 or self.max_chars < max(self.min_chars, 1):
            raise ConfigError(f"need 0 <= min_chars <= max_chars, got {self.min_chars}, {self.max_chars}")
        if self.max_line_bytes < 1:
            raise ConfigError(f"max_line_bytes must be positive, got {self.max_line_bytes}")
        if not 0.0 <= self.max_reject_ratio <= 1.0:
            raise ConfigError(f"max_reject_ratio must be in [0, 1], got {self.max_reject_ratio}")


def default_config() -> CorpusConfig:
    return CorpusConfig()
