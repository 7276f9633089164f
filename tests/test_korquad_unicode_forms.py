"""KorQuAD text in decomposed Hangul (NFD): scored as its composed form, and an answer in the other form is named."""

import json
import unicodedata

import pytest

from kolectra.finetune import korquad
from kolectra.finetune.config import sample_korquad
from kolectra.finetune.files import FinetuneError
from kolectra.finetune.korquad_metric import char_f1, evaluate
from tests.test_finetune_e2e import FIXTURE


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def test_the_metric_compares_answers_as_composed_hangul():
    """A prediction is a slice of its context: in an NFD context it is NFD, and against an NFC answer text it scored
    EM 0 and F1 0 whatever it was; two NFD answers had their F1 counted over jamo (90.9 for 한나라당의 against
    한나라당, the official 88.9 over syllables) (a6)."""
    assert evaluate({"q": ["수원"]}, {"q": nfd("수원")})["exact_match"] == 100.0
    assert evaluate({"q": [nfd("수원")]}, {"q": "수원"})["f1"] == 100.0
    assert char_f1(nfd("한나라당의"), nfd("한나라당")) == pytest.approx(char_f1("한나라당의", "한나라당")) \
        == pytest.approx(8 / 9)


def test_answers_in_another_unicode_form_than_their_context_are_named_so(tmp_path):
    """An NFD context whose answers are NFC (or the reverse) misses every answer_start; the refusal (and the note on
    questions left out) said the answers were "nowhere in it" though each is there, in the other form (a6)."""
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for article in doc["data"]:
        for para in article["paragraphs"]:
            para["context"] = nfd(para["context"])
    n = sum(len(p["qas"]) for a in doc["data"] for p in a["paragraphs"])
    train = tmp_path / "nfd.json"
    train.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(FinetuneError, match=rf"their first answers: {n} in the context in another Unicode form "
                                            r"\(decomposed Hangul, NFD, in the context or the answer, not both: write "
                                            r"both in NFC, unicodedata\.normalize\('NFC', \.\.\.\), answer_start counted "
                                            r"in the NFC context\)$"):
        korquad.Korquad().read(sample_korquad(), train, FIXTURE)
