"""KorQuAD windows per question are bounded (issue 43): one 10 MB context turned 86 questions into
25,123 windows with no message. ``max_windows`` cuts a longer context where its windows would pass
the bound (the kept windows are the unbounded run's first ones), and the run says in one line how
many questions were cut and how many windows that dropped."""

from __future__ import annotations

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
