"""Settings of the vocab stage (corpus -> **vocab** -> examples).

A frozen dataclass; presets are functions. ``recipe`` picks how pieces are learned:

- ``morph_wordpiece`` (default): WordPiece pieces learned under the corpus artifact's stored
  morpheme segmentation, so a piece never cuts a morpheme in two (see :mod:`vocab.trainer`).
- ``wordpiece``: the same learner with the morpheme constraint switched off — plain WordPiece
  as in BERT/ELECTRA, the baseline every report compares against.
- ``sp_unigram`` / ``sp_bpe``: SentencePiece (unigram LM or BPE) on raw sentences, no
  morphemes, exported as a HF fast tokenizer (see :mod:`vocab.spm`); the ``sp_*`` fields apply.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from kolectra.core.config import ConfigError

RECIPES = ("morph_wordpiece", "wordpiece", "sp_unigram", "sp_bpe")
WORDPIECE_RECIPES = ("morph_wordpiece", "wordpiece")


@dataclasses.dataclass(frozen=True)
class VocabConfig:
    # KoELECTRA's vocabulary size (35k); the 5 specials and the unused slots count towards it.
    vocab_size: int = 35000
    recipe: Literal["morph_wordpiece", "wordpiece", "sp_unigram", "sp_bpe"] = "morph_wordpiece"
    # a merge is learned only while its pair occurs at least this often (weighted by word count)
    min_frequency: int = 2
    # [unused0..N-1] right after the specials: room for task tokens without resizing embeddings
    num_unused: int = 50
    # keep at most this many distinct characters (most frequent first); each gets a word-initial
    # and a ``##`` form, so rarer characters become [UNK] instead of eating the vocabulary
    limit_alphabet: int = 3000
    # morph recipe only: where a piece may span several *whole* morphemes (see vocab.trainer):
    # "prefix" word-initial runs only (영화+##를 -> 영화를), "any" anywhere, "none" never
    cross_morph: Literal["prefix", "any", "none"] = "prefix"
    # the word table the learner gets: the this-many most frequent word types, each with its exact
    # count (vocab.count); the types left out and their occurrences are counted in report.json, and
    # each occurs at most as often as the last type kept. Memory: ~1.5 kB a type while learning
    max_word_types: int = 1_000_000
    # a counting worker sums a work item's word types in one table and passes it on whenever it holds
    # this many (then starts a new one): its memory is this setting's, never the corpus's
    count_flush_types: int = 200_000
    # SentencePiece recipes: chars outside this coverage become byte pieces (or [UNK] without fallback)
    sp_character_coverage: float = 0.9995
    sp_byte_fallback: bool = True
    # at most this many sentences are held by the trainer (seeded reservoir sample); 0 = all
    sp_input_sentences: int = 2_000_000
    sp_max_sentence_bytes: int = 4192
    # False: vocab_size is a ceiling a small corpus may not reach; True: exact, retried once at the
    # largest size the corpus supports when it cannot
    sp_hard_vocab_limit: bool = False
    sp_threads: int = 2
    # the baseline recipe trained alongside for report.json (False: report the chosen recipe only)
    report_baseline: bool = True
    # how many frequent words the "most fragmented" list of report.json draws from / shows
    report_top_words: int = 20000
    report_show_words: int = 20
    # the report's word frequencies (for the list above): 0 counts every type of the held-out split (its
    # memory grows with them, about 0.2 kB a type: docs/scale.md); N holds at most N, pruning the rarest
    # past it (vocab.words.prune: the list may then differ; report.json says so)
    report_max_word_types: int = dataclasses.field(default=0, metadata={"recorded": "unless default"})
    # the WordPiece learner is deterministic (ties break by piece text); SentencePiece's sampling uses it
    seed: int = 0

    def validate(self) -> None:
        """Raise a ConfigError naming the first setting that cannot work."""
        if self.recipe not in RECIPES:
            raise ConfigError(f"recipe: expected one of {list(RECIPES)}, got {self.recipe!r}")
        if self.vocab_size < 16:
            raise ConfigError(f"vocab_size: must be at least 16, got {self.vocab_size}")
        if self.vocab_size > 2**31 - 1:
            raise ConfigError(f"vocab_size: too large ({self.vocab_size})")
        if self.num_unused < 0:
            raise ConfigError(f"num_unused: must be >= 0, got {self.num_unused}")
        if self.cross_morph not in ("prefix", "any", "none"):
            raise ConfigError(f"cross_morph: expected prefix, any or none, got {self.cross_morph!r}")
        if self.max_word_types < 1000:
            raise ConfigError(f"max_word_types: must be at least 1000, got {self.max_word_types}")
        if self.count_flush_types < 1000:
            raise ConfigError(f"count_flush_types: must be at least 1000, got {self.count_flush_types}")
        if not 0.9 <= self.sp_character_coverage <= 1.0:
            raise ConfigError(f"sp_character_coverage: expected 0.9..1.0, got {self.sp_character_coverage}")
        if not (self.sp_input_sentences == 0 or self.sp_input_sentences > 100):
            # sentencepiece's own bound on input_sentence_size
            raise ConfigError(f"sp_input_sentences: 0 (all) or more than 100, got {self.sp_input_sentences}")
        for key, least in (("sp_max_sentence_bytes", 16), ("sp_threads", 1), ("report_top_words", 0),
                           ("report_show_words", 0)):  # a negative report count sliced "all but the last N"
            if getattr(self, key) < least:
                raise ConfigError(f"{key}: must be >= {least}, got {getattr(self, key)}")
        if self.report_max_word_types and self.report_max_word_types < 1000:
            raise ConfigError(f"report_max_word_types: 0 (every type) or at least 1000, got {self.report_max_word_types}")
        if self.min_frequency < 1:
            raise ConfigError(f"min_frequency: must be >= 1, got {self.min_frequency}")
        if self.limit_alphabet < 1:
            raise ConfigError(f"limit_alphabet: must be >= 1, got {self.limit_alphabet}")


def default_config() -> VocabConfig:
    return VocabConfig()


def plain_config() -> VocabConfig:
    """The BERT/ELECTRA baseline: plain WordPiece, no morpheme constraint."""
    return VocabConfig(recipe="wordpiece")
