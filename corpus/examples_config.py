"""Settings of the examples stage (corpus + vocab -> **examples** -> pretrain).

The sequences follow ELECTRA's ``build_pretraining_dataset`` (Clark et al. 2020) and BERT's
``create_pretraining_data``: sentences of one document fill a sequence up to a target length,
``[CLS] A [SEP] B [SEP]`` with A/B split at a random sentence boundary, sometimes a single
segment, sometimes a shorter random target, never across documents.

``packing`` decides how those sequences fill the artifact's fixed-length rows:

- ``isolated`` (default): several sequences share a row, each a complete ``[CLS] A [SEP] B [SEP]``
  of its own, and the row's ``doc_ids`` tell the model to let each attend only within itself,
  with positions restarting at its [CLS]. To the encoder each sequence looks exactly as it would
  alone in a row, so ELECTRA's recipe is unchanged; only the padding goes. Short documents are
  most of some corpora: NSMC reviews average ~15 tokens, so one per 128-token row is ~86%
  padding, compute spent on nothing. A document longer than a row is cut by the recipe as
  before (its full-length sequences fill rows alone; its shorter tail shares a row).
- ``none``: one sequence per row, the rest padding (ELECTRA as published).
- ``stream``: a sequence continues with the next documents of the same corpus shard, in corpus
  order, like RoBERTa's FULL-SENTENCES inputs (Liu et al. 2019); tokens attend across
  documents and segment B may come from another document. Kept to reproduce earlier runs.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

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
    # how sequences fill the rows (see the module docstring)
    packing: Literal["isolated", "none", "stream"] = "isolated"
    shard_size: int = 100_000  # at most this many rows per Arrow shard
    # documents per work item and tokenizer batch (encode_batch): large, since every element
    # between Beam steps costs a fixed overhead (benchmarks/examples.py)
    batch_documents: int = 4096
    # ... and at most about this many bytes of corpus lines a batch, whichever comes first: a worker
    # holds a batch tokenised, many times its lines' bytes, so 4,096 long documents were gigabytes
    # (docs/scale.md, "Skewed inputs"); short documents fill batch_documents first. The same shards
    # at any value: recorded only when set, and left out of the id.
    batch_bytes: int = dataclasses.field(default=4 << 20, metadata={"recorded": "unless default"})
    split: str = "train"
    # The vocab artifact must have been learned from this corpus (its manifest lists the corpus
    # among its parents); set to use a vocab from another corpus on purpose.
    allow_other_corpus_vocab: bool = False
    # A text file of corpus document ids (one a line) to leave out of the examples, e.g. the rows an
    # evaluation scores on (``kolectra study`` writes it): counted as ``held_out_documents``.
    holdout_ids: str = ""
    seed: int = 0

    def validate(self) -> None:
        """Raise a ConfigError naming the first setting that cannot work."""
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
        if self.batch_bytes < 1:
            raise ConfigError(f"batch_bytes: must be >= 1, got {self.batch_bytes}")
        if self.packing not in ("isolated", "none", "stream"):
            raise ConfigError(f"packing: expected 'isolated', 'none' or 'stream', got {self.packing!r}")
        if self.split not in ("train", "valid"):
            raise ConfigError(f"split: expected 'train' or 'valid', got {self.split!r}")


def default_config() -> ExamplesConfig:
    return ExamplesConfig()
