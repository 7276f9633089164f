"""Web-text cleaning rules of the corpus stage (pure ``str -> str``), off by default and switched
on by ``corpus.config.production_config()``: HTML, personal data, runaway repeats.

- :func:`strip_html` - drop ``<script>``/``<style>`` blocks, comments and tags (block tags become
  line breaks so paragraphs do not glue together), then unescape entities. Tags go first, so an
  escaped ``&lt;b&gt;`` in the text survives as the literal ``<b>``.
- :func:`mask_pii` - URLs and e-mail addresses (any language), then the language profile's
  personal-data patterns (``corpus/languages.py``; Korean: resident registration numbers
  (주민등록번호), card numbers passing their check digit, phone numbers) become the placeholders
  in :data:`PLACEHOLDERS`; the model should learn that a phone number goes here, not whose it is
  (cf. the PII masking of KoELECTRA/KcELECTRA-style web corpora).
- :func:`shorten_repeats` - a character repeated more than ``max_repeat`` times is cut to
  ``max_repeat`` (ㅋㅋㅋㅋㅋ -> ㅋㅋ), as soynlp's ``repeat_normalize`` does for Korean comments;
  digits and '.' are left alone (1000000, ...), and a Latin letter keeps runs of up to three:
  Roman numerals (III, VIII), ``www``, ``AAA`` and the ``OOO`` written for a withheld name are
  words, and a run of three is where they end.
"""

from __future__ import annotations

import functools
import html
import re

from kolectra.corpus import languages

PLACEHOLDERS = {k: f"<{k}>" for k in ("url", "email", "rrn", "ssn", "card", "phone")}

_SCRIPT_STYLE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_BLOCK_TAG = re.compile(r"</?(?:br|p|div|li|ul|ol|tr|table|h[1-6]|blockquote|section|article)\b[^<>]{0,500}>", re.IGNORECASE)
# A tag is an HTML element's name (the living standard's, a few obsolete ones web pages still
# carry, svg and math), a custom element (<my-widget>) or a namespaced one (Word's <o:p>). Any word
# in angle brackets is not: Korean reviews write titles that way (<DOA>, <Love Letter>; counted in
# docs/artifacts.md, corpus 16), and the placeholders (<url>, <phone>) must stay.
_ELEMENTS = (
    "a abbr address area article aside audio b base bdi bdo blockquote body br button canvas caption "
    "cite code col colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe img input ins "
    "kbd label legend li link main map mark menu meta meter nav noscript object ol optgroup option "
    "output p param picture pre progress q rp rt ruby s samp script search section select slot small "
    "source span strong style sub summary sup table tbody td template textarea tfoot th thead time "
    "title tr track u ul var video wbr "
    "acronym basefont big blink center font frame frameset marquee nobr noframes strike tt "
    "svg math"
).split()
_TAG = re.compile(r"</?(?:(?i:%s)|(?:[a-z][a-z0-9]*-[a-z0-9-]*)|(?:[A-Za-z][A-Za-z0-9]*:[A-Za-z][A-Za-z0-9-]*))"
                  r"(?![\w:-])[^<>]{0,500}>" % "|".join(sorted(_ELEMENTS, key=len, reverse=True)))

# Order matters: a URL may contain an e-mail-like or digit run, so the universal rules go first;
# the profile orders its own (an RRN looks like a phone number).
_UNIVERSAL_PII = (
    # a URL ends at Hangul: Korean glues the next words on with no space (...com/1234어느, www.x.com에);
    # in the NSMC reviews every URL holding Hangul was so, none a Korean path (which keeps its tail)
    ("url", re.compile(r"(?:https?://|www\.)[^\s<>\"'\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]+", re.IGNORECASE)),
    # ASCII only (languages.EMAIL, which the profiles' e-mail line reads too): Korean writes particles
    # and whole phrases onto an address with no space (abc@example.com으로 보내주세요)
    ("email", re.compile(languages.EMAIL)),
)


def strip_html(text: str) -> str:
    if "<" in text:
        text = _SCRIPT_STYLE.sub(" ", text)
        text = _COMMENT.sub(" ", text)
        text = _BLOCK_TAG.sub("\n", text)
        text = _TAG.sub("", text)
    return html.unescape(text) if "&" in text else text


def luhn_valid(digits: str) -> bool:
    """The check digit every payment card number carries (ISO/IEC 7812): four groups of four digits
    that fail it are not a card (a run of years, 2018 2019 2020 2021), and stay text."""
    total = 0
    for i, d in enumerate(int(c) for c in reversed(digits) if c.isdigit()):
        total += d if i % 2 == 0 else (2 * d - 9 if d > 4 else 2 * d)
    return total % 10 == 0


_VALID = {"card": luhn_valid}  # a match of these kinds is masked only when it passes the check


def mask_pii(text: str, language: str = "ko") -> str:
    for kind, pattern in _UNIVERSAL_PII + languages.compiled(language).pii:
        placeholder, valid = PLACEHOLDERS[kind], _VALID.get(kind)
        text = pattern.sub(placeholder if valid is None else
                           (lambda m: placeholder if valid(m.group()) else m.group()), text)
    return text


LATIN_RUN = 3  # Roman numerals repeat a letter up to three times (III, XXX, CCC, MMM)


@functools.lru_cache(maxsize=16)
def _repeats(max_repeat: int) -> tuple:
    """:func:`shorten_repeats`' two patterns, compiled once, each with its replacement (the run's
    character so many times): formatted and looked up in ``re``'s cache on every call, they took
    40 % of the rule (docs/benchmarks.md)."""
    latin = max(max_repeat, LATIN_RUN)
    return (re.compile(r"([A-Za-z])\1{%d,}" % latin), lambda m: m.group(1) * latin,
            re.compile(r"([^\d\s.A-Za-z])\1{%d,}" % max_repeat), lambda m: m.group(1) * max_repeat)


def shorten_repeats(text: str, max_repeat: int) -> str:
    if max_repeat <= 0:
        return text
    latin, latin_run, other, other_run = _repeats(max_repeat)
    return other.sub(other_run, latin.sub(latin_run, text))
