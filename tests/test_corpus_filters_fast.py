"""The corpus stage's faster per-document code gives what the code it replaced gave (hX, issue of
the data stages' CPU cost): each old form is written out here as the reference, and the new one is
compared with it on every code point where a character rule changed, and on generated texts."""

from __future__ import annotations

import random
import sys
import unicodedata

import pytest

from kolectra.corpus import filters, webtext
from kolectra.corpus import text as T
from kolectra.corpus.config import default_config, production_config

ALL_CHARS = [chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF]


# ---------------------------------------------------------------- the replaced code, as it was


def old_script_share(text: str, script: str) -> float:
    letters = sum(filters.letter_weight(c) for c in text if c.isalpha())
    if not letters:
        return 0.0
    inside = sum(filters.letter_weight(c) for c in filters._script_class(script).findall(text) if c.isalpha())
    return inside / letters


def old_symbol_share(text: str) -> float:
    text = filters._EMOJI_TAIL.sub(filters._emoji_head, text)
    if not text:
        return 0.0
    n = sum(1 for c in text if c != "~" and unicodedata.category(c)[0] == "S")
    return n / len(text)


def old_repeated_ngram_share(text: str, n: int = 2, min_count: int = 3) -> float:
    words = [w for w in text.split() if any(c.isalnum() for c in w)]
    if len(words) < n:
        return 0.0
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    counts: dict[tuple, int] = {}
    for g in grams:
        counts[g] = counts.get(g, 0) + 1
    dup = [False] * len(words)
    for i, g in enumerate(grams):
        if counts[g] >= min_count:
            for j in range(i, i + n):
                dup[j] = True
    total = sum(len(w) for w in words)
    return sum(len(w) for w, d in zip(words, dup) if d) / total


def old_judge(text: str, cfg) -> tuple[str, str | None]:
    kept, removed = filters.strip_boilerplate(text, cfg)
    # what the boilerplate lines leave, by letters and numbers (corpus 21; code points before)
    if removed and filters.content_length(kept) < max(cfg.min_chars, 1):
        return kept, "boilerplate"
    return kept, filters.first_failure(kept, cfg, filters.active(cfg))


def old_clean(text: str, max_repeat: int = 2) -> str:
    """text.clean with the production rules, as it was: the Unicode rules run again after
    strip_html whether or not it changed the text."""
    out = T.nfc(T.fold_width(T.strip_invisible(text)))
    out = webtext.strip_html(out)
    out = T.nfc(T.fold_width(T.strip_invisible(out)))
    out = webtext.mask_pii(out, "ko")
    out = old_shorten_repeats(out, max_repeat)
    return T.collapse_whitespace(out)


def old_shorten_repeats(text: str, max_repeat: int) -> str:
    import re

    if max_repeat <= 0:
        return text
    latin = max(max_repeat, webtext.LATIN_RUN)
    text = re.sub(r"([A-Za-z])\1{%d,}" % latin, lambda m: m.group(1) * latin, text)
    return re.sub(r"([^\d\s.A-Za-z])\1{%d,}" % max_repeat, lambda m: m.group(1) * max_repeat, text)


# ---------------------------------------------------------------- texts


def texts(seed: int = 0, n: int = 3000) -> list[str]:
    """Review-like texts with the characters the rules look at: Hangul syllables with and without a
    final consonant, jamo, Latin, digits, symbols, emoji with modifiers and joiners, flags, marks,
    spaces and line breaks, words repeated so that n-grams recur."""
    rng = random.Random(seed)
    pool = ("재밌다 영화 핵노잼 가 나 각 ㅋㅋ ㅠㅠ good OST III 1,000 2015.01.28 ★ ♥ ^^ ~ ... !! ? "
            "👍🏻 ❤️ 👨\u200d👩\u200d👧 🇰🇷 ½ ² ٣ _ __ x_y Σ ς 漢字 かな \u3164 \u00a0 é e\u0301").split(" ")
    pool += ["\n", " ", "  "]
    out = ["", " ", "\n", "ㅋ", "a", "1", "★"]
    for _ in range(n):
        words = [rng.choice(pool) for _ in range(rng.randint(1, 40))]
        if rng.random() < 0.3:  # a phrase said again and again
            words += words[: rng.randint(1, 3)] * rng.randint(2, 5)
        out.append(rng.choice([" ", "", "\n"]).join(words))
    out += ["".join(rng.choice(ALL_CHARS) for _ in range(rng.randint(1, 60))) for _ in range(500)]
    return out


# ---------------------------------------------------------------- the checks


def test_character_tables_match_the_rules_on_every_code_point():
    letters = [filters._LETTERS[c] for c in ALL_CHARS]
    assert letters == [filters.letter_weight(c) if c.isalpha() else 0 for c in ALL_CHARS]
    symbols = [filters._SYMBOLS[c] for c in ALL_CHARS]
    assert symbols == [int(c != "~" and unicodedata.category(c)[0] == "S") for c in ALL_CHARS]
    # the tables keep at most LIMIT characters, and answer past it all the same
    assert len(filters._LETTERS) <= filters._CharTable.LIMIT


def test_alnum_pattern_is_str_isalnum_on_every_code_point():
    assert [filters._ALNUM.search(c) is not None for c in ALL_CHARS] == [c.isalnum() for c in ALL_CHARS]


def test_content_is_a_letter_or_number_on_every_code_point_and_has_content_counts_it():
    fillers = "\u115f\u1160\u3164\uffa0"  # letters to Unicode that draw nothing
    assert [filters.content_length(c) for c in ALL_CHARS] == [int(c.isalnum() and c not in fillers) for c in ALL_CHARS]
    for t in texts(5, 1500):
        n = sum(c.isalnum() and c not in fillers for c in t)
        assert filters.content_length(t) == n, t
        for k in (0, 1, 4, n, n + 1):
            assert filters.has_content(t, k) == (n >= k), (t, k)


@pytest.mark.parametrize("script", sorted(filters.SCRIPTS))
def test_script_share_as_before(script):
    for t in texts(1):
        assert filters.script_share(t, script) == old_script_share(t, script), t


def test_symbol_share_and_repetition_as_before():
    for t in texts(2):
        assert filters.symbol_share(t) == old_symbol_share(t), t
        for n, min_count in ((2, 3), (1, 2), (3, 2), (2, 1), (2, 0)):
            assert filters.repeated_ngram_share(t, n, min_count) == old_repeated_ngram_share(t, n, min_count), (t, n)


def test_judge_as_before_with_boilerplate_lines():
    cfg = production_config()
    lines = ["무단 전재 및 재배포 금지", "홍길동 기자", "  홍길동 기자  ", "abc@example.com", "좋은 영화였다 정말로",
             "All Rights Reserved", "", " ", "재밌다 재밌다 재밌다 재밌다 재밌다", "★★★★★★", "ㅋㅋ"]
    rng = random.Random(3)
    samples = ["\n".join(rng.choice(lines) for _ in range(rng.randint(1, 6))) for _ in range(3000)] + texts(3, 1000)
    for c in (cfg, default_config()):
        for t in samples:
            assert filters.judge(t, c) == old_judge(t, c), t


def test_shorten_repeats_as_before():
    rng = random.Random(4)
    runs = ["ㅋ" * k for k in range(1, 7)] + ["a" * k for k in range(1, 7)] + ["1" * 5, "....", "!!!!!", "  ", "I" * 4, "ㅠ" * 3]
    samples = ["".join(rng.choice(runs) for _ in range(rng.randint(1, 10))) for _ in range(2000)] + texts(4, 500)
    for t in samples:
        for m in (0, 1, 2, 3, 5):
            assert webtext.shorten_repeats(t, m) == old_shorten_repeats(t, m), (t, m)



def test_clean_as_before_on_every_code_point_and_on_web_text():
    """The Unicode rules after strip_html run only when it changed the text: on a text they already
    went through they give it back unchanged (nothing they leave is invisible, foldable or not NFC)."""
    rules = dict(strip_html=True, mask_pii=True, max_repeat=2, language="ko")
    for i in range(0, len(ALL_CHARS), 128):  # every code point, next to others, a combining mark, a joiner
        chunk = ALL_CHARS[i : i + 128]
        for t in ("".join(chunk), "\u0301".join(chunk), "\u200d".join(chunk), "\U0001f468\u200d".join(chunk)):
            assert T.clean(t, **rules) == old_clean(t), repr(t)
    web = ["<b>굵게</b> &amp; 가\u0301", "&lt;p&gt; 그대로", "<script>x</script>본문", "A&B 영화", "1 < 2 & 3 > 2",
           "\uff21\uff22 &#x200b; <p>ㅋㅋㅋㅋ</p>", "&#65313; &#4352;&#4449;", "\u200d&zwj;\U0001f469", "www.example.com 010-1234-5678"]
    rng = random.Random(6)
    for t in web + texts(6, 1000) + ["".join(rng.choice(web + [" ", "\n"]) for _ in range(5)) for _ in range(500)]:
        assert T.clean(t, **rules) == old_clean(t), repr(t)
