"""A small real-Korean corpus in the corpus artifact's format, for the vocab and examples tests.

The corpus stage (Beam + Kiwi) is tested on its own; here documents are written straight in the
``corpus/shards.py`` format with real kiwipiepy segmentation (surface spans), so the vocab and
examples tests exercise real morphemes without depending on the corpus pipeline.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from kolectra.corpus import shards

HANDWRITTEN = [
    "이 영화는 정말 재미있었어요.", "배우들의 연기가 너무 자연스러웠다.", "음악이 장면과 잘 어울렸습니다.",
    "결말이 조금 아쉬웠지만 전체적으로 만족스러웠다.", "두 시간이 어떻게 지나갔는지 모르겠네요.",
    "감독의 전작보다 훨씬 나아졌다고 생각한다.", "주인공의 대사가 오래도록 기억에 남는다.",
    "아이들과 함께 보기에 좋은 작품이었어요.", "중간에 지루한 부분이 있어서 졸았습니다.",
    "원작 소설을 읽은 사람이라면 실망할 수도 있다.", "영상미가 뛰어나서 극장에서 보길 잘했다.",
    "이야기가 너무 뻔하게 흘러가서 아쉬웠어요.", "친구가 추천해서 봤는데 기대 이상이었다.",
    "마지막 장면에서 눈물이 났습니다.", "배경 음악 때문에 다시 보고 싶어졌다.",
    "서울의 밤거리를 아름답게 담아냈다.", "형사와 범인의 대결이 긴장감 넘쳤어요.",
    "어제 본 드라마보다 훨씬 재밌었다.", "부모님께서도 좋아하셨습니다.", "다음 편이 벌써 기다려진다.",
    "한국 영화의 저력을 보여 준 작품이다.", "시나리오가 탄탄하고 연출도 깔끔했다.",
    "주연 배우의 목소리가 참 좋았어요.", "생각보다 웃긴 장면이 많아서 즐거웠다.",
    "역사적 사실을 바탕으로 만든 영화라서 더 감동적이었다.", "학생들이 보면 배울 점이 많을 것 같다.",
    "촬영 장소가 제주도라서 풍경이 멋있었어요.", "조연들의 연기가 주연보다 돋보였다.",
    "편집이 엉성해서 흐름이 자주 끊겼다.", "이런 영화가 더 많이 만들어졌으면 좋겠다.",
    "극장 안이 웃음소리로 가득했습니다.", "처음에는 어색했지만 점점 빠져들었다.",
    "전쟁의 비극을 담담하게 그려 냈다.", "가족의 소중함을 다시 느끼게 해 주었다.",
    "특수 효과가 화려해서 눈을 뗄 수 없었다.", "대본을 쓴 작가가 누구인지 궁금해졌다.",
    "관객을 배려하지 않는 불친절한 전개였다.", "음향 효과가 조금 과했던 것 같아요.",
    "오랜만에 마음이 따뜻해지는 영화를 봤다.", "주말에 가족들과 다시 보러 갈 생각입니다.",
    "어릴 적에 읽었던 동화가 떠올랐어요.", "그 배우는 눈빛만으로도 감정을 전달하더라.",
    "제작진의 노력이 곳곳에서 느껴졌습니다.", "시사회에 다녀온 사람들의 평이 엇갈렸다.",
    "예고편만 보고 기대했는데 실망스러웠어요.", "줄거리를 미리 알고 봐도 충분히 재미있다.",
    "감독은 인터뷰에서 십 년 동안 준비했다고 밝혔다.", "관객 수가 개봉 첫 주에 백만 명을 넘었다.",
    "비가 오는 날에 보면 더 좋을 것 같네요.", "등장인물이 너무 많아서 헷갈렸습니다.",
    "웃다가 울다가 정신이 없었다.", "어머니와 딸의 관계를 섬세하게 그렸다.",
    "배경이 되는 시골 마을이 정겨웠어요.", "악역을 맡은 배우가 정말 무서웠다.",
    "이 작품으로 신인상을 받았다고 들었습니다.", "대사 하나하나가 가슴에 와닿았다.",
    "후반부로 갈수록 긴장감이 떨어졌다.", "누구에게나 자신 있게 권할 수 있는 영화입니다.",
    "평론가들은 대체로 높은 점수를 주었다.", "사운드트랙 앨범을 바로 구입했어요.",
    "어린 시절의 추억이 새록새록 떠올랐다.", "교훈을 억지로 강요하는 느낌이 들었다.",
    "두 주인공의 호흡이 잘 맞았습니다.", "액션 장면은 많았지만 내용은 빈약했다.",
    "이런 결말을 예상한 사람은 없었을 것이다.", "한 번 더 보면 새로운 것이 보일 듯하다.",
    "자막 번역이 어색해서 몰입이 깨졌어요.", "영화관을 나서면서 한참 동안 말이 없었다.",
    "세상을 떠난 친구가 생각나서 슬펐습니다.", "지금까지 본 공포 영화 중에서 가장 무서웠다.",
    "우리 동네 도서관에서 빌려 봤어요.", "기차 안에서 휴대폰으로 봤는데도 재미있었다.",
    "연출이 지나치게 화려해서 피곤했다.", "회사 동료들과 단체로 관람했습니다.",
    "겨울에 어울리는 잔잔한 영화였어요.", "배우들이 직접 노래를 불렀다고 한다.",
    "실화라는 사실이 믿기지 않았다.", "할머니께서 젊었을 때 이야기를 해 주셨다.",
    "무거운 주제를 가볍게 풀어내지 않았다.", "아버지의 뒷모습이 계속 떠올랐습니다.",
    "상영 시간이 길었지만 지루하지 않았다.", "극장 의자가 불편해서 집중하기 힘들었어요.",
    "배급사가 홍보에 너무 소홀했던 것 같다.", "원작 만화의 팬이라면 반가울 장면이 많다.",
    "스포일러를 당해서 김이 샜습니다.", "삼 년 만에 돌아온 속편이라 기대가 컸다.",
    "주인공이 성장해 가는 과정이 인상 깊었다.", "요즘 보기 드문 착한 영화였어요.",
    "경찰과 기자들이 현장에 모여들었다.", "정부는 내년 예산안을 국회에 제출했다.",
    "학생들은 방학 동안 봉사 활동에 참여했습니다.", "새로 문을 연 식당에 손님이 붐볐다.",
    "버스를 놓쳐서 회의에 늦고 말았다.", "봄이 되자 공원에 꽃이 활짝 피었어요.",
    "동생은 요리하는 것을 무척 좋아한다.", "할아버지께서는 매일 아침 산책을 하신다.",
    "도서관에서 빌린 책을 아직 돌려주지 못했다.", "내일은 전국적으로 비가 내리겠습니다.",
    "우리는 주말마다 한강에서 자전거를 탄다.", "그녀는 외국에서 공부한 뒤 고향으로 돌아왔다.",
    "아이들이 운동장에서 신나게 뛰어놀고 있었다.", "회의가 끝나자마자 모두 퇴근했습니다.",
    "시장에서 산 사과가 달고 맛있었어요.", "편의점 앞에 사람들이 줄을 서 있었다.",
    "고양이가 창가에 앉아 햇볕을 쬐고 있다.", "오래된 사진을 정리하다가 눈물이 났다.",
    "친구에게 빌린 돈을 오늘 갚았습니다.", "기차표를 미리 예매해 두어서 다행이었다.",
    "박물관에는 조선 시대 유물이 전시되어 있었다.", "선생님께서 숙제를 다시 해 오라고 하셨다.",
    "새 휴대폰은 배터리가 오래가서 편리하다.", "길을 잃어서 한참을 헤매었어요.",
    "그 소식을 듣고 모두 깜짝 놀랐다.", "밤새 내린 눈으로 도로가 미끄러웠습니다.",
    "언니는 다음 달에 결혼할 예정이다.", "운동을 꾸준히 했더니 건강해졌어요.",
    "그는 약속 시간보다 일찍 도착했다.", "컴퓨터가 갑자기 꺼져서 파일이 사라졌다.",
]
NOUNS = ["영화", "배우", "감독", "음악", "이야기", "주인공", "결말", "장면", "연기", "대사", "각본", "화면",
         "소설", "드라마", "작품", "관객", "극장", "노래", "시간", "사람", "친구", "동생", "선생님", "기자",
         "가족", "학생", "마을", "바다", "도시", "사진"]
# (noun, particle pair by batchim) roles
PARTICLES = [("이", "가"), ("은", "는"), ("을", "를"), ("도", "도"), ("만", "만"), ("의", "의"),
             ("과", "와"), ("으로", "로")]
STEMS = ["좋", "많", "먹", "읽", "찾", "웃", "남", "믿", "잊", "괜찮", "작", "넓", "받", "닫", "앉"]
ENDINGS = ["{e}ㅆ다", "{e}ㅆ어요", "{e}ㅆ습니다", "{e}ㅆ는데", "{e}ㅆ지만", "{e}서", "지만", "고", "기 때문에",
           "을 수 있었다", "으면 좋겠다"]
ADVERBS = ["", "솔직히 ", "그래도 ", "무엇보다 ", "특히 ", "어제 ", "정말 ", "다시 "]


def _has_batchim(word: str) -> bool:
    code = ord(word[-1]) - 0xAC00
    return 0 <= code < 11172 and code % 28 != 0


def _with_particle(noun: str, pair: tuple[str, str]) -> str:
    after_consonant, after_vowel = pair
    if after_consonant == "으로":
        return noun + ("으로" if _has_batchim(noun) else "로")
    return noun + (after_consonant if _has_batchim(noun) else after_vowel)


def _conjugate(stem: str, ending: str) -> str:
    """Stem + ending with vowel harmony (아/어) and the past 았/었 built from the tense marker."""
    medial = ((ord(stem[-1]) - 0xAC00) // 28) % 21
    vowel = "아" if medial in (0, 8) else "어"  # ㅏ, ㅗ take 아
    if "{e}" in ending:
        tail = ending.replace("{e}", "")
        if tail.startswith("ㅆ"):
            past = "았" if vowel == "아" else "었"
            return stem + past + tail[1:]
        return stem + vowel + tail
    return stem + ending


def korean_sentences(n: int = 200, seed: int = 0) -> list[str]:
    """``n`` varied Korean sentences: hand-written ones, then composed noun-particle-verb ones."""
    rng = random.Random(seed)
    out = list(HANDWRITTEN)
    while len(out) < n:
        a, b = rng.sample(NOUNS, 2)
        words = [_with_particle(a, rng.choice(PARTICLES)), _with_particle(b, rng.choice(PARTICLES)),
                 _conjugate(rng.choice(STEMS), rng.choice(ENDINGS))]
        out.append(rng.choice(ADVERBS) + " ".join(words) + ".")
    return out[:n]


def write_corpus(corpus_dir: Path, docs_by_split: dict[str, list[list[str]]]) -> Path:
    """Write documents (lists of sentences) with real Kiwi morphemes in the store format."""
    kiwi = _kiwi()
    (corpus_dir / shards.DATA_DIR).mkdir(parents=True, exist_ok=True)
    for split, docs in docs_by_split.items():
        path = corpus_dir / shards.DATA_DIR / f"{split}-00000-of-00001.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            for i, sents in enumerate(docs):
                text = " ".join(sents)
                spans, pos = [], 0
                for s in sents:
                    start = text.index(s, pos)
                    spans.append([start, start + len(s)])
                    pos = start + len(s)
                morphs = [[t.start, t.start + t.len, t.tag] for t in kiwi.tokenize(text)]
                f.write(json.dumps({"id": f"{split}-{i}", "source": "test", "text": text, "sentences": spans,
                                    "morphs": morphs}, ensure_ascii=False) + "\n")
    return corpus_dir


_KIWI = None


def _kiwi():
    global _KIWI
    if _KIWI is None:
        from kiwipiepy import Kiwi
        _KIWI = Kiwi()
    return _KIWI


def documents(sents: list[str], rng: random.Random, most: int) -> list[list[str]]:
    """``sents`` cut, in order, into documents of 1 to ``most`` sentences (each length drawn from ``rng``)."""
    docs, i = [], 0
    while i < len(sents):
        k = rng.randint(1, most)
        docs.append(sents[i:i + k])
        i += k
    return docs


def small_corpus(corpus_dir: Path, n_sentences: int = 200, seed: int = 0) -> Path:
    """~65 train and ~16 valid documents of 1-4 sentences each."""
    rng = random.Random(seed)
    sents = korean_sentences(n_sentences, seed)
    rng.shuffle(sents)
    docs = documents(sents, rng, 4)
    n_valid = max(1, len(docs) // 5)
    return write_corpus(corpus_dir, {"train": docs[n_valid:], "valid": docs[:n_valid]})


# ---- the helper itself --------------------------------------------------------------------
def test_written_corpus_reads_back_with_real_morphemes(tmp_path):
    corpus = small_corpus(tmp_path / "c", n_sentences=30)
    docs = list(shards.iter_documents(corpus, "train")) + list(shards.iter_documents(corpus, "valid"))
    assert sum(len(d["sentences"]) for d in docs) == 30
    for doc in docs:
        text = doc["text"]
        for sent, morphs in zip(shards.sentences(doc), shards.sentence_morphs(doc)):
            # surface strings of the sentence (Kiwi gives a zero-width span to an elided copula 이)
            assert morphs and all(m in sent for m in morphs)
        # the morpheme spans cover every non-space character of the text
        covered = {i for s, e, _ in doc["morphs"] for i in range(s, e)}
        assert {i for i, ch in enumerate(text) if not ch.isspace()} <= covered
    # a real analysis, not whitespace splitting: some eojeol holds more than one morpheme
    assert any(len(ms) > len(s.split()) for d in docs for s, ms in zip(shards.sentences(d), shards.sentence_morphs(d)))
