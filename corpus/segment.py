"""Sentences and morphemes of a cleaned document, from kiwipiepy, as surface spans.

One Kiwi pass per document (``tokenize(..., split_sents=True)``: a list of tokens per sentence)
gives both the sentence boundaries and the morphemes. We store *surface* spans ``[start, end, tag]`` into the stored text,
never Kiwi's normalised forms (했 is analysed as 하/VV + 었/EP, both pointing at the same character),
so vocab and examples never re-run the analyser and always slice real text.

Kiwi reports Python code-point offsets (astral characters such as emoji count as one).
Two adjustments make the spans a clean partition (pure functions below, tested without Kiwi):

- :func:`merge_morphs` joins tokens whose spans overlap into one span with a joined tag
  (``[0, 1, "VV+EP"]`` for 했), so morph spans are sorted and disjoint.
- :func:`cover_sentences` makes sentence spans sorted and disjoint, and attaches any non-space
  text Kiwi left between sentences to the previous sentence, so sentences cover the text.
- :func:`fit_sentences_to_morphs` joins the sentences on either side of a boundary that Kiwi put
  inside a morph (됍|니다), so no morph is lost and no word is cut in two sentences.
- :func:`split_at_line_breaks` ends a sentence at every line break that no morph spans (Kiwi
  ends one only where its grammar does: a list of lines without marks was one sentence).

The Beam wrapper builds one Kiwi per worker in ``DoFn.setup`` (loading the model takes seconds and
about half a gigabyte of resident memory; measured in docs/corpus.md). A language whose profile (``corpus/languages.py``)
names no analyser gets :class:`RuleSegmenter`: sentences end at the profile's closing marks or
a line break, and "morphs" are maximal runs of one Unicode class (letters with their combining
marks ``W``, digits ``N``) or single punctuation ``P`` / symbol ``S`` characters.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import re
import unicodedata
import warnings
from operator import itemgetter
from typing import Iterable, Sequence

from kolectra.core.errors import UserInputError
from kolectra.corpus import languages

_START_LEN = itemgetter(0, 1)


def merge_morphs(tokens: Iterable[tuple[int, int, str]]) -> list[list]:
    """``(start, length, tag)`` tokens -> disjoint ``[start, end, tag]`` spans, in text order."""
    # Kiwi yields text order, so the sort is a linear check; it is stable, keeping 하 before 었.
    out: list[list] = []
    last_end = -1
    for start, length, tag in sorted(tokens, key=_START_LEN):
        end = start + length
        if end <= start:
            continue  # zero-width tokens have no surface
        if start < last_end:
            prev = out[-1]
            if end > last_end:
                prev[1] = last_end = end
            prev[2] += "+" + tag
        else:
            out.append([start, end, tag])
            last_end = end
    return out


def cover_sentences(text: str, spans: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Sorted, disjoint sentence spans whose union holds every non-space character of ``text``.

    Each span is trimmed of surrounding whitespace. Text before the first sentence joins the
    first; text in a gap joins the sentence before it. An empty ``spans`` (or an all-space
    result) for non-empty text becomes one sentence over the whole text.
    """
    n = len(text)
    clean: list[list[int]] = []
    for s, e in sorted((max(0, s), min(n, e)) for s, e in spans):
        if clean and s < clean[-1][1]:
            s = clean[-1][1]
        if e > s:
            clean.append([s, e])
    if not clean:
        stripped = text.strip()
        if not stripped:
            return []
        start = text.index(stripped[0])
        return [[start, start + len(stripped)]]
    # extend the first sentence back to the first non-space char; each sentence forward over
    # any non-space text before the next one starts (or before the end).
    lead = len(text) - len(text.lstrip())
    clean[0][0] = min(clean[0][0], lead)
    for i, span in enumerate(clean):
        limit = clean[i + 1][0] if i + 1 < len(clean) else n
        gap = text[span[1] : limit]
        if gap.strip():
            span[1] = span[1] + len(gap.rstrip())
    # trim whitespace at the ends of each span
    for span in clean:
        s, e = span
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        span[0], span[1] = s, e
    return [s for s in clean if s[1] > s[0]]


def clip_morphs(morphs: list[list], sentences: list[list[int]]) -> list[list]:
    """Drop morph spans that do not lie inside one sentence (none expected; a guard for readers
    that assign morphs to sentences by start offset)."""
    out = []
    it = iter(sentences)
    s_start, s_end = next(it, (0, -1))
    for m in morphs:
        while s_end <= m[0]:
            s_start, s_end = next(it, (0, -1))
            if s_end < 0:
                return out
        if s_start <= m[0] and m[1] <= s_end:
            out.append(m)
    return out


def load_kiwi(threads: int):
    """A new Kiwi analysing on ``threads`` threads (its model loads in 1.5-2 s)."""
    from kiwipiepy import Kiwi  # noqa: PLC0415 - imported here: workers that never segment need not load it

    # num_workers=0: analyse in the calling thread (kiwipiepy >= 0.21); a pool of one thread
    # only adds hand-offs. kiwipiepy warns that 0 meant "all cores" before 0.21 - we mean 0.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return Kiwi(num_workers=threads if threads > 1 else 0)


# Sentences written for kolectra (no corpus's): Kiwi's analysis of them names the code path it runs
# on. Its SIMD paths (sse2, avx2, avx512bw and the default on a Zen 4) agree on them and on 10,000
# NSMC reviews; KIWI_ARCH_TYPE=none changes the morphs of 43 % of those reviews and this probe's
# hash, and ARM's neon path was not tried. Workers of one job on other paths would write other
# bytes under one corpus id: the job compares their probes (corpus/job_checks.py: check_stats).
PROBE = ("어제 본 영화는 생각보다 훨씬 재미있었어요.", "배우들의 연기가 자연스럽고 음악도 좋았다!", "시간 가는 줄 모르고 봤네요 ㅋㅋ",
         "이 감독의 다음 작품이 벌써 기다려집니다", "줄거리가 너무 뻔해서 중간에 졸았음", "가족들이랑 같이 보기에 딱 좋은 영화였어요",
         "원작 소설을 읽고 봐서 그런지 아쉬운 점이 많았다.", "결말이 좀 허무하긴 했지만 전체적으로 괜찮았어",
         "초반 30분은 지루했는데 후반부가 대박이었음", "CG가 어색해서 몰입이 안 됐어요", "주인공이 왜 그런 선택을 했는지 이해가 안 간다",
         "OST 듣다가 눈물 날 뻔", "평점이 왜 이렇게 낮은지 모르겠네요", "연출은 좋았는데 각본이 약했다", "명작은 시간이 지나도 명작이구나")


def probe_hash(kiwi) -> str:
    """16 hex digits of sha256 over Kiwi's tokens of :data:`PROBE` (start, length, tag, form)."""
    tokens = [[(t.start, t.len, t.tag, t.form) for t in sent] for text in PROBE
              for sent in kiwi.tokenize(text, split_sents=True)]
    return hashlib.sha256(json.dumps(tokens, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


class Segmenter:
    """Kiwi, configured once; :meth:`segment` returns ``(sentences, morphs)`` for a text.

    ``threads`` > 1 gives Kiwi a pool of that many analysing threads: :meth:`segment_many` hands
    it the whole batch and turns each result into spans in this thread while the pool analyses
    the texts after it (Kiwi's analysis runs without the GIL). The spans are the same whatever the
    number (measured: docs/corpus.md, "Kiwi's thread pool")."""

    def __init__(self, threads: int = 1) -> None:
        self.threads = max(1, threads)
        self.kiwi = load_kiwi(self.threads)

    @functools.cached_property
    def probe(self) -> str:
        """The code path this Kiwi analyses on, as its output tells it (:func:`probe_hash`), when asked."""
        return probe_hash(self.kiwi)

    def segment(self, text: str) -> tuple[list[list[int]], list[list]]:
        return self.segment_many([text])[0]

    def segment_many(self, texts: Sequence[str]) -> list[tuple[list[list[int]], list[list]]]:
        """:meth:`segment` for several texts: Kiwi over all of them first, in a tight loop (its
        model stays in the CPU caches), then the span rules; with a pool, the two overlap."""
        # tokenize(split_sents=True) is what split_into_sents runs, without building a Sentence (and a
        # slice of the text) per sentence: the same spans, 8 % less CPU (docs/benchmarks.md)
        split = self.kiwi.tokenize
        if self.threads > 1:
            # An iterable makes Kiwi analyse on its pool and yield results in input order.
            analysed = iter(split([t for t in texts if t], split_sents=True))
            return [spans_from_sentences(t, next(analysed)) if t else ([], []) for t in texts]
        analysed = [split(t, split_sents=True) if t else None for t in texts]
        return [spans_from_sentences(t, sents) if sents is not None else ([], []) for t, sents in zip(texts, analysed)]


def segment_each(segmenter, texts: Sequence[str]) -> list:
    """``segmenter.segment_many(texts)``, where a text the analyser raises an error on gets that
    error in its place instead of failing the batch: after a failed batch each text is analysed
    alone (the same spans as in a batch), so one bad text costs the job one dead letter
    (corpus/steps.py: ``analysis_failed``), never the bundle. An error that carries a Ctrl-C
    (Beam and kiwipiepy may re-raise it wrapped: corpus/interruption.py) is raised, never caught."""
    try:
        return segmenter.segment_many(texts)
    except Exception as e:  # noqa: BLE001 - analysed again text by text below
        _raise_if_interrupted(e)
    out: list = []
    for text in texts:
        try:
            out.append(segmenter.segment(text))
        except Exception as e:  # noqa: BLE001 - this text's dead letter
            _raise_if_interrupted(e)
            out.append(e)
    return out


def _raise_if_interrupted(error: BaseException) -> None:
    seen: BaseException | None = error
    for _ in range(64):  # the chain of causes (bounded: a chain can be made circular)
        if seen is None:
            return
        # (a SIGTERM, kolectra.core.errors.Terminated, is one: Beam re-raises it by that name)
        if isinstance(seen, KeyboardInterrupt) or any(n in repr(seen) for n in ("KeyboardInterrupt", "errors.Terminated")):
            raise error
        seen = seen.__cause__ or seen.__context__


def spans_from_sentences(text: str, sents) -> tuple[list[list[int]], list[list]]:
    """Kiwi's sentences (each a non-empty list of its tokens) -> covered sentence spans and surface
    morphs. A sentence spans its first token's start to its last token's end, as kiwipiepy's own
    ``Sentence`` does."""
    sentences = cover_sentences(text, [(s[0].start, s[-1].end) for s in sents])
    morphs = _merge_in_order(sents)
    if morphs is None:  # tokens out of text order: the general rules (never seen from Kiwi 0.24)
        morphs = merge_morphs((t.start, t.len, t.tag) for s in sents for t in s)
    if len(sentences) != 1 or morphs and (morphs[0][0] < sentences[0][0] or morphs[-1][1] > sentences[0][1]):
        sentences = fit_sentences_to_morphs(text, sentences, morphs)
        morphs = clip_morphs(morphs, sentences)  # a guard: none left out (every morph is inside a sentence now)
    if "\n" in text:
        sentences = split_at_line_breaks(text, sentences, morphs)
    return sentences, morphs


def fit_sentences_to_morphs(text: str, sentences: list[list[int]], morphs: list[list]) -> list[list[int]]:
    """Sentences joined so that no morph straddles two: a sentence that ends inside a morph is one
    sentence with the next (a boundary inside a word is none).

    Kiwi may end a sentence inside a syllable whose morphemes it split: 됍니다 is 되/VV+어/EF in one
    sentence and ᆸ니다/EF in the next, both starting at 됍, so the two sentences overlapped, the merged
    morph 됍니다 crossed the boundary and was dropped, and the word was cut in two sentences (됍 | 니다).
    """
    out = [list(span) for span in sentences]
    j = 0
    for ms, me, _ in morphs:
        while j < len(out) and out[j][1] <= ms:
            j += 1
        if j == len(out):
            break
        if me <= out[j][1]:
            continue
        out[j][1] = me
        while j + 1 < len(out) and out[j + 1][0] < out[j][1]:
            out[j][1] = max(out[j][1], out.pop(j + 1)[1])
    return out


def split_at_line_breaks(text: str, sentences: list[list[int]], morphs: list[list]) -> list[list[int]]:
    """Sentences cut at every line break inside them, as :class:`RuleSegmenter`'s end at one.

    Kiwi ends a sentence at a line break only where its grammar does (``제목\n본문이다.`` was one
    sentence, a list of lines without marks one sentence); cleaning leaves a line break only where
    the input had one (a title, a list item, a paragraph). A line break inside a morph (Kiwi's
    multi-word names: ``휴\n그랜트``) cuts nothing, so every morph stays inside one sentence.
    """
    starts = [m[0] for m in morphs]
    out: list[list[int]] = []
    for s, e in sentences:
        at = text.find("\n", s, e)
        while at != -1:
            i = bisect.bisect_right(starts, at) - 1
            if i < 0 or morphs[i][1] <= at:  # in no morph: a boundary
                out.append([s, at])
                s = at + 1
            at = text.find("\n", at + 1, e)
        out.append([s, e])
    return cover_sentences(text, out)  # trimmed of the spaces round a line break, none empty


def _merge_in_order(sents) -> list[list] | None:
    """:func:`merge_morphs` in one pass over Kiwi's tokens, or None if they are not in text order.

    The analysing worker's second-largest cost after Kiwi itself, so written for it: no tuple
    per token and no sort (``benchmarks/corpus.py``).
    """
    out: list[list] = []
    last_start = last_len = last_end = -1
    for sent in sents:
        for tok in sent:
            start, length = tok.start, tok.len
            if start < last_start or start == last_start and length < last_len:
                return None  # merge_morphs would reorder: (start, length) order
            last_start, last_len = start, length
            end = start + length
            if end <= start:
                continue
            if start < last_end:
                prev = out[-1]
                if end > last_end:
                    prev[1] = last_end = end
                prev[2] += "+" + tok.tag
            else:
                out.append([start, end, tok.tag])
                last_end = end
    return out


# A word: letters (with combining marks, and inner apostrophes: don't), or digits (with inner
# separators: 1,000.5), or one other non-space character.
_WORD = re.compile(r"(?:[^\W\d_]|\u0027(?=[^\W\d_]))[^\W\d_\u0027]*(?:['’][^\W\d_]+)*|\d+(?:[.,]\d+)*|[^\w\s]|_")


def _tag(surface: str) -> str:
    c = surface[0]
    if c.isdigit():
        return "N"
    if c.isalpha() or c == "'":
        return "W"
    cat = unicodedata.category(c)
    return "S" if cat[0] == "S" else "P"


class RuleSegmenter:
    """Analyser-free sentences and word spans from a language profile's rules."""

    def __init__(self, language: str) -> None:
        self.compiled = languages.compiled(language)

    def segment_many(self, texts: Sequence[str]) -> list[tuple[list[list[int]], list[list]]]:
        return [self.segment(t) for t in texts]

    def segment(self, text: str) -> tuple[list[list[int]], list[list]]:
        if not text:
            return [], []
        spans = [(m.start(), m.end()) for m in self.compiled.sentence.finditer(text) if m.end() > m.start()]
        sentences = cover_sentences(text, spans)
        morphs = [[m.start(), m.end(), _tag(m.group())] for m in _WORD.finditer(text)]
        return sentences, clip_morphs(morphs, sentences)


def make_segmenter(language: str = "ko", threads: int = 1):
    """The analyser the language profile names: Kiwi for Korean (on ``threads`` threads), Unicode
    rules otherwise (cheap: one thread)."""
    analyser = languages.profile(language).analyser
    if analyser == "kiwi":
        return Segmenter(threads)
    if analyser is None:
        return RuleSegmenter(language)
    raise UserInputError(f"language {language!r}: unknown analyser {analyser!r}")
