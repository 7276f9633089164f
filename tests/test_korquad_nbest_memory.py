"""What a KorQuAD run holds of its scored split for the whole run: the n-best lists as numbers, not a dict a span,
and a paragraph's context once, not once a question (docs/finetune.md, "Memory and large task files")."""

import gc
import json
import tracemalloc

import numpy as np
import pytest

from benchmarks.tiny_model import train_wordpiece
from kolectra.finetune.features import rows
from kolectra.finetune.files import write_json
from kolectra.finetune.korquad import write_nbest
from kolectra.finetune.readers.korquad import (
    NBest,
    SpanIndex,
    make_windows,
    nbest_spans,
    question_columns,
    questions_from,
    rounded_nbest,
)
from tests.test_finetune_task_memory import squad_questions


@pytest.fixture(scope="module")
def scored():
    questions = squad_questions(150, seed=7)
    tok = train_wordpiece([q.context for q in questions], vocab_size=300)
    w = make_windows(tok, questions, 64, 16, 16)
    rng = np.random.default_rng(5)
    starts = [rng.normal(size=len(ids)).astype(np.float32) for ids in w.input_ids]
    ends = [rng.normal(size=len(ids)).astype(np.float32) for ids in w.input_ids]
    return questions, SpanIndex.of(w), starts, ends


def test_the_n_best_lists_are_held_as_numbers(scored):
    """At n_best=20 the lists of dicts held about 10 KiB a question for the whole run (until written)."""
    questions, spans, starts, ends = scored
    gc.collect()
    tracemalloc.start()
    try:
        nbest = nbest_spans(questions, spans, starts, ends, n_best=20, max_answer_length=30)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert all(len(nbest[q.id]) == 20 for q in questions)
    assert held / len(questions) < 2500, held / len(questions)
    first = nbest[questions[0].id][0]
    assert list(first) == ["text", "score", "start_logit", "end_logit", "start_char", "probability"]
    assert questions[0].context[first["start_char"]:].startswith(first["text"]) and first["text"]


def test_nbest_predictions_json_is_written_a_question_at_a_time_with_the_same_bytes(scored, tmp_path):
    questions, spans, starts, ends = scored
    for n_best, longest in ((20, 30), (3, 1)):
        nbest = nbest_spans(questions, spans, starts, ends, n_best=n_best, max_answer_length=longest)
        assert isinstance(nbest, NBest)
        write_json(tmp_path / "whole.json", rounded_nbest(nbest))
        write_nbest(tmp_path / "streamed.json", nbest)
        assert (tmp_path / "whole.json").read_bytes() == (tmp_path / "streamed.json").read_bytes()
    assert json.loads((tmp_path / "streamed.json").read_text(encoding="utf-8")).keys() == {q.id for q in questions}
    write_nbest(tmp_path / "none.json", {})
    assert (tmp_path / "none.json").read_text(encoding="utf-8") == "{}\n"


def test_the_scored_questions_share_their_paragraph_s_context():
    questions = squad_questions(12, seed=1)
    shared = [q.__class__(q.id, q.question, questions[k // 4 * 4].context, q.answers) for k, q in enumerate(questions)]
    ds = rows(question_columns(shared))
    back = [q for batch in ds.iter(batch_size=5) for q in questions_from(batch)]
    assert back == shared
    assert len({id(q.context) for q in back}) <= 4 + 2  # a context a paragraph (and one a batch it straddles)


def test_the_scored_windows_are_read_in_place_from_their_arrow_columns(tmp_path):
    """``SpanIndex.of_table`` copied the offsets into flat int64 arrays: 17 bytes a token for the whole run.
    It now reads each window's offsets from the Arrow columns (memory-mapped from the tokenisation cache in a
    CLI run) and copies only the max-context marks: a bool a token."""
    from kolectra.finetune.config import KorquadConfig
    from kolectra.finetune.features import tokenize
    from kolectra.finetune.korquad import Korquad

    questions = squad_questions(60, seed=3)
    tok = train_wordpiece([q.context for q in questions], vocab_size=300)
    cfg = KorquadConfig(max_length=64, doc_stride=16, max_query_length=16)
    enc = tokenize(rows(question_columns(questions)), Korquad().encoder(tok, cfg), desc="t", settings={},
                   cache_dir=tmp_path)
    tokens = sum(len(ids) for ids in enc["input_ids"])
    gc.collect()
    tracemalloc.start()
    try:
        spans = SpanIndex.of_table(enc.data.table)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held / tokens < 4, held / tokens
    w = make_windows(tok, questions, 64, 16, 16)
    assert all(np.array_equal(spans.start.row(r), [o[0] if o else -1 for o in offs]) for r, offs in enumerate(w.offsets))
