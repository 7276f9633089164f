"""KorQuAD answer_start counted in another Unicode form than its context (NFC offsets of a decomposed, NFD,
context, or the reverse): mapped through the normalisation to the answer it names, for training (h4)."""

import json
import unicodedata

import pytest

from benchmarks.tiny_model import train_wordpiece
from kolectra.finetune import korquad
from kolectra.finetune.config import sample_korquad
from kolectra.finetune.readers.korquad import make_windows
from kolectra.finetune.readers.korquad_forms import placed
from kolectra.finetune.readers.korquad_questions import Question

CONTEXT = "임수경 씨는 평양에 갔다. 평양 축전이었다. 서울로 돌아온 날은 목요일이었다."
# (question, answer, which occurrence of it in CONTEXT): 평양 is there twice
ASKED = [("어디에 갔나?", "평양", 0), ("어디 축전이었나?", "평양", 1), ("어디로 돌아왔나?", "서울", 0),
         ("무슨 요일이었나?", "목요일", 0)]


def form(f: str, text: str) -> str:
    return unicodedata.normalize(f, text)


def document(context_form: str, answer_form: str, start_form: str) -> dict:
    """A KorQuAD-format file of one paragraph: its context in ``context_form``, answers in ``answer_form``, each
    ``answer_start`` counted in the context written in ``start_form``."""
    counted, qas = form(start_form, CONTEXT), []
    for k, (question, answer, occurrence) in enumerate(ASKED):
        at = -1
        for _ in range(occurrence + 1):
            at = counted.index(form(start_form, answer), at + 1)
        qas.append({"id": f"q{k}", "question": question,
                    "answers": [{"text": form(answer_form, answer), "answer_start": at}]})
    return {"version": "h4", "data": [{"title": "t", "paragraphs": [{"context": form(context_form, CONTEXT),
                                                                     "qas": qas}]}]}


def trained(tmp_path, forms: tuple[str, str, str]):
    train, dev = tmp_path / "train.json", tmp_path / "dev.json"
    train.write_text(json.dumps(document(*forms), ensure_ascii=False), encoding="utf-8")
    dev.write_text(json.dumps(document("NFC", "NFC", "NFC"), ensure_ascii=False), encoding="utf-8")
    return korquad.Korquad().read(sample_korquad(), train, dev)


def occurrence(q: Question) -> tuple[str, int]:
    """The answer a training question is trained on, composed, and which occurrence of it in the context that is."""
    text, start = q.answers[0]
    assert q.span_ok(0)
    return form("NFC", text), form("NFC", q.context[:start]).count(form("NFC", text))


FORMS = [(c, a, s) for c in ("NFC", "NFD") for a in ("NFC", "NFD") for s in ("NFC", "NFD")]


@pytest.mark.parametrize("forms", FORMS, ids=["context {} answer {} start {}".format(*f) for f in FORMS])
def test_every_training_answer_is_the_one_its_answer_start_names_in_whatever_form_it_counts(tmp_path, forms):
    """An NFD context whose answer_starts count its NFC text (or the reverse): three of four questions had been left
    out of training ("within 16 characters of answer_start", "elsewhere") and the fourth trained on the other 평양
    (its NFC start, 15, is where the first 평양 starts in NFD); NFC answers at their NFD starts trained on the
    occurrence nearest that start counted in NFC, the second 평양 for the first. Each is now trained on the answer
    its start names, none left out."""
    data = trained(tmp_path, forms)
    assert data.facts["train_questions_left_out"] == 0
    got = [occurrence(q) for q in korquad.questions_from(data.train.to_dict())]
    assert got == [(answer, k) for _, answer, k in ASKED]


def test_the_training_windows_target_the_answer_the_start_names(tmp_path, capsys):
    """Through the windows: an NFD context, NFD answers, answer_starts counted in NFC (a file written composed and
    decomposed afterwards): every training target's tokens hold the answer named, the second 평양 the second."""
    data = trained(tmp_path, ("NFD", "NFD", "NFC"))
    assert "4 training question(s) whose answer_start counts its context in NFC" in capsys.readouterr().err
    questions = korquad.questions_from(data.train.to_dict())
    tok = train_wordpiece([CONTEXT] + [q for q, _, _ in ASKED], vocab_size=200)
    w = make_windows(tok, questions, 64, 32, 16)
    assert len(w.question_index) == len(questions)  # one window each: its targets are the question's
    for k, q in enumerate(questions):
        s, e = w.start_positions[k], w.end_positions[k]
        assert s > 0
        text, start = q.answers[0]
        assert w.offsets[k][s][0] <= start < w.offsets[k][s][1] and w.offsets[k][e][0] < start + len(text) <= w.offsets[k][e][1]
    assert [form("NFC", q.context[:q.answers[0][1]]) for q in questions[:2]] == [
        "임수경 씨는 ", "임수경 씨는 평양에 갔다. "]


def test_a_start_counted_in_the_context_as_it_is_leaves_the_paragraph_as_it_is():
    """A paragraph whose answers sit at their starts (and one off by a few) is left as it is: an NFC file gives the
    same questions, the one missed still missing (left out of training, as before)."""
    qs = [Question("a", "어디에 갔나?", CONTEXT, (("평양", 7),)), Question("b", "어디로?", CONTEXT, (("서울", 30),))]
    assert CONTEXT[30:32] != "서울" and CONTEXT.index("서울") != 30
    out, counts = placed(qs)
    assert out == qs and counts == {"text": 0, "NFC": 0, "NFD": 0}


def test_a_tie_in_a_paragraph_follows_the_file():
    """One question in an NFD paragraph, its NFC answer's start 15 naming the first 평양 counted as the context is
    (NFD 15) and the second counted composed (NFC 15): the file's other paragraphs, counted as their NFD contexts
    are, decide it: the first."""
    nfd = form("NFD", CONTEXT)
    other = "서울은 한국의 수도이다. 목요일에 갔다."
    qs = [Question("q", "어디에 갔나?", nfd, (("평양", 15),)),
          Question("o1", "수도?", form("NFD", other), ((form("NFD", "서울"), 0),)),
          Question("o2", "언제?", form("NFD", other), ((form("NFD", "목요일"), len(form("NFD", "서울은 한국의 수도이다. "))),))]
    assert nfd[15:21] == form("NFD", "평양") and form("NFC", nfd).index("평양", 8) == 15
    out, _ = placed(qs)
    assert out[0].answers[0] == (form("NFD", "평양"), 15) and out[1:] == qs[1:]
    alone, _ = placed(qs[:1])  # alone: the answer's own form decides, as refound does (the second)
    assert alone[0].answers[0] == (form("NFD", "평양"), nfd.index(form("NFD", "평양"), 20))
