"""Table tests for the corpus stage's text rules (corpus/text.py) and filters (corpus/filters.py)."""

import dataclasses
import unicodedata

import pytest

from kolectra.core.config import ConfigError, override
from kolectra.corpus import filters, text
from kolectra.corpus.config import CorpusConfig, default_config, production_config

HAN_NFC = "한국어 텍스트"
HAN_NFD = unicodedata.normalize("NFD", HAN_NFC)


@pytest.mark.parametrize(
    "raw, expected",
    [
        (HAN_NFD, HAN_NFC),  # conjoining jamo -> precomposed syllables
        ("ㅋㅋㅋ ㅠㅠ 재밌다", "ㅋㅋㅋ ㅠㅠ 재밌다"),  # compatibility jamo untouched (NFKC would not be)
        ("ＡＢＣ１２３！？", "ABC123!?"),  # full-width ASCII folded
        ("영화\u3000최고", "영화 최고"),  # ideographic space
        ("\ufeff첫줄", "첫줄"),  # BOM
        ("띄\u200b어\u200d쓰\u2060기", "띄어쓰기"),  # zero-width characters
        ("a\x00b\x07c\x7fd", "abcd"),  # controls
        ("bi\u202edi\u200f", "bidi"),  # bidi overrides and marks
        ("lone\ud800surrogate", "lonesurrogate"),
        ("  여러   칸\t\t탭  ", "여러 칸 탭"),
        ("첫 문단\r\n\r\n  둘째 문단 \n", "첫 문단\n둘째 문단"),  # a break survives as one newline
        ("\uffa1\uffa4", "ㄱㄴ"),  # half-width Hangul -> compatibility jamo
        ("①②", "①②"),  # other compatibility characters are not NFKC-folded
        ("", ""),
        (" \u200b \t", ""),
    ],
)
def test_normalize(raw, expected):
    assert text.normalize(raw) == expected


def test_nfd_hangul_becomes_nfc_bytes():
    assert HAN_NFD.encode("utf-8") != HAN_NFC.encode("utf-8")
    assert text.normalize(HAN_NFD).encode("utf-8") == HAN_NFC.encode("utf-8")


def test_compatibility_jamo_survive_byte_for_byte():
    laugh = "ㅋㅋ"  # U+314B U+314B
    assert text.normalize(laugh).encode("utf-8") == laugh.encode("utf-8")
    assert unicodedata.normalize("NFKC", laugh) != laugh  # why blanket NFKC is banned


@pytest.mark.parametrize(
    "rule",
    [text.strip_invisible, text.fold_width, text.nfc, text.collapse_whitespace, text.normalize],
)
def test_rules_are_idempotent(rule):
    sample = "\ufeffＡ\u3000" + HAN_NFD + "  ㅋㅋ\u200b\n\n끝 "
    once = rule(sample)
    assert rule(once) == once


def _cfg(**kw) -> CorpusConfig:
    return dataclasses.replace(default_config(), **kw)


@pytest.mark.parametrize(
    "doc, expected",
    [
        ("", "empty"),
        ("짧다", "too_short"),
        ("다섯글자다", None),  # exactly min_chars
        ("가" * 20, None),  # exactly max_chars
        ("가" * 21, "too_long"),
    ],
)
def test_filters(doc, expected):
    assert filters.first_failure(doc, _cfg(min_chars=5, max_chars=20)) == expected


@pytest.mark.parametrize(
    "doc, expected",
    [
        # min_chars counts letters and numbers, not punctuation, symbols or spaces (hY7's read of the
        # NSMC reviews: in code points 최고..... was kept and 재밌어요 dropped)
        ("재밌어요", None),
        ("최고.....", "too_short"),
        ("별로 ^^ ~~ !!", "too_short"),
        ("굿 굿 굿", "too_short"),
        ("2015", None),  # numbers count
        ("ㅋ" + "\u3164" * 6, "too_short"),  # a Hangul filler is a letter to Unicode that draws nothing
        ("a_b_c", "too_short"),  # \w's underscore is no letter
        (".....", "too_short"),
    ],
)
def test_min_chars_counts_letters_and_numbers(doc, expected):
    assert filters.first_failure(doc, _cfg(min_chars=4)) == expected


def test_the_default_min_chars_is_four_letters():
    assert default_config().min_chars == production_config().min_chars == 4
    assert filters.content_length("재밌어요!!! ^^") == 4 and filters.content_length("") == 0
    assert [filters.has_content("최고.....", n) for n in (0, 1, 2, 3)] == [True, True, True, False]


def test_boilerplate_leaves_too_little_by_letters():
    # what boilerplate lines leave is judged by letters too: a line of marks is no document
    cfg = production_config()
    assert filters.judge("본문.\n무단 전재 및 재배포 금지", cfg) == ("본문.", "boilerplate")
    assert filters.judge("★★★★★★★\n무단 전재 및 재배포 금지", cfg) == ("★★★★★★★", "boilerplate")
    assert filters.judge("재밌어요\n무단 전재 및 재배포 금지", cfg) == ("재밌어요", None)


@pytest.mark.parametrize(
    "doc, expected",
    [
        ("ㅋㅋㅋㅋㅋ", "jamo_only"),
        ("ㅠㅠ ㅠㅠ ㅠㅠ", "jamo_only"),
        ("ㅁㄴㅇㄹㅁㄴㅇㄹ", "jamo_only"),
        ("ㅇㅇ ㅋㅋ 10점", None),  # 점 is a syllable
        ("4.44 ㄱㄱㄱㄱ", "jamo_only"),  # numbers beside jamo are no word
        ("ᄏᄏᄏᄏ", "jamo_only"),  # conjoining jamo on their own
        ("ᄆᆞᄅᆞᆷ ᄆᆞᄅᆞᆷ", None),  # archaic Hangul: syllables written in conjoining jamo
        ("ㅋㅋㅋㅋ 웃기다", None),
        ("ㅋㅋㅋ good", "low_script_share"),  # another letter: the script share judges it
    ],
)
def test_a_text_of_jamo_alone_is_dropped_where_the_script_check_is_on(doc, expected):
    assert filters.first_failure(doc, production_config()) == expected
    assert filters.first_failure(doc, default_config()) is None  # off by default, as no_letters
    assert "jamo_only" in filters.DROP_REASONS


def test_each_filter_reason_is_a_stats_counter():
    for f in filters.FILTERS:
        assert f.__name__ in filters.DROP_REASONS
    assert "duplicate" in filters.DROP_REASONS


def test_config_rejects_bad_values_and_parses_format():
    assert override(default_config(), ["format=jsonl"]).format == "jsonl"
    with pytest.raises(ConfigError):
        override(default_config(), ["format=xml"])
    with pytest.raises(ConfigError):
        override(default_config(), ["valid_fraction=1.5"])
    with pytest.raises(ConfigError):
        override(default_config(), ["num_shards=-1"])


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("<p>첫 문단</p><p>둘째 <b>강조</b></p>", "첫 문단\n둘째 강조"),
        ("<script>var x = '<b>';</script>본문 &amp; 내용<!-- ad -->", "본문 & 내용"),
        ("수식 a &lt;b&gt; c", "수식 a <b> c"),  # escaped tags are text, not markup
        ("3 < 5 그리고 7 > 2", "3 < 5 그리고 7 > 2"),
        ("&#65313;&#65314; 전각 &#xFFA1;&#x3000;끝", "AB 전각 ㄱ 끝"),  # what entities decode to is width-folded too
        # a title in angle brackets is text; markup is an element's name, a custom or a namespaced one
        ("<DOA> 최고 <Love Letter>, <E.T>", "<DOA> 최고 <Love Letter>, <E.T>"),
        ("<FONT color=red>빨강</FONT><o:p></o:p> <my-card x=1>카드</my-card>", "빨강 카드"),
    ],
)
def test_strip_html(raw, expected):
    assert text.clean(raw, strip_html=True) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("문의 https://example.com/a?b=1 참고", "문의 <url> 참고"),
        ("출처 http://blog.example.com/1234어느 글, www.example.com에서", "출처 <url>어느 글, <url>에서"),
        ("메일 kim.cs+1@example.co.kr 로", "메일 <email> 로"),
        ("주소 gildong7@example.com으로 보내주세요", "주소 <email>으로 보내주세요"),  # the particle is not the address
        ("메일부탁hong.gd@example.co.kr감사합니다", "메일부탁<email>감사합니다"),
        ("번호 010-1234-5678 또는 02)123-4567", "번호 <phone> 또는 <phone>"),
        ("+82 10 1234 5678 연락", "<phone> 연락"),
        ("주민번호 900101-1234567 유출", "주민번호 <rrn> 유출"),
        ("카드 4111-1111-1111-1111 결제", "카드 <card> 결제"),
        ("2018 2019 2020 2021 시즌", "2018 2019 2020 2021 시즌"),  # no card: the check digit fails
        ("2019년 관객 1000000명 돌파", "2019년 관객 1000000명 돌파"),  # plain numbers stay
        ("평점 000000000점 aid=0000012345", "평점 000000000점 aid=0000012345"),  # no phone starts 00
    ],
)
def test_mask_pii(raw, expected):
    assert text.clean(raw, mask_pii=True) == expected
    assert text.clean(expected, mask_pii=True, strip_html=True) == expected  # placeholders are stable


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("ㅋㅋㅋㅋㅋ 웃기다", "ㅋㅋ 웃기다"),
        ("ㅠㅠㅠㅠ 슬퍼!!!!!", "ㅠㅠ 슬퍼!!"),
        ("하하하하하", "하하"),
        ("ㅋㅋ 그대로", "ㅋㅋ 그대로"),
        ("100000원... 비싸", "100000원... 비싸"),  # digits and ellipses untouched
        # a Latin letter keeps three: Roman numerals, www, the OOO of a withheld name
        ("대부 III 최고", "대부 III 최고"), ("Chapter VIII", "Chapter VIII"), ("www.naver.com", "www.naver.com"),
        ("OOO 감독 작품", "OOO 감독 작품"), ("zzzzzzz 졸려", "zzz 졸려"), ("sooooo good", "sooo good"),
    ],
)
def test_shorten_repeats(raw, expected):
    assert text.clean(raw, max_repeat=2) == expected


def test_web_rules_are_off_by_default():
    raw = "<b>ㅋㅋㅋㅋ</b> https://x.kr"
    assert text.clean(raw) == text.normalize(raw) == raw


@pytest.mark.parametrize(
    "doc, expected",
    [
        ("이 영화 정말 재밌었어요 ㅋㅋ", None),
        ("This movie was great, truly", "low_script_share"),
        ("Marvel 영화 중에 최고였다", None),  # a few Latin letters are fine
        # a syllable spells 2-3 letters, as a Latin letter one: counted one a syllable these were under half
        ("ost 좋다", None),
        ("just for 킬링타임~", None),
        ("very good movie 굿", "low_script_share"),
        ("2015.01.28 !!", "no_letters"),  # no script share to judge: it was low_script_share
        ("★★★★★♥♥♥ ^^ 정말 좋아요", "symbols"),  # with 좋아 alone too short since corpus 21: 2 letters
        ("재밌다~! 솔까 좀 별로다.....", None),  # punctuation and ~ are not symbols
        ("정말 최고 영화 정말 최고 영화 정말 최고 영화 정말 최고 영화", "repetitive"),
        ("핵노잼 핵노잼 핵노잼 핵노잼", "repetitive"),
        ("핵노잼 핵노잼 핵노잼", None),  # the bigram twice (documented: a word said four times)
        ("너무 재미있었어요 . . . .", None),  # a spaced ellipsis is not a repeated word
        ("아름다운 영화 ~ ~ ~ ~", None),
        # as "재밌다 최고 👍👍👍👍" (4 symbols in 11): a skin tone does not make an emoji two symbols (8 in
        # 15); "최고 👍🏻👍🏻" was the case until corpus 21, when its 2 letters made it too short
        ("재밌다 최고 👍🏻👍🏻👍🏻👍🏻", None),
        ("모르고 지나친 마음을 알게 된 여자와 몰랐다면 좋았을 마음을 알게 된 여자", None),  # said twice: style
        ("기사 본문입니다. 무단 전재 및 재배포 금지", "boilerplate"),
    ],
)
def test_production_filters(doc, expected):
    from kolectra.corpus.config import production_config

    assert filters.first_failure(doc, production_config()) == expected
    assert filters.first_failure(doc, default_config()) is None  # all off by default


@pytest.mark.parametrize("seq", ["👍🏻", "❤️", "👨\u200d👩\u200d👧", "👨🏽\u200d💻", "🇰🇷", "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"])
def test_an_emoji_sequence_is_one_symbol(seq):
    assert filters.symbol_share(f"가족 영화 {seq}") == filters.symbol_share("가족 영화 ★") == pytest.approx(1 / 7)


def test_script_share_is_parameterised():
    # 한 and 국 spell 3 jamo, 어 2: 8 letters of Hangul beside 4 of Latin
    assert [filters.letter_weight(c) for c in "한국어t"] == [3, 3, 2, 1]
    assert filters.script_share("한국어 text", "hangul") == pytest.approx(8 / 12)
    assert filters.script_share("한국어 text", "latin") == pytest.approx(4 / 12)
    assert filters.script_share("12 !!", "hangul") == 0.0
    with pytest.raises(ConfigError):
        override(default_config(), ["script=klingon"])


def test_composing_nfd_hangul_leaves_compatibility_characters_as_they_are():
    # nfc() rewrites only text that is not NFC already: a document with decomposed Hangul goes
    # through the normaliser, and there compatibility jamo (laughter, crying), circled numbers,
    # ligatures and superscripts must come out unchanged (NFKC would fold every one of them)
    han_nfd = unicodedata.normalize("NFD", "한국어")
    others = "ㅋㅋ ㅠㅠ ① ﬁ x²"
    assert text.normalize(han_nfd + " " + others) == "한국어 " + others
    assert text.nfc(han_nfd + others) == "한국어" + others
