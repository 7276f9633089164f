"""KorQuAD text in decomposed Hangul (NFD): scored as its composed form, and an answer in the other form is named."""

import json
import unicodedata

import pytest

from kolectra.finetune import korquad
from kolectra.finetune.config import sample_korquad
from kolectra.finetune.korquad_metric import char_f1, evaluate
from kolectra.finetune.readers.korquad_forms import refound
from kolectra.finetune.readers.korquad_questions import Question
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


def test_answers_in_another_unicode_form_than_their_context_are_trained_on_its_slice(tmp_path, capsys):
    """An NFD context whose answers are NFC (or the reverse) misses every answer_start: the file was refused, its
    answers said to be "nowhere in it", though each is there in the other form. Each is now trained on the context's
    slice canonically equal to it, said in one line; an answer_start off by one is still left out (a6)."""
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for article in doc["data"]:
        for para in article["paragraphs"]:
            para["context"] = nfd(para["context"])
    qas = [qa for a in doc["data"] for p in a["paragraphs"] for qa in p["qas"]]
    qas[0]["answers"][0]["text"] = nfd(qas[0]["answers"][0]["text"])  # in the context's form: its NFC offset mapped (h4)
    qas[1]["answers"][0]["text"] = nfd(qas[1]["answers"][0]["text"])
    qas[1]["answers"][0]["answer_start"] += 1  # off by one: left out
    train = tmp_path / "nfd.json"
    train.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    data = korquad.Korquad().read(sample_korquad(), train, FIXTURE)
    assert len(data.train) == len(qas) - 1 and data.facts["train_questions_left_out"] == 1
    for q in korquad.questions_from(data.train.to_dict()):
        text, start = q.answers[0]
        assert q.span_ok(0) and unicodedata.normalize("NFC", text) == next(
            unicodedata.normalize("NFC", qa["answers"][0]["text"]) for qa in qas if qa["id"] == q.id)
    err = capsys.readouterr().err
    assert f"korquad: {len(qas) - 2} training question(s) whose first answer is in its context in another Unicode " \
           "form (decomposed Hangul, NFD, on one side) are trained on the context's slice of it" in err
    assert "korquad: 1 training question(s) whose answer_start counts its context in NFC" in err
    assert "1 training question(s) whose first answer is not at its answer_start are left out" in err


def test_an_answer_twice_in_an_nfd_context_is_the_one_its_composed_answer_start_names():
    """An NFD context's NFC answer carries an answer_start counted in the NFC context (where str.find finds it);
    the nearest span was measured in the jamo's offsets alone, about three times as many, so of a word the context
    holds twice the earlier was taken: answer_start 15 names the second 평양, NFD 31, and the first (NFD 15) was
    trained on. The reverse (an NFD answer in an NFC context) counts the NFD context (a15)."""
    context = "임수경 씨는 평양에 갔다. 평양 축전이었다."
    second = context.index("평양", 10)
    q = Question("q", "어디에 갔나?", nfd(context), (("평양", second),))
    text, start = refound(q).answers[0]
    assert (text, start) == (nfd("평양"), nfd(context).index(nfd("평양"), 20))
    first = Question("q", "어디에 갔나?", nfd(context), (("평양", context.index("평양")),))
    assert refound(first).answers[0][1] == nfd(context).index(nfd("평양"))
    back = Question("q", "어디에 갔나?", context, ((nfd("평양"), nfd(context).index(nfd("평양"), 20)),))
    assert refound(back).answers[0] == ("평양", second)  # an NFD answer's start counts the NFD context
