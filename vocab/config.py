"""Settings of the vocab stage (corpus -> **vocab** -> examples).

A frozen dataclass; presets are functions. ``recipe`` picks how pieces are learned:

- ``morph_wordpiece`` (default): WordPiece pieces learned under the corpus artifact's stored
  morpheme segmentation, so a piece never cuts a morpheme in two (see :mod:`vocab.trainer`).
- ``wordpiece``: the same learner with the morpheme constraint switched off — plain WordPiece
  as in BERT/ELECTRA, the baseline every report compares against.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pipeline.config import ConfigError

RECIPES = ("morph_wordpiece", "wordpiece")


@dataclasses.dataclass(frozen=True)
class VocabConfig:
    # KoELECTRA's vocabulary size (35k); the 5 specials and the unused slots count towards it.
    vocab_size: int = 35000
    recipe: Literal["morph_wordpiece", "wordpiece"] = "morph_wordpiece"
    # a merge is learned only while its pair occurs at least this often (weighted by word count)
    min_frequency: int = 2
    # [unused0..N-1] right after the specials: room for task tokens without resizing embeddings
    num_unused: int = 50
    # keep at most this many distinct characters (most frequent first); each gets a word-initial
    # and a ``##`` form, so rarer characters become [UNK] instead of eating the vocabulary
    limit_alphabet: int = 3000
    # morph recipe only: also merge runs of *complete* morphemes (영화+##를 -> 영화를), so frequent
    # eojeols stay whole; pieces still never end or start inside a morpheme
    merge_whole_morphs: bool = True
    # the baseline recipe trained alongside for report.json (False: report the chosen recipe only)
    report_baseline: bool = True
    # how many frequent words the "most fragmented" list of report.json draws from / shows
    report_top_words: int = 2000
    report_show_words: int = 20
    # the learner is deterministic (ties break by piece text); the seed is here for the contract
    seed: int = 0

    def __post_init__(self) -> None:
        if self.recipe not in RECIPES:
            raise ConfigError(f"recipe: expected one of {list(RECIPES)}, got {self.recipe!r}")
        if self.vocab_size < 16:
            raise ConfigError(f"vocab_size: must be at least 16, got {self.vocab_size}")
        if self.vocab_size > 2**31 - 1:
            raise ConfigError(f"vocab_size: too large ({self.vocab_size})")
        if self.num_unused < 0:
            raise ConfigError(f"num_unused: must be >= 0, got {self.num_unused}")
        if self.min_frequency < 1:
            raise ConfigError(f"min_frequency: must be >= 1, got {self.min_frequency}")
        if self.limit_alphabet < 1:
            raise ConfigError(f"limit_alphabet: must be >= 1, got {self.limit_alphabet}")


def default_config() -> VocabConfig:
    return VocabConfig()


def plain_config() -> VocabConfig:
    """The BERT/ELECTRA baseline: plain WordPiece, no morpheme constraint."""
    return VocabConfig(recipe="wordpiece")
