"""Language profiles (corpus/languages.py): what is language-specific lives in one record -
script filter, analyser choice, boilerplate lines, personal data, sentence rules."""

import dataclasses

import pytest

from kolectra.core.config import ConfigError, override
from kolectra.corpus import filters, languages, segment, text, webtext
from kolectra.corpus.config import default_config, production_config


def _cfg(**kw):
    return dataclasses.replace(production_config(), **kw)


def test_every_profile_is_complete_and_compiles():
    for code, p in languages.PROFILES.items():
        assert p.code == code and p.script in languages.SCRIPTS
        c = languages.compiled(code)
        assert c.sentence.pattern and all(kind in webtext.PLACEHOLDERS for kind, _ in c.pii)
        assert p.analyser in ("kiwi", None)
        if p.analyser is None:  # (Kiwi itself is exercised in test_corpus_segment)
            assert isinstance(segment.make_segmenter(code), segment.RuleSegmenter)


def test_config_names_a_known_language_and_script_defaults_to_the_profile():
    assert default_config().language == "ko"
    assert filters.script_of(default_config()) == "hangul"
    assert filters.script_of(override(default_config(), ["language=en"])) == "latin"
    assert filters.script_of(override(default_config(), ["language=en", "script=hangul"])) == "hangul"
    with pytest.raises(ConfigError, match="language"):
        override(default_config(), ["language=xx"])


@pytest.mark.parametrize(
    "language, doc, expected",
    [
        ("ko", "This movie was great, truly", "low_script_share"),
        ("en", "This movie was great, truly", None),
        ("en", "이 영화 정말 재밌었어요 ㅋㅋ", "low_script_share"),
        ("ja", "今日は晴れです。明日も晴れ", None),
    ],
)
def test_script_filter_follows_the_language(language, doc, expected):
    assert filters.judge(doc, _cfg(language=language))[1] == expected


@pytest.mark.parametrize(
    "doc, expected_text, reason",
    [
        # bylines and notices are removed line by line; the article stays
        ("정부가 새 정책을 발표했다.\n홍길동 기자 hong@yna.co.kr", "정부가 새 정책을 발표했다.", None),
        ("(서울=연합뉴스) 김철수 기자 =\n오늘 비가 많이 왔습니다.\nⓒ 연합뉴스", "오늘 비가 많이 왔습니다.", None),
        ("본문 내용이 여기 있습니다.\n<저작권자 © 한국일보 무단전재 및 재배포 금지>", "본문 내용이 여기 있습니다.", None),
        # a document that is nothing but boilerplate is dropped under that reason
        ("기사 본문입니다. 무단 전재 및 재배포 금지", "", "boilerplate"),
        ("이순신 기자", "", "boilerplate"),
        # "기자" inside prose is not a byline
        ("그 기자 정말 연기 잘하더라 최고", "그 기자 정말 연기 잘하더라 최고", None),
        # an e-mail line is ASCII: Korean written round an "@" is a sentence, not an address
        ("고화질있으신분@naver.com연락주세요", "고화질있으신분@naver.com연락주세요", None),
        ("좋은 영화 다시 봐야지\nhong@yna.co.kr", "좋은 영화 다시 봐야지", None),
        # ⓒ starts a copyright line, not a word in circled letters
        ("최고의 영화였다\nⓒⓞⓞⓛ", "최고의 영화였다\nⓒⓞⓞⓛ", None),
    ],
)
def test_korean_boilerplate_lines(doc, expected_text, reason):
    kept, got = filters.judge(doc, _cfg())
    assert (kept, got) == (expected_text, reason)
    assert filters.judge(doc, default_config()) == (doc, None)  # off by default


@pytest.mark.parametrize(
    "doc, expected_text",
    [
        ("Great story.\nBy John Smith", "Great story."),
        ("Great story.\nBY JOHN SMITH", "Great story."),
        ("Great story.\nwritten by Jane Doe", "Great story."),
        # lines are matched ignoring case, but a byline's names are capitalised
        ("I loved it.\nby the way the music was great", "I loved it.\nby the way the music was great"),
        ("I loved it.\nby far the best", "I loved it.\nby far the best"),
    ],
)
def test_english_bylines_are_names(doc, expected_text):
    assert filters.judge(doc, _cfg(language="en")) == (expected_text, None)


def test_extra_boilerplate_phrases_are_configurable():
    cfg = override(production_config(), ['boilerplate_phrases=["광고 문의"]'])
    assert filters.judge("좋은 영화였다 정말로\n광고 문의 환영", cfg) == ("좋은 영화였다 정말로", None)


@pytest.mark.parametrize(
    "language, raw, expected",
    [
        ("ko", "번호 010-1234-5678 주민 900101-1234567", "번호 <phone> 주민 <rrn>"),
        ("en", "call (555) 123-4567 or 555-123-4567, ssn 123-45-6789", "call <phone> or <phone>, ssn <ssn>"),
        ("en", "mail a@b.com at https://x.org", "mail <email> at <url>"),  # universal rules
        ("ko", "ssn 123-45-6789", "ssn 123-45-6789"),  # not a Korean pattern
    ],
)
def test_personal_data_patterns_come_from_the_profile(language, raw, expected):
    assert text.clean(raw, mask_pii=True, language=language) == expected


@pytest.mark.parametrize(
    "language, doc, sentences",
    [
        ("en", 'It costs 1,000.5 dollars. "Really?" Yes!\nNext line', ["It costs 1,000.5 dollars.", '"Really?"', "Yes!", "Next line"]),
        ("ja", "今日は晴れです。明日も晴れ！すごい", ["今日は晴れです。", "明日も晴れ！", "すごい"]),
        # the documents reach the splitter cleaned: ！？ folded to !? still end a Japanese sentence
        ("ja", text.clean("明日も晴れ！すごい？本当"), ["明日も晴れ!", "すごい?", "本当"]),
        ("en", text.clean("Wow！Really？ yes"), ["Wow!Really?", "yes"]),  # English lists no ！
    ],
)
def test_rule_segmenter_without_an_analyser(language, doc, sentences):
    sents, morphs = segment.RuleSegmenter(language).segment(doc)
    assert [doc[s:e] for s, e in sents] == sentences
    # surface spans rebuild every non-space character, in order, sorted and disjoint
    assert "".join(doc[s:e] for s, e, _ in morphs) == "".join(doc.split())
    assert all(a[1] <= b[0] for a, b in zip(morphs, morphs[1:]))
    tags = {doc[s:e]: t for s, e, t in morphs}
    assert tags.get("1,000.5", "N") == "N" and tags.get("。", "P") == "P"
