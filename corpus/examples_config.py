"""Settings of the examples stage (corpus + vocab -> **examples** -> pretrain).

The packing follows ELECTRA's ``build_pretraining_dataset`` (Clark et al. 2020) and BERT's
``create_pretraining_data``: sentences of one document fill a sequence up to a target length,
``[CLS] A [SEP] B [SEP]`` with A/B split at a random sentence boundary, sometimes a single
segment, sometimes a shorter random target, never across documents.

``pack_documents`` (off by default) is the one departure: for corpora of very short documents
(NSMC reviews average ~15 tokens, so 128-token examples are ~86% padding) it lets a sequence
continue with the next documents of the same corpus shard, in corpus order, like RoBERTa's
FULL-SENTENCES inputs (Liu et al. 2019). Fewer, fuller examples; segment B may then come from
another document, so the A/B pair no longer means "same text".
"""

from __future__ import annotations

import dataclasses

from kolectra.core.config import ConfigError

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
    # fill sequences across document boundaries within a corpus shard (see the module docstring)
    pack_documents: bool = False
    shard_size: int = 100_000  # at most this many examples per .npy shard
    batch_documents: int = 256  # documents per tokenizer batch (encode_batch) and per work item
    split: str = "train"
    # The vocab artifact must have been learned from this corpus (its manifest lists the corpus
    # among its parents); set to use a vocab from another corpus on purpose.
    allow_other_corpus_vocab: bool = False
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
