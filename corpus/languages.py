"""Per-language profiles of the corpus stage: everything that is specific to a language, in one
frozen record, so a new language is a new entry in :data:`PROFILES`, not a fork of the pipeline.

A profile names
- ``script``: the key in :data:`SCRIPTS` whose share of letters the ``low_script_share`` filter
  asks for (``corpus/filters.py``);
- ``analyser``: ``"kiwi"`` (kiwipiepy: sentences + morphemes) or ``None``, in which case
  ``corpus/segment.py`` falls back to Unicode-aware rules (sentence-final punctuation, word and
  punctuation runs by Unicode category);
- ``boilerplate`` phrases (a line holding one is boilerplate) and ``boilerplate_lines`` regexes
  (a line matching one entirely is boilerplate, e.g. Korean news bylines ``홍길동 기자``);
- ``pii``: the language's personal-data patterns, run after the universal URL and e-mail rules of
  ``corpus/webtext.py`` (Korean: resident registration, card and phone numbers);
- ``sentence_end``: the characters that close a sentence for the fallback splitter.

Patterns are stored as strings (profiles travel pickled to Beam workers) and compiled once per
process by :func:`compiled`.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from kolectra.core.errors import UserInputError

# Letter ranges per script (inclusive code points). Hangul includes the compatibility jamo:
# ㅋㅋ and ㅠㅠ are Korean text. Written out, not derived from unicodedata, so the filter does not
# change with the Python version.
SCRIPTS: dict[str, tuple[tuple[int, int], ...]] = {
    "hangul": ((0xAC00, 0xD7A3), (0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xD7B0, 0xD7FF)),
    "latin": ((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F)),
    "han": ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0xF900, 0xFAFF)),
    "kana": ((0x3040, 0x30FF),),
    "kana_han": ((0x3040, 0x30FF), (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0xF900, 0xFAFF)),
}

# Universal boilerplate: notices that mean "this is not prose" in any language's web pages.
COMMON_BOILERPLATE = ("all rights reserved", "enable javascript", "lorem ipsum")
# shared by every profile: a line that is only an e-mail address (news footers), and card numbers.
# ASCII only (webtext's e-mail mask reads it too): \w took Hangul, so a Korean sentence written
# round an "@" (고화질있으신분@naver.com연락주세요) was one "address", a boilerplate line, its review dropped
EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"
EMAIL_LINE = r"<email>|" + EMAIL
CARD = ("card", r"(?<!\d)\d{4}(?:[- ]\d{4}){3}(?!\d)")


@dataclasses.dataclass(frozen=True)
class Profile:
    code: str  # ISO 639-1, the value of CorpusConfig.language
    name: str
    script: str  # key in SCRIPTS
    analyser: str | None  # "kiwi", or None for the Unicode rule fallback
    boilerplate: tuple[str, ...] = ()  # lower-cased phrases; a line containing one is boilerplate
    boilerplate_lines: tuple[str, ...] = ()  # regexes a whole (stripped) line must match
    pii: tuple[tuple[str, str], ...] = ()  # (placeholder kind, regex), in order
    sentence_end: str = ".!?"  # fallback sentence splitter: these close a sentence


KOREAN = Profile(
    code="ko",
    name="Korean",
    script="hangul",
    analyser="kiwi",
    boilerplate=COMMON_BOILERPLATE + (
        "무단 전재 및 재배포 금지", "무단전재 및 재배포 금지", "무단 전재-재배포 금지", "무단전재-재배포 금지",
        "무단 전재 및 재배포금지", "무단전재 재배포 금지", "저작권자 ©", "저작권자(c)", "저작권자 (c)",
        "자바스크립트를 활성화", "기사제보 및 보도자료",
    ),
    boilerplate_lines=(
        # news bylines: "홍길동 기자", "홍길동 기자 hong@yna.co.kr", "(서울=연합뉴스) 홍길동 기자 ="
        r"(?:\([가-힣]{2,8}=[가-힣A-Za-z]{2,10}\)\s*)?[가-힣]{2,4}\s?(?:기자|특파원|통신원|객원기자)\s*=?\s*(?:" + EMAIL_LINE + ")?",
        EMAIL_LINE,
        r"(?:ⓒ|©|\(c\))(?![Ⓐ-ⓩ])\s*\S{1,20}",  # "ⓒ 연합뉴스"; not a word in circled letters (ⓒⓞⓞⓛ)
    ),
    pii=(
        # 주민등록번호: YYMMDD-GNNNNNN (G = 1..8); before phone, which its digits would also match
        ("rrn", r"(?<!\d)\d{6}\s?-\s?[1-8]\d{6}(?!\d)"),
        CARD,
        # 010-1234-5678, 02)123-4567, +82 10 1234 5678; no Korean area or mobile code starts 00, so
        # a run of zeros (a "000000000점" rating, a bare id 0000012345) is not a phone number
        ("phone", r"(?<![\d+])(?:\+82[- .]?0?|0)[1-9]\d?[- .)]?\d{3,4}[- .]?\d{4}(?!\d)"),
    ),
    sentence_end=".!?。…",
)

ENGLISH = Profile(
    code="en",
    name="English",
    script="latin",
    analyser=None,
    boilerplate=COMMON_BOILERPLATE + ("cookie policy", "click here to subscribe"),
    # a byline is capitalised names (By John Smith, BY JOHN SMITH): the lines are matched ignoring
    # case, so the names hold their own case ((?-i:...)); without it "by the way" was a byline
    boilerplate_lines=(r"(?:by|written by)\s+(?-i:[A-Z][A-Za-z]+(?:\s+[A-Z][A-Za-z]+){0,2})", EMAIL_LINE),
    pii=(
        ("ssn", r"(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)"),
        CARD,
        ("phone", r"(?<![\d+])(?:\+1[- .]?)?\(?\d{3}\)?[- .]\d{3}[- .]\d{4}(?!\d)"),
    ),
    sentence_end=".!?",
)

JAPANESE = Profile(
    code="ja",
    name="Japanese",
    script="kana_han",
    analyser=None,  # no analyser wired in: the Unicode rules segment it
    boilerplate=COMMON_BOILERPLATE + ("無断転載を禁じます", "無断転載禁止"),
    pii=(CARD, ("phone", r"(?<!\d)0\d{1,4}-\d{1,4}-\d{4}(?!\d)")),
    sentence_end="。！？!?",
)

PROFILES: dict[str, Profile] = {p.code: p for p in (KOREAN, ENGLISH, JAPANESE)}


def profile(code: str) -> Profile:
    try:
        return PROFILES[code]
    except KeyError:
        raise UserInputError(f"unknown language {code!r}; known: {sorted(PROFILES)}") from None


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A profile's patterns, compiled (one per process, via :func:`compiled`)."""

    boilerplate: tuple[str, ...]
    boilerplate_line: re.Pattern | None
    pii: tuple[tuple[str, re.Pattern], ...]
    sentence: re.Pattern


@functools.lru_cache(maxsize=None)
def compiled(code: str, extra_boilerplate: tuple[str, ...] = ()) -> Compiled:
    p = profile(code)
    lines = "|".join(f"(?:{r})" for r in p.boilerplate_lines)
    # Closing marks of space-separated scripts (".") end a sentence only before whitespace or the
    # end (1,000.5 and e.g. stay whole); full-width ones (。！？) end it wherever they stand, and so
    # do the ASCII marks cleaning folds them to (！ -> !: corpus/text.py, fold_width), which are all
    # that reach the splitter (with ！ listed, 明日も晴れ！すごい was one sentence once cleaned).
    folded = {chr(ord(c) - 0xFEE0) for c in p.sentence_end if 0xFF01 <= ord(c) <= 0xFF5E}
    spaced = re.escape("".join(c for c in p.sentence_end if ord(c) < 0x2E80 and c not in folded))
    wide = re.escape("".join(c for c in p.sentence_end if ord(c) >= 0x2E80 or c in folded))
    ends = [f"[{spaced}]+{_CLOSERS}*(?=\\s|$)"] if spaced else []
    ends += [f"[{wide}]+{_CLOSERS}*"] if wide else []
    ends += ["\n", "$"]
    return Compiled(
        boilerplate=tuple(s.lower() for s in p.boilerplate + tuple(extra_boilerplate)),
        boilerplate_line=re.compile(lines, re.IGNORECASE) if lines else None,
        pii=tuple((kind, re.compile(rx)) for kind, rx in p.pii),
        sentence=re.compile("[^\n]*?(?:" + "|".join(ends) + ")"),
    )


_CLOSERS = "[\"'”’)\\]」』]"  # quotes and brackets that close with the sentence
