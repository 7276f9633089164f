"""Sentence and morpheme spans (corpus/segment.py): pure span rules, then real Kiwi."""

import dataclasses
import gzip
import json

import pytest

from kolectra.corpus import build, segment
from kolectra.corpus.config import default_config


def test_merge_morphs_joins_tokens_sharing_a_character():
    # Kiwi analyses 했 as 하/VV + 었/EP, both at offset 0 with length 1
    tokens = [(0, 1, "VV"), (0, 1, "EP"), (1, 2, "EC"), (4, 2, "NNG"), (6, 0, "JX")]
    assert segment.merge_morphs(tokens) == [[0, 1, "VV+EP"], [1, 3, "EC"], [4, 6, "NNG"]]


@pytest.mark.parametrize(
    "text, spans, expected",
    [
        ("가나. 다라", [(0, 3), (4, 6)], [[0, 3], [4, 6]]),
        ("가나. ~~ 다라", [(0, 3), (7, 9)], [[0, 6], [7, 9]]),  # gap text joins the previous sentence
        ("@@ 가나", [(3, 5)], [[0, 5]]),  # leading text joins the first sentence
        ("가나 ", [(0, 3)], [[0, 2]]),  # trailing space trimmed
        ("가나다라", [(0, 3), (2, 4)], [[0, 3], [3, 4]]),  # overlap removed
        ("  가나  ", [], [[2, 4]]),  # nothing from Kiwi: one sentence over the text
        ("   ", [], []),
    ],
)
def test_cover_sentences(text, spans, expected):
    assert segment.cover_sentences(text, spans) == expected


@pytest.fixture(scope="module")
def segmenter():
    return segment.Segmenter()


@pytest.mark.parametrize(
    "text",
    [
        "영화 진짜 재밌었다ㅠㅠ 최고  ㅋㅋㅋ 갔어요. 배우들 연기도 좋았고!!",
        "😀좋아요 👍🏻 한자漢字도 𝐀𝐁 있다. 둘째 문장\n셋째 문단입니다",
        "됐어요 했는데 뭐임???ㅋㅋ http://example.com/a?b=1 봤음",
    ],
)
def test_kiwi_spans_are_surface_offsets(segmenter, text):
    sentences, morphs = segmenter.segment(text)
    covered = set()
    for s, e in sentences:
        assert 0 <= s < e <= len(text) and text[s:e] == text[s:e].strip()
        covered.update(range(s, e))
    assert all(i in covered for i, c in enumerate(text) if not c.isspace())  # sentences cover the text
    assert [s for s, _ in sentences] == sorted(s for s, _ in sentences)
    prev_end = 0
    for s, e, tag in morphs:
        assert prev_end <= s < e <= len(text) and tag  # sorted, disjoint, non-empty
        assert not text[s:e].isspace() and text[s:e] == text[s:e].strip()
        prev_end = e
    # every non-space character belongs to exactly one morph: the surfaces rebuild each eojeol
    surfaces = "".join(text[s:e] for s, e, _ in morphs)
    assert surfaces == "".join(text.split())


def test_kiwi_on_a_thread_pool_gives_the_same_spans(segmenter):
    texts = ["영화 진짜 재밌었다ㅠㅠ 최고", "", "어제 갔어요. 둘째 문장", "😀좋아요 👍🏻", ""] * 40
    pooled = segment.Segmenter(threads=2)
    assert pooled.kiwi.num_workers == 2 and segmenter.kiwi.num_workers == 1  # 0 asked: the calling thread
    assert pooled.segment_many(texts) == segmenter.segment_many(texts)
    assert pooled.segment("어제 갔어요") == segmenter.segment("어제 갔어요")


def test_irregular_forms_keep_the_surface(segmenter):
    text = "어제 갔어요"
    _, morphs = segmenter.segment(text)
    spans = {text[s:e]: tag for s, e, tag in morphs}
    assert "갔" in spans and "+" in spans["갔"]  # 가/VV + 었/EP merged on the surface 갔
    assert "어요" in spans
    assert all(text[s:e] != "가" for s, e, _ in morphs)  # Kiwi's normalised form never appears


class _Tok:
    def __init__(self, start, length, tag):
        self.start, self.len, self.tag, self.end = start, length, tag, start + length


@pytest.mark.parametrize(
    "sents",  # Kiwi's tokenize(split_sents=True): a list of tokens per sentence
    [
        [[_Tok(0, 1, "VV"), _Tok(0, 1, "EP"), _Tok(1, 2, "EC")], [_Tok(4, 2, "NNG")]],
        [[_Tok(0, 2, "A"), _Tok(0, 1, "B"), _Tok(2, 1, "C")]],  # same start, shorter second
        [[_Tok(4, 2, "NNG"), _Tok(0, 3, "VV"), _Tok(3, 0, "JX")]],  # out of text order
        [[_Tok(0, 2, "NNG"), _Tok(1, 4, "XSN")], [_Tok(5, 1, "SF")]],  # overlapping, longer
        [[_Tok(0, 1, "SW"), _Tok(1, 2, "NNG")], [_Tok(3, 3, "NNG")]],
    ],
)
def test_span_fast_path_equals_the_general_rules(sents):
    """spans_from_sentences' one-pass merge gives exactly merge_morphs + clip_morphs."""
    text = "가나다 라마"[:6].ljust(6, "바")
    sentences = segment.cover_sentences(text, [(s[0].start, s[-1].end) for s in sents])
    tokens = [(t.start, t.len, t.tag) for s in sents for t in s]
    want = segment.clip_morphs(segment.merge_morphs(tokens), sentences)
    assert segment.spans_from_sentences(text, sents) == (sentences, want)


def test_kiwi_tokenize_gives_split_into_sents_spans():
    """The segmenter reads tokenize(split_sents=True), which kiwipiepy's split_into_sents wraps: the
    same sentences (first token's start to last token's end) and the same tokens."""
    kiwi = segment.load_kiwi(1)
    for text in ["여러 문장으로 구성된 텍스트네 이걸 분리해줘", "됍니다. 좋아요!! ㅋㅋ\n제목\n본문이다", "영화 ost 좋다 ^^"]:
        want = [(s.start, s.end, [(t.start, t.len, t.tag) for t in s.tokens])
                for s in kiwi.split_into_sents(text, return_tokens=True, return_sub_sents=False)]
        got = [(s[0].start, s[-1].end, [(t.start, t.len, t.tag) for t in s]) for s in kiwi.tokenize(text, split_sents=True)]
        assert got == want


# ---------------------------------------------------------------- the analyser's errors

class _FailsOn:
    """A segmenter whose analyser raises on texts holding ``mark``, in a batch and alone."""

    def __init__(self, mark, error=RuntimeError("kiwi: cannot analyse")):
        self.mark, self.error, self.alone = mark, error, []

    def segment_many(self, texts):
        if any(self.mark in t for t in texts):
            raise self.error
        return [([[0, len(t)]], []) for t in texts]

    def segment(self, text):
        self.alone.append(text)
        return self.segment_many([text])[0]


def test_segment_each_puts_the_error_in_place_of_the_text_it_failed_on():
    seg = _FailsOn("폭탄")
    out = segment.segment_each(seg, ["가나", "폭탄 문서", "다라마"])
    assert out[0] == ([[0, 2]], []) and out[2] == ([[0, 3]], [])
    assert isinstance(out[1], RuntimeError) and seg.alone == ["가나", "폭탄 문서", "다라마"]
    assert segment.segment_each(seg, ["가나"]) == [([[0, 2]], [])] and len(seg.alone) == 3  # no failure: one batch


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("KeyboardInterrupt [while running 'AnalyseAndPlace']"),
                                   RuntimeError("kolectra.core.errors.Terminated [while running 'AnalyseAndPlace']")])
def test_segment_each_never_swallows_a_ctrl_c(error):
    with pytest.raises(type(error)):
        segment.segment_each(_FailsOn("폭탄", error), ["가나", "폭탄"])


class _KiwiFailingOn:
    """A real Kiwi but for texts holding ``mark``, on which it raises (as a C++ error surfaces)."""

    def __init__(self, kiwi, mark):
        self.kiwi, self.mark, self.num_workers = kiwi, mark, kiwi.num_workers

    def tokenize(self, text, **kw):
        texts = [text] if isinstance(text, str) else list(text)
        if any(self.mark in t for t in texts):
            raise RuntimeError("invalid Hangul composition")
        return self.kiwi.tokenize(text if isinstance(text, str) else texts, **kw)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_document_the_analyser_fails_on_is_a_named_dead_letter(tmp_path, monkeypatch, threads):
    """Before: the analyser's error ended the bundle, and the job with it (RuntimeError out of build)."""
    real = segment.load_kiwi
    monkeypatch.setattr(segment, "load_kiwi", lambda n: _KiwiFailingOn(real(n), "폭탄"))
    src = tmp_path / "in.txt"
    lines = ["이 영화 정말 재밌었어요. 최고!", "폭탄 같은 리뷰 하나 있습니다", "배우들 연기가 좋았고 음악도 좋았다", "ㅋㅋㅋ 웃긴 영화 추천합니다"]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    cfg = dataclasses.replace(default_config(), max_reject_ratio=0.5, num_shards=1)
    stats = build.build(cfg, [str(src)], out, [f"--analysis_threads={threads}"]).stats
    assert stats["rejected_reasons"]["analysis_failed"] == 1 and stats["rejected"] == 1
    assert stats["records_out"] == 3 and stats["records_in"] == 4
    rejects = [json.loads(l) for l in (out / "rejects" / "rejects.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rejects == [{"source": "in.txt", "line": 2, "reason": "analysis_failed",
                        "detail": "RuntimeError: invalid Hangul composition"}]
    texts = {json.loads(l)["text"] for f in sorted((out / "data").glob("*.jsonl.gz"))
             for l in gzip.open(f, "rt", encoding="utf-8")}
    assert texts == {lines[0], lines[2], lines[3]}


# ---------------------------------------------------------------- line breaks

def test_a_line_break_ends_a_sentence_unless_a_morph_holds_it():
    # sentences [0, 9]: morphs 휴\n그랜트 (3-8) hold the break at 4; the break at 9 is free
    text = "배우 휴\n그랜트\n좋다"
    morphs = [[0, 2, "NNG"], [3, 8, "NNP"], [9, 10, "VA"], [10, 11, "EF"]]
    assert segment.split_at_line_breaks(text, [[0, 11]], morphs) == [[0, 8], [9, 11]]
    assert segment.split_at_line_breaks("가\n나", [[0, 3]], []) == [[0, 1], [2, 3]]


@pytest.mark.parametrize("lines", [
    ["영화 제목", "감독 홍길동", "출연 김철수 이영희", "줄거리 두 사람이 만나 사랑에 빠진다"],  # Kiwi: one sentence
    [f"- 항목 {i} 사과와 배" for i in range(300)],  # a list: one sentence of 4,389 characters
])
def test_kiwi_sentences_end_at_line_breaks(segmenter, lines):
    """Kiwi ends a sentence at a line break only where its grammar does: a title, a list or a table
    without marks was one sentence, which the examples stage cut to one sequence (the rest lost)."""
    text = "\n".join(lines)
    sentences, morphs = segmenter.segment(text)
    assert [text[s:e] for s, e in sentences] == lines
    assert "".join(text[s:e] for s, e, _ in morphs) == "".join(text.split())


def test_a_line_break_inside_a_kiwi_name_stays_in_its_sentence(segmenter):
    text = "배우 휴\n그랜트 좋다\n다음 줄"
    sentences, morphs = segmenter.segment(text)
    assert any(text[s:e] == "휴\n그랜트" for s, e, _ in morphs)  # Kiwi's multi-word name, across the break
    assert [text[s:e] for s, e in sentences] == ["배우 휴\n그랜트 좋다", "다음 줄"]


# ---------------------------------------------------------------- a boundary inside a word

def test_sentences_either_side_of_a_boundary_inside_a_morph_are_one():
    # Kiwi's 됍니다: 되/VV+어/EF ending sentence (0, 6), ᆸ니다/EF starting the next at 5 (overlapping)
    text = "보유해야 됍니다.. 그래"
    morphs = [[0, 2, "NNG"], [2, 4, "XSV+EC"], [5, 8, "VV+EF+EF"], [8, 10, "SF"], [11, 13, "IC"]]
    assert segment.fit_sentences_to_morphs(text, [[0, 6], [6, 10], [11, 13]], morphs) == [[0, 10], [11, 13]]
    assert segment.fit_sentences_to_morphs(text, [[0, 10], [11, 13]], morphs) == [[0, 10], [11, 13]]  # nothing to do


@pytest.mark.parametrize("text, want", [
    ("보유해야 됍니다.. 그래", ["보유해야 됍니다..", "그래"]),
    ("이미지로 펼쳐진달까. 그냥 무난하다.", ["이미지로 펼쳐진달까.", "그냥 무난하다."]),
    ("말이 필요없다. 보면 됀다!!", ["말이 필요없다.", "보면 됀다!!"]),
])
def test_kiwi_never_cuts_a_word_in_two_sentences_nor_loses_its_morphs(segmenter, text, want):
    """NSMC reviews (3 of 82,799 in one file): Kiwi ended a sentence inside 됍니다, 됀다, 펼쳐진달까;
    the word was cut in two sentences and its morph, crossing the boundary, dropped."""
    sentences, morphs = segmenter.segment(text)
    assert [text[s:e] for s, e in sentences] == want
    assert "".join(text[s:e] for s, e, _ in morphs) == "".join(text.split())
