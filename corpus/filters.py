"""Document filters of the corpus stage: pure functions on the normalised text that return the
reason a document is dropped, or ``None`` to keep it.

The reason string is the counter name in ``stats.json``'s ``dropped`` map, so every filter is
visible in the artifact. :func:`judge` first removes boilerplate lines (when
``drop_boilerplate``; a document that was nothing but boilerplate is dropped as
``boilerplate``), then runs the filters in a fixed order and reports the first one that fires;
cheap length checks go first. What is language-specific (script, boilerplate patterns) comes
from the profile named by ``cfg.language`` (``corpus/languages.py``). Exact duplicates are
dropped later by the pipeline's dedup step under the reason ``duplicate``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from typing import Callable

from kolectra.corpus import languages
from kolectra.corpus.config import CorpusConfig
from kolectra.corpus.text import is_blank

Filter = Callable[[str, CorpusConfig], "str | None"]


def empty(text: str, cfg: CorpusConfig) -> str | None:
    return "empty" if not text else None


def invisible(text: str, cfg: CorpusConfig) -> str | None:
    # Hangul fillers, the Braille blank ... are letters or symbols to Unicode, so a comment made of
    # them passes every length and script rule while showing nothing (corpus/text.py: is_blank)
    return "invisible" if is_blank(text) else None


# what a text's length counts: a letter or number (str.isalnum: Unicode categories L and N; a
# Hangul syllable and a jamo are letters), not a space, punctuation or symbol, nor a Hangul filler
# (a letter to Unicode that draws nothing; cleaning folds U+FFA0 to U+3164)
_FILLERS = "\u115f\u1160\u3164\uffa0"
_CONTENT = re.compile(f"[^\\W_{_FILLERS}]")


def content_length(text: str) -> int:
    """How many letters and numbers ``text`` holds (:data:`_CONTENT`): the length ``min_chars``
    judges. In code points, ``최고.....`` (2 letters, 5 dots) was longer than ``재밌어요`` and kept
    where ``재밌어요`` was dropped (hY7's read of the NSMC reviews)."""
    return len(_CONTENT.findall(text))


@functools.lru_cache(maxsize=16)
def _n_content(n: int) -> re.Pattern:
    # n times: what is not content, then one content character (disjoint classes: no backtracking)
    return re.compile(f"(?:[\\W_{_FILLERS}]*[^\\W_{_FILLERS}]){{{n}}}")


def has_content(text: str, n: int) -> bool:
    """``content_length(text) >= n``, in one C scan that stops at the n-th letter or number."""
    return n <= 0 or _n_content(n).match(text) is not None


def too_short(text: str, cfg: CorpusConfig) -> str | None:
    """Fewer than ``min_chars`` letters and numbers (:func:`content_length`): punctuation, symbols
    and spaces make no text longer (Gopher's word count leaves out the words of punctuation alone,
    Rae et al. 2021, App. A, as datatrove's ``GopherQualityFilter`` counts ``non_symbol_words``)."""
    return "too_short" if not has_content(text, cfg.min_chars) else None


def too_long(text: str, cfg: CorpusConfig) -> str | None:
    # Very long "documents" are usually concatenation accidents (a whole dump on one line) and
    # make Kiwi's per-document work unbounded: every code point counts here, since each costs
    # Kiwi and the shards alike, punctuation or not.
    return "too_long" if len(text) > cfg.max_chars else None


SCRIPTS = languages.SCRIPTS


def script_of(cfg: CorpusConfig) -> str:
    """The configured script, or the language profile's when ``script`` is empty."""
    return cfg.script or languages.profile(cfg.language).script


@functools.lru_cache(maxsize=None)
def _script_class(script: str) -> re.Pattern:
    return re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in SCRIPTS[script]) + "]")


def letter_weight(c: str) -> int:
    """How many letters ``c`` spells: a Hangul syllable its jamo (2, or 3 with a final consonant), as
    a Latin letter spells one sound; any other letter 1. Counted one a syllable, a Korean review with
    an English word (`ost 좋다`, `very good 정말 좋네요`) read as under half Hangul and was dropped."""
    o = ord(c) - 0xAC00
    return (3 if o % 28 else 2) if 0 <= o < 11172 else 1


class _CharTable(dict):
    """A per-character rule's value, computed on a character's first lookup and kept: ``sum(map(
    table.__getitem__, text))`` then walks a text in C (dict lookups), where a generator calling the
    rule on each character took most of the filters' time (docs/benchmarks.md, "The data stages'
    CPU, step by step"). Holds at most ``LIMIT`` characters (a few MB); past that, the rest are
    computed each time."""

    LIMIT = 1 << 16

    def __init__(self, rule: Callable[[str], int]):
        super().__init__()
        self.rule = rule

    def __missing__(self, c: str) -> int:
        value = self.rule(c)
        if len(self) < self.LIMIT:
            self[c] = value
        return value


# a character's letters as :func:`script_share` counts them: 0 for a non-letter
_LETTERS = _CharTable(lambda c: letter_weight(c) if c.isalpha() else 0)


def script_share(text: str, script: str) -> float:
    """Share of the letters (``str.isalpha``, weighted by :func:`letter_weight`) of ``text`` that
    belong to ``script``."""
    letters = sum(map(_LETTERS.__getitem__, text))
    if not letters:
        return 0.0
    inside = sum(map(_LETTERS.__getitem__, _script_class(script).findall(text)))  # × ÷ sit in Latin-1
    return inside / letters


def no_letters(text: str, cfg: CorpusConfig) -> str | None:
    """A text without a letter (a date, a number, a run of marks), with the script check on: it has no
    script share to judge (``2015.01.28`` was counted as ``low_script_share``)."""
    if cfg.min_script_share <= 0.0:
        return None
    return "no_letters" if not any(c.isalpha() for c in text) else None


# Hangul letters that are not a syllable: compatibility jamo (ㅋ ㅠ ㅡ ㄱ ...), conjoining jamo and
# their extensions; a syllable written as conjoining jamo (archaic Hangul, ᄆᆞᄅᆞᆷ: NFC has no
# precomposed form for it) starts with a leading consonant followed by a vowel
_JAMO = re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\ud7b0-\ud7ff]")
_JAMO_SYLLABLE = re.compile("[\u1100-\u115e\ua960-\ua97c][\u1161-\u11a7\ud7b0-\ud7c6]")


def jamo_only(text: str, cfg: CorpusConfig) -> str | None:
    """With the script check on, a text whose letters are all Hangul jamo, without a syllable or
    another letter (``ㅋㅋㅋㅋㅋ``, ``ㅠㅠ ㅠㅠ``, ``ㅁㄴㅇㄹ``, numbers beside them or not): laughter,
    crying or keyboard mash, with no word for a model to learn (the jamo count as Hangul, so
    ``low_script_share`` kept them). Jamo beside a word (``ㅋㅋ 웃기다``) stay: KoELECTRA's cleaning
    removed every jamo (docs/corpus.md, "Read on real reviews")."""
    if cfg.min_script_share <= 0.0 or _JAMO.search(text) is None:  # most texts: one C scan
        return None
    if _JAMO_SYLLABLE.search(text) is not None or any(map(str.isalpha, _JAMO.sub("", text))):
        return None
    return "jamo_only"


def low_script_share(text: str, cfg: CorpusConfig) -> str | None:
    if cfg.min_script_share <= 0.0:
        return None
    return "low_script_share" if script_share(text, script_of(cfg)) < cfg.min_script_share else None


# What makes one emoji of several code points: skin-tone modifiers (Sk: symbols themselves),
# variation selectors, a flag's tag letters, a ZWJ with the emoji it joins on, the second
# regional indicator of a flag. Each sequence counts as its first code point, so 👍🏻, ❤️, 👨‍👩‍👧 and
# 🇰🇷 are one symbol and one character, as 👍 is.
_EMOJI_TAIL = re.compile("(?P<flag>[\U0001f1e6-\U0001f1ff])[\U0001f1e6-\U0001f1ff]"
                         "|[\U0001f3fb-\U0001f3ff\ufe00-\ufe0f\U000e0020-\U000e007f]|\u200d\\S")


def _emoji_head(match: re.Match) -> str:
    return match.group("flag") or ""


_SYMBOLS = _CharTable(lambda c: int(c != "~" and unicodedata.category(c)[0] == "S"))  # 1 for a symbol


def symbol_share(text: str) -> float:
    """Share of characters that are Unicode symbols (categories S*: ★ ♥ ^ emoji ...), except '~',
    which Korean comments use as punctuation (재밌다~). Ordinary punctuation (.!?) is not counted:
    "별로다....." is a normal review. An emoji sequence is one character (:data:`_EMOJI_TAIL`)."""
    text = _EMOJI_TAIL.sub(_emoji_head, text)
    if not text:
        return 0.0
    return sum(map(_SYMBOLS.__getitem__, text)) / len(text)


def symbols(text: str, cfg: CorpusConfig) -> str | None:
    if cfg.max_symbol_ratio >= 1.0:
        return None
    return "symbols" if symbol_share(text) > cfg.max_symbol_ratio else None


# str.isalnum as one C scan: re's word class is Py_UNICODE_ISALNUM or "_" (CPython's _sre), so a
# word character other than "_" is exactly an isalnum one (tests/test_corpus_filters_fast.py)
_ALNUM = re.compile(r"[^\W_]")


def repeated_ngram_share(text: str, n: int = 2, min_count: int = 3) -> float:
    """Share of eojeol characters inside word n-grams that occur at least ``min_count`` times,
    each character counted once (after Gopher's duplicate n-gram fraction, Rae et al. 2021,
    App. A). ``min_count`` 3 keeps a phrase said twice in a short comment, which is style, and
    catches "핵노잼 핵노잼 핵노잼 핵노잼" (the bigram 핵노잼 핵노잼 three times; said three times, a word
    makes the bigram twice). Eojeol are the tokens holding a letter or digit: a spaced ellipsis
    or run of marks ("재밌었어요 . . . .", "~ ~ ~") is not a repeated word."""
    words = [w for w in text.split() if _ALNUM.search(w)]
    if len(words) < n:
        return 0.0
    grams = list(zip(*(words[i:] for i in range(n))))  # the n-grams, as tuples of n words
    if not grams or len(grams) < min_count:  # no n-gram can occur min_count times: the usual short review
        return 0.0
    counts = Counter(grams)
    if max(counts.values()) < min_count:
        return 0.0
    dup = [False] * len(words)
    for i, g in enumerate(grams):
        if counts[g] >= min_count:
            for j in range(i, i + n):
                dup[j] = True
    total = sum(len(w) for w in words)
    return sum(len(w) for w, d in zip(words, dup) if d) / total


def repetitive(text: str, cfg: CorpusConfig) -> str | None:
    if cfg.max_repetition >= 1.0:
        return None
    return "repetitive" if repeated_ngram_share(text) > cfg.max_repetition else None


def is_boilerplate_line(line: str, compiled: languages.Compiled) -> bool:
    """A line holding a notice phrase, or matching a line pattern (bylines) as a whole."""
    low = line.lower()
    if any(p in low for p in compiled.boilerplate):
        return True
    stripped = line.strip()
    return bool(stripped) and compiled.boilerplate_line is not None and compiled.boilerplate_line.fullmatch(stripped) is not None


def strip_boilerplate(text: str, cfg: CorpusConfig) -> tuple[str, int]:
    """``text`` without its boilerplate lines, and how many lines went (0: ``text`` unchanged)."""
    if not cfg.drop_boilerplate:
        return text, 0
    compiled = languages.compiled(cfg.language, tuple(cfg.boilerplate_phrases))
    lines = text.split("\n")
    kept = [line for line in lines if not is_boilerplate_line(line, compiled)]
    if len(kept) == len(lines):
        return text, 0
    return "\n".join(kept).strip(), len(lines) - len(kept)


def boilerplate(text: str, cfg: CorpusConfig) -> str | None:
    """Whole-document check (after :func:`strip_boilerplate` this only fires on what it left)."""
    if not cfg.drop_boilerplate:
        return None
    return "boilerplate" if strip_boilerplate(text, cfg)[1] else None


FILTERS: tuple[Filter, ...] = (empty, invisible, too_short, too_long, no_letters, jamo_only, low_script_share, symbols,
                               repetitive, boilerplate)
# exact duplicates (steps.py, KeepFirstCopies) and near duplicates (neardup.py) are counted with the filters
DROP_REASONS: tuple[str, ...] = tuple(f.__name__ for f in FILTERS) + ("duplicate", "near_duplicate")


def first_failure(text: str, cfg: CorpusConfig, filters: tuple[Filter, ...] = FILTERS) -> str | None:
    for f in filters:
        reason = f(text, cfg)
        if reason is not None:
            return reason
    return None


@functools.lru_cache(maxsize=16)
def active(cfg: CorpusConfig) -> tuple[Filter, ...]:
    """The filters ``cfg`` switches on, in order (the others would return None on every text)."""
    no_script = cfg.min_script_share <= 0.0
    off = {no_letters: no_script, jamo_only: no_script, low_script_share: no_script, symbols: cfg.max_symbol_ratio >= 1.0,
           repetitive: cfg.max_repetition >= 1.0, boilerplate: not cfg.drop_boilerplate}
    return tuple(f for f in FILTERS if not off.get(f, False))


def judge(text: str, cfg: CorpusConfig) -> tuple[str, str | None]:
    """``(text to keep, None)`` or ``(text, drop reason)``: boilerplate lines removed first; a
    document that had some and is empty (or too short, in :func:`content_length`) without them is
    ``boilerplate``."""
    kept, removed = strip_boilerplate(text, cfg)
    if removed and not has_content(kept, max(cfg.min_chars, 1)):
        return kept, "boilerplate"
    return kept, first_failure(kept, cfg, _after_strip(cfg))


@functools.lru_cache(maxsize=16)
def _after_strip(cfg: CorpusConfig) -> tuple[Filter, ...]:
    """:func:`active` without :func:`boilerplate`, for a text :func:`strip_boilerplate` already
    went through: what it keeps are the lines no phrase or pattern matched (the first and last
    stripped of spaces, which can neither add a phrase nor change a stripped line's match), so a
    second pass finds none, and running it cost a tenth of the filters."""
    return tuple(f for f in active(cfg) if f is not boilerplate)
