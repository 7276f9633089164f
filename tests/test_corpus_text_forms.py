"""corpus/text.py: composing decomposed Hangul touches nothing else (kept apart from
test_corpus_text.py, whose text-only checks never reach the composition with other forms)."""

import unicodedata

from kolectra.corpus import text

HAN_NFD = unicodedata.normalize("NFD", "한국어")


def test_composing_nfd_hangul_leaves_compatibility_characters_as_they_are():
    # nfc() rewrites only text that is not NFC already: a document with decomposed Hangul goes
    # through the normaliser, and there compatibility jamo (laughter, crying), circled numbers,
    # ligatures and superscripts must come out unchanged (NFKC would fold every one of them)
    others = "ㅋㅋ ㅠㅠ ① ﬁ x²"
    assert text.normalize(HAN_NFD + " " + others) == "한국어 " + others
    assert text.nfc(HAN_NFD + others) == "한국어" + others
