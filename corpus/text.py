"""Text normalisation for the corpus stage: pure ``str -> str`` rules, applied before filtering,
dedup and morpheme analysis, so every later offset points into the cleaned text.

Order matters and is fixed by :func:`normalize`:

1. :func:`strip_invisible` - drop BOM, zero-width and bidi marks, other format (Cf) and control
   (Cc) characters and lone surrogates (``json.loads`` accepts ``"\\ud800"``; it cannot be written
   back as UTF-8). Control characters that are whitespace (tab, newline ...) are kept for step 4.
   A zero-width joiner between two emoji (👨‍👩‍👧) and a flag's tag sequence are part of the emoji
   and kept; stray ones are dropped.
2. :func:`fold_width` - full-width ASCII (U+FF01-FF5E) to ASCII, ideographic space to a space,
   half-width Hangul letters (U+FFA1-FFDC) to compatibility jamo and the half-width filler U+FFA0
   to the Hangul filler U+3164. These are the only NFKC mappings we want: blanket NFKC would
   also rewrite other compatibility characters (circled numbers, ligatures, superscripts), and
   NFKD/NFKC of compatibility jamo used on their own (ㅋㅋ, ㅠㅠ - laughter and crying in Korean
   web text) must stay as they are.
3. :func:`nfc` - canonical composition; NFD Hangul (conjoining jamo U+1100..) becomes precomposed
   syllables, the form Kiwi and the vocabulary expect.
4. :func:`collapse_whitespace` - any whitespace run becomes one space, or one newline when the run
   holds a line break (paragraph structure survives for multi-line JSONL documents); ends stripped.
"""

from __future__ import annotations

import re
import unicodedata

from kolectra.corpus import webtext

# Zero-width, bidi and other format characters (Unicode category Cf), non-whitespace C0/C1
# controls and surrogates. Listed explicitly (not computed from unicodedata at import) so the set
# does not change silently with the Python version's Unicode database. The zero-width joiner and
# the tag characters are in _JOINERS instead: inside emoji sequences they are part of the emoji.
_INVISIBLE_CHARS = (
    "\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f"  # C0/C1 controls except \t\n\v\f\r, \x1c-\x1f, \x85
    "\u00ad"  # soft hyphen
    "\u061c"  # Arabic letter mark
    "\u180e"  # Mongolian vowel separator
    "\u200b\u200c\u200e\u200f"  # zero-width space and non-joiner, LRM, RLM
    "\u202a-\u202e"  # bidi embeddings and overrides
    "\u2060-\u2064\u2066-\u206f"  # word joiner, invisible operators, bidi isolates
    "\ufeff"  # BOM / zero-width no-break space
    "\ufff9-\ufffb"  # interlinear annotation
    "\ud800-\udfff"  # lone surrogates
)
_INVISIBLE = re.compile("[" + _INVISIBLE_CHARS + "]+")

# Extended_Pictographic, approximately (Python's unicodedata lacks the property): what a ZWJ
# sequence joins (👨‍👩‍👧, 🏳️‍🌈, 👨🏽‍💻, ❤️‍🔥). Modifiers U+1F3FB-1F3FF fall in the last range.
_EMOJI = ("\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u2199\u21a9\u21aa\u231a\u231b\u2328\u2388\u23cf"
          "\u23e9-\u23f3\u23f8-\u23fa\u24c2\u25aa\u25ab\u25b6\u25c0\u25fb-\u25fe\u2600-\u27bf\u2934\u2935"
          "\u2b05-\u2b07\u2b1b\u2b1c\u2b50\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff")
_TAGS = "\U000e0000-\U000e007f"
_JOINERS = re.compile(f"[\u200d{_TAGS}]")
# A ZWJ between two emoji (the first may end in VS16) and a subdivision flag's tag sequence
# (🏴 + tag letters + cancel tag: 🏴󠁧󠁢󠁳󠁣󠁴󠁿) are kept; every other ZWJ or tag character is stray and goes.
_STRAY_JOINERS = re.compile(
    f"(?P<keep>(?<=[{_EMOJI}\ufe0f])\u200d(?=[{_EMOJI}])|\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f)"
    f"|[\u200d{_TAGS}]")

# What shows nothing but is not whitespace and not removed above (most are letters or marks to
# Unicode): Hangul fillers (U+3164, U+FFA0 - used to post "empty" comments and nicknames -,
# U+115F, U+1160), the Braille blank, the combining grapheme joiner, Khmer inherent vowels,
# Mongolian and other variation selectors, unassigned specials, shorthand format controls and
# invisible musical symbols. Inside text they stay (VS16 belongs to emoji, fillers to old Hangul);
# a document of nothing else is dropped as ``invisible`` (corpus/filters.py).
_BLANK = re.compile(
    "[\\s" + _INVISIBLE_CHARS + "\u200d" + _TAGS + "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164"
    "\ufe00-\ufe0f\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d159\U0001d173-\U0001d17a\U000e0100-\U000e01ef]*")

_WIDTH = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}  # ！..～ -> !..~
_WIDTH[0x3000] = 0x20  # ideographic space
# Half-width Hangul letters (U+FFA0-FFDC) -> the compatibility jamo of the same name
# (HALFWIDTH HANGUL LETTER KIYEOK -> HANGUL LETTER KIYEOK), and the half-width filler to the
# compatibility one (U+FFA0 -> U+3164). NFKC would map them to *conjoining* jamo (U+1100..),
# which then stand alone or glue onto neighbouring syllables.
def _halfwidth_hangul() -> dict[int, int]:
    out = {0xFFA0: 0x3164}  # HALFWIDTH HANGUL FILLER: no "LETTER" in its name
    for cp in range(0xFFA0, 0xFFDD):
        name = unicodedata.name(chr(cp), "")
        if name.startswith("HALFWIDTH HANGUL LETTER"):
            out[cp] = ord(unicodedata.lookup(name.replace("HALFWIDTH ", "", 1)))
    return out


_WIDTH.update(_halfwidth_hangul())

_WHITESPACE = re.compile(r"\s+")
_NEEDS_COLLAPSE = re.compile(r"[^\S ]|  ")  # whitespace other than a lone ASCII space
_LINE_BREAKS = frozenset("\n\r\x85\u2028\u2029")


def _keep_emoji_joiner(match: re.Match) -> str:
    return match.group("keep") or ""


def strip_invisible(text: str) -> str:
    text = _INVISIBLE.sub("", text)
    if _JOINERS.search(text) is None:  # the usual case: one more C-level scan
        return text
    return _STRAY_JOINERS.sub(_keep_emoji_joiner, text)


def is_blank(text: str) -> bool:
    """Nothing in ``text`` shows: whitespace and the invisible characters above only."""
    return _BLANK.fullmatch(text) is not None


# str.translate looks every character up in the table (3 us on a review); one C regex scan
# first finds that most texts have nothing to fold (0.3 us; measured on NSMC reviews)
_FOLDABLE = re.compile("[" + "".join(re.escape(chr(cp)) for cp in sorted(_WIDTH)) + "]")


def fold_width(text: str) -> str:
    return text.translate(_WIDTH) if _FOLDABLE.search(text) else text


def nfc(text: str) -> str:
    # is_normalized is a fast check; most web text is already NFC.
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def _one_space(match: re.Match) -> str:
    run = match.group(0)
    if run == " ":
        return run
    return "\n" if any(c in _LINE_BREAKS for c in run) else " "


def collapse_whitespace(text: str) -> str:
    if _NEEDS_COLLAPSE.search(text) is None:  # the usual case: only single spaces, one C-level scan
        return text.strip()
    return _WHITESPACE.sub(_one_space, text).strip()


def normalize(text: str) -> str:
    """The corpus stage's cleaning of one document (see the module docstring for the order)."""
    return collapse_whitespace(nfc(fold_width(strip_invisible(text))))


def clean(text: str, *, strip_html: bool = False, mask_pii: bool = False, max_repeat: int = 0,
          language: str = "ko") -> str:
    """:func:`normalize` plus the optional web-text rules of ``corpus/webtext.py``, which run on
    the NFC text before whitespace is collapsed (removed tags leave spaces and line breaks)."""
    if not (strip_html or mask_pii or max_repeat):
        return normalize(text)
    out = nfc(fold_width(strip_invisible(text)))
    if strip_html:
        stripped = webtext.strip_html(out)
        if stripped is not out:  # the same object: no tag or entity, and these rules would give it back unchanged
            out = nfc(fold_width(strip_invisible(stripped)))  # entities may decode to invisible, full-width or decomposed text
    if mask_pii:
        out = webtext.mask_pii(out, language)
    if max_repeat:
        out = webtext.shorten_repeats(out, max_repeat)
    return collapse_whitespace(out)
