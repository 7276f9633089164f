"""KorQuAD windows per question are bounded (issue 43): one 10 MB context turned 86 questions into
25,123 windows with no message. ``max_windows`` cuts a longer context where its windows would pass
the bound (the kept windows are the unbounded run's first ones), and the run says in one line how
many questions were cut and how many windows that dropped."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from benchmarks.tiny_model import train_wordpiece
from kolectra.finetune.readers.korquad import Question, make_windows, windows_for
from kolectra.pipeline.cli import main
from tests.test_finetune_e2e import FIXTURE, tiny_model  # noqa: F401 - tiny_model is a fixture


def _paragraphs() -> list[dict]:
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return [p for a in doc["data"] for p in a["paragraphs"]]


@pytest.fixture(scope="module")
def tokenizer():
    paras = _paragraphs()
    return train_wordpiece([p["context"] for p in paras] + [q["question"] for p in paras for q in p["qas"]],
                           vocab_size=800)


def _question(repeat: int) -> Question:
    p = _paragraphs()[0]
    qa = p["qas"][0]
    return Question("q", qa["question"], " ".join([p["context"]] * repeat),
                    ((qa["answers"][0]["text"], qa["answers"][0]["answer_start"]),))


def test_a_long_context_keeps_its_first_windows_and_counts_the_rest(tokenizer):
    q = _question(40)
    free = make_windows(tokenizer, [q], max_length=48, doc_stride=8, max_query_length=12)
    assert len(free.input_ids) > 50 and free.windows_dropped == [0] * len(free.input_ids)
    bounded = make_windows(tokenizer, [q], max_length=48, doc_stride=8, max_query_length=12, max_windows=5)
    assert bounded.input_ids == free.input_ids[:5] and bounded.start_positions == free.start_positions[:5]
    assert bounded.windows_dropped == [len(free.input_ids) - 5, 0, 0, 0, 0]
    short = make_windows(tokenizer, [_question(1)], max_length=48, doc_stride=8, max_query_length=12, max_windows=500)
    assert sum(short.windows_dropped) == 0


@pytest.mark.parametrize("tokens, room, stride", [(10, 20, 8), (20, 20, 8), (21, 20, 8), (100, 30, 7), (31, 30, 30)])
def test_the_window_count_is_the_tokenizers(tokenizer, tokens, room, stride):
    context = " ".join(["가"] * tokens)  # one token a syllable
    question = "가"
    enc = tokenizer(question, context, truncation="only_second", max_length=room + 4, stride=room - stride,
                    return_overflowing_tokens=True)
    assert len(enc["input_ids"]) == windows_for(tokens, room, stride)


def test_the_run_says_in_one_line_how_many_questions_were_cut(tiny_model, tmp_path, capsys):  # noqa: F811
    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    para = doc["data"][0]["paragraphs"][0]
    para["context"] = " ".join([para["context"]] * 30)  # the answers stay at their offsets
    train = tmp_path / "train.json"
    train.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    argv = ["finetune", "korquad", "--model", str(tiny_model), "--train", str(train), "--dev", str(FIXTURE),
            "--out", str(tmp_path / "root"), "--preset", "sample", "--set", "epochs=1", "--set", "max_length=64",
            "--set", "max_windows=3"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "max_windows=3" in ln]
    assert len(lines) == 1, lines
    found = re.search(r"(\d+) train question\(s\), (\d+) windows dropped", lines[0])
    assert found and int(found[1]) >= len(para["qas"])
    assert main(argv[:-1] + ["max_windows=0"]) == 0  # no bound: the windows the cut dropped are all there
    free = capsys.readouterr().err
    assert "max_windows" not in free
    windows = [int(re.search(r"train questions -> (\d+) windows", e)[1]) for e in (err, free)]
    assert windows[1] - windows[0] == int(found[2])
    assert main(argv[:-1] + ["max_windows=-1"]) == 2


def _step(offsets) -> int:
    """Context tokens from a question's first window start to its second's."""
    ctx = [[o for o in offs if o is not None] for offs in offsets[:2]]
    return sum(o[0] < ctx[1][0][0] for o in ctx[0])


def test_a_doc_stride_past_a_window_s_room_is_counted_per_question(tokenizer):
    """make_windows steps by the context a window holds where doc_stride is more (BERT's loop: windows
    adjacent, no token skipped); stride_capped counts those questions, read from the encoded columns."""
    import datasets

    from kolectra.finetune.korquad import stride_capped
    from kolectra.finetune.readers.korquad import window_columns

    long = _question(3)
    asked = dataclasses.replace(long, id="long-q", question=" ".join([long.question] * 4))  # less room
    answer = long.answers[0][0]
    one = Question("one", long.question, answer, ((answer, 0),))  # one window: no step at all
    rooms = {}
    for q in (long, asked, one):
        w = make_windows(tokenizer, [q], max_length=48, doc_stride=8, max_query_length=12)
        rooms[q.id] = (sum(o is not None for o in w.offsets[0]), len(w.input_ids))
    assert rooms["q"][1] > 1 and rooms["long-q"][1] > 1 and rooms["one"][1] == 1
    assert rooms["long-q"][0] < rooms["q"][0], rooms
    for stride in (8, rooms["long-q"][0], rooms["long-q"][0] + 1, rooms["q"][0] + 1, 1000):
        w = make_windows(tokenizer, [long, asked, one], max_length=48, doc_stride=stride, max_query_length=12)
        firsts = [w.question_index.index(i) for i in range(2)]
        steps = [_step(w.offsets[k:k + 2]) for k in firsts]
        assert steps == [min(stride, rooms["q"][0]), min(stride, rooms["long-q"][0])], (stride, steps)
        encoded = datasets.Dataset.from_dict(window_columns(w, 0))
        expected = sum(stride > rooms[i][0] for i in ("q", "long-q"))
        assert stride_capped(encoded, stride, 48) == expected, stride


def test_the_run_says_in_one_line_how_many_questions_step_by_less_than_doc_stride(tiny_model, tmp_path, capsys):  # noqa: F811
    """doc_stride=61 at max_length=64: no window holds 61 context tokens after its question, so every
    question of more than one window steps by less; nothing said so (k4: "capped silently")."""
    argv = ["finetune", "korquad", "--model", str(tiny_model), "--train", str(FIXTURE), "--dev", str(FIXTURE),
            "--out", str(tmp_path / "root"), "--preset", "sample", "--set", "epochs=1", "--set", "max_length=64",
            "--set", "train_on_eval=true", "--set", "doc_stride=61"]
    assert main(argv) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "doc_stride" in ln]
    assert len(lines) == 1, lines
    found = re.search(r"doc_stride=61 is more than the context a window holds after the question \(max_length less "
                      r"its tokens and 3\) for (\d+) train question\(s\), (\d+) dev question\(s\): their windows "
                      r"follow one another without overlap", lines[0])
    assert found and int(found[1]) == int(found[2]) > 0, lines[0]  # the same file on both sides
    assert main(argv[:-1] + ["doc_stride=16"]) == 0  # 16 <= 64 - 32 - 3: every window has room for it
    assert "doc_stride" not in capsys.readouterr().err
