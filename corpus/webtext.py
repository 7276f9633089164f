"""Web-text cleaning rules of the corpus stage (pure ``str -> str``), off by default and switched
on by ``corpus.config.production_config()``: HTML, personal data, runaway repeats.

- :func:`strip_html` - drop ``<script>``/``<style>`` blocks, comments and tags (block tags become
  line breaks so paragraphs do not glue together), then unescape entities. Tags go first, so an
  escaped ``&lt;b&gt;`` in the text survives as the literal ``<b>``.
- :func:`mask_pii` - URLs and e-mail addresses (any language), then the language profile's
  personal-data patterns (``corpus/languages.py``; Korean: resident registration numbers
  (주민등록번호), card and phone numbers) become the placeholders in :data:`PLACEHOLDERS`; the model
  should learn that a phone number goes here, not whose it is (cf. the PII masking of
  KoELECTRA/KcELECTRA-style web corpora).
- :func:`shorten_repeats` - a character repeated more than ``max_repeat`` times is cut to
  ``max_repeat`` (ㅋㅋㅋㅋㅋ -> ㅋㅋ), as soynlp's ``repeat_normalize`` does for Korean comments;
  digits and '.' are left alone (1000000, ...).
"""

from __future__ import annotations

import html
import re

from kolectra.corpus import languages

PLACEHOLDERS = {k: f"<{k}>" for k in ("url", "email", "rrn", "ssn", "card", "phone")}

_SCRIPT_STYLE = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_BLOCK_TAG = re.compile(r"</?(?:br|p|div|li|ul|ol|tr|table|h[1-6]|blockquote|section|article)\b[^<>]{0,500}>", re.IGNORECASE)
_TAG = re.compile(r"</?(?!(?:url|email|rrn|ssn|card|phone)>)[A-Za-z][A-Za-z0-9]*\b[^<>]{0,500}>")  # placeholders stay

# Order matters: a URL may contain an e-mail-like or digit run, so the universal rules go first;
# the profile orders its own (an RRN looks like a phone number).
_UNIVERSAL_PII = (
    ("url", re.compile(r"(?:https?://|www\.)[^\s<>\"']+", re.IGNORECASE)),
    # ASCII only: Korean writes particles and whole phrases onto an address with no space
    # (abc@example.com으로 보내주세요), and \w (Hangul included) took them into the <email>
    ("email", re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")),
)


def strip_html(text: str) -> str:
    if "<" in text:
        text = _SCRIPT_STYLE.sub(" ", text)
        text = _COMMENT.sub(" ", text)
        text = _BLOCK_TAG.sub("\n", text)
        text = _TAG.sub("", text)
    return html.unescape(text) if "&" in text else text


def mask_pii(text: str, language: str = "ko") -> str:
    for kind, pattern in _UNIVERSAL_PII + languages.compiled(language).pii:
        text = pattern.sub(PLACEHOLDERS[kind], text)
    return text


def shorten_repeats(text: str, max_repeat: int) -> str:
    if max_repeat <= 0:
        return text
    pattern = re.compile(r"([^\d\s.])\1{%d,}" % max_repeat)
    return pattern.sub(lambda m: m.group(1) * max_repeat, text)
