"""Settings of the examples stage (corpus + vocab -> **examples** -> pretrain).

The packing follows ELECTRA's ``build_pretraining_dataset`` (Clark et al. 2020) and BERT's
``create_pretraining_data``: sentences of one document fill a sequence up to a target length,
``[CLS] A [SEP] B [SEP]`` with A/B split at a random sentence boundary, sometimes a single
segment, sometimes a shorter random target, never across documents.
"""

from __future__ import annotations

import dataclasses

from pipeline.config import ConfigError

MIN_SEQ_LENGTH = 8  # [CLS] A [SEP] B [SEP] needs room for at least a few tokens of text
MIN_TARGET = 5  # ELECTRA draws short targets from [5, max_length]


@dataclasses.dataclass(frozen=True)
class ExamplesConfig:
    max_seq_length: int = 128
    # chance that a sequence aims at a random length in [MIN_TARGET, max_seq_length] instead of
    # the full length, so the model also sees short inputs (BERT: 0.1; ELECTRA: 0.05)
    short_seq_prob: float = 0.1
    # chance that a sequence is one segment only, as in single-sentence classification (ELECTRA: 0.1)
    single_segment_prob: float = 0.1
    shard_size: int = 100_000  # examples per .npy shard
    batch_documents: int = 256  # documents per tokenizer batch (encode_batch)
    split: str = "train"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_seq_length < MIN_SEQ_LENGTH:
            raise ConfigError(f"max_seq_length: must be at least {MIN_SEQ_LENGTH}, got {self.max_seq_length}")
        for name in ("short_seq_prob", "single_segment_prob"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ConfigError(f"{name}: must be a probability in [0, 1], got {p}")
        if self.shard_size < 1:
            raise ConfigError(f"shard_size: must be >= 1, got {self.shard_size}")
        if self.batch_documents < 1:
            raise ConfigError(f"batch_documents: must be >= 1, got {self.batch_documents}")
        if self.split not in ("train", "valid"):
            raise ConfigError(f"split: expected 'train' or 'valid', got {self.split!r}")


def default_config() -> ExamplesConfig:
    return ExamplesConfig()
