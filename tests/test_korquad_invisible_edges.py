"""A KorQuAD answer whose edge is an invisible character (U+200B, a control) that the tokenizer drops.

WordPiece's normaliser (clean_text) removes format and control characters, so no token covers one; a gold
answer ending in U+200B at the end of its context ended past every window's last token, and the question was
trained as "no answer here" in each of its windows, silently."""

import numpy as np

from benchmarks.tiny_model import train_wordpiece
from kolectra.finetune.readers.korquad import Question, decode, make_windows, visible_span

CONTEXT = "1989년 임수경\u200b씨는 평양에 갔다\u200b"


def test_an_answer_ending_in_a_zero_width_space_at_the_context_s_end_is_a_training_target():
    tok = train_wordpiece([CONTEXT.replace("\u200b", " "), "무엇을 했나?", "누구?"], vocab_size=80)
    questions = [Question("end", "무엇을 했나?", CONTEXT, (("갔다\u200b", CONTEXT.index("갔다")),)),
                 Question("lead", "누구?", CONTEXT, (("\u200b씨는", CONTEXT.index("\u200b씨는")),))]
    for max_length, stride in ((64, 16), (16, 4)):  # one window a question; several
        w = make_windows(tok, questions, max_length=max_length, doc_stride=stride, max_query_length=8)
        for qi in range(2):
            assert any(s > 0 for s, i in zip(w.start_positions, w.question_index) if i == qi), (max_length, qi)
        starts = [np.where(np.arange(len(ids)) == s, 10.0, 0.0) for ids, s in zip(w.input_ids, w.start_positions)]
        ends = [np.where(np.arange(len(ids)) == e, 10.0, 0.0) for ids, e in zip(w.input_ids, w.end_positions)]
        # the span the tokens hold: the invisible edge is in no token (the official script scores this F1 0.8)
        assert decode(questions, w, starts, ends, n_best=5, max_answer_length=10) == {"end": "갔다", "lead": "씨는"}


def test_visible_span():
    assert visible_span("\u200b 갔다\u200b\x00") == (2, 4)
    assert visible_span("갔다") == (0, 2) and visible_span("\u200b") == (0, 0)
