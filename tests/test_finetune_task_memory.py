"""What NSMC's and KorQuAD's own tasks hold in memory, and that holding less changed none of their values.

docs/finetune.md, "Memory and large task files".  NSMC's rows are columns carved by row index (no object a
row); KorQuAD's scored windows are read in place from their Arrow columns (:class:`SpanIndex`), not a list
and a tuple a token.
Bounds are generous multiples (tracemalloc, not timings).
"""

from __future__ import annotations

import gc
import random
import tracemalloc
import unicodedata

import numpy as np
import pyarrow as pa
import pytest

from benchmarks.tiny_model import train_wordpiece
from kolectra.finetune import nsmc
from kolectra.finetune.config import KorquadConfig, NsmcConfig
from kolectra.finetune.features import content_key, rows, split_dev, tokenize
from kolectra.finetune.korquad import Korquad
from kolectra.finetune.leakage import text_key
from kolectra.finetune.readers.korquad import (
    Question,
    SpanIndex,
    make_windows,
    nbest_spans,
    question_columns,
    questions_from,
)
from kolectra.finetune.readers.nsmc import NsmcRow, read_nsmc
from kolectra.finetune.skeleton import Split

SYLLABLES = [chr(0xAC00 + i * 37) for i in range(120)]


def words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(n))


# --- NSMC -------------------------------------------------------------------------------------

def nsmc_file(path, n: int, seed: int):
    """An NSMC-format file of ``n`` rows: repeated reviews (also as NFD and with doubled spaces, which the
    carve keeps on one side), an empty review, a bad line."""
    rng = random.Random(seed)
    texts = [words(rng, rng.randint(1, 8)) for _ in range(n)]
    for i in range(0, n, 7):  # a text repeated, as NSMC repeats reviews
        texts[i] = texts[i // 2]
    texts[3] = unicodedata.normalize("NFD", texts[1])
    texts[5] = texts[1].replace(" ", "  ")
    texts[9] = ""
    lines = [f"{rng.randrange(10**7)}\t{t}\t{rng.randint(0, 1)}" for t in texts]
    lines.insert(11, "깨진 줄")
    path.write_text("id\tdocument\tlabel\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def old_read(cfg, train_file, test_file):
    """NSMC's read step as it was (a list of row objects carved by ``split_dev``, then columns), kept here
    to compare the column path with."""
    train_src, test_src = read_nsmc(train_file, cfg.max_bad_fraction), read_nsmc(test_file, cfg.max_bad_fraction)
    train, dev = split_dev(train_src.rows, cfg.dev_fraction, cfg.seed, key=lambda r: text_key({"text": r.document}))
    test = test_src.rows
    train = train[:cfg.max_train_examples or None]
    own = cfg.max_dev_examples
    dev, test = dev[:(cfg.max_eval_examples if own < 0 else own) or None], test[:cfg.max_eval_examples or None]
    return [rows({"id": [r.id for r in p], "text": [r.document for r in p], "label": [r.label for r in p],
                  "line": [r.line for r in p]}) for p in (train, dev, test)], {
        "train_file": train_src.stats, "test_file": test_src.stats}


@pytest.mark.parametrize("settings", [{}, {"seed": 7, "dev_fraction": 0.3}, {"max_train_examples": 50},
                                      {"max_eval_examples": 20}, {"max_eval_examples": 20, "max_dev_examples": 0}])
def test_nsmc_s_column_path_gives_the_rows_the_list_path_gave(tmp_path, settings):
    """The same dev carve (seeded, each text on one side), the same rows in the same order, the same
    Arrow bytes (hence the same tokenisation cache key and the same training) and the same file counts."""
    cfg = NsmcConfig(max_bad_fraction=0.05, **settings)
    train, test = nsmc_file(tmp_path / "train.txt", 300, 1), nsmc_file(tmp_path / "test.txt", 80, 2)
    data = nsmc.Nsmc().read(cfg, train, test)
    parts, facts = old_read(cfg, train, test)
    for new, old in zip((data.train, data.dev, data.test), parts):
        assert new.to_dict() == old.to_dict() and content_key(new) == content_key(old)
    assert data.facts == facts and facts["train_file"]["bad_rows"] == 1
    assert not {text_key({"text": t}) for t in data.train["text"]} & {text_key({"text": t}) for t in data.dev["text"]}


def test_nsmc_s_read_step_makes_no_object_a_row(tmp_path, monkeypatch):
    """The old path held an ``NsmcRow`` a line (and lists of them for train, dev and test) while the rows
    went to Arrow: counted when ``rows`` is entered, 330 of them; the column path holds none."""
    live = []

    def counting_rows(columns):
        gc.collect()
        live.append(sum(1 for o in gc.get_objects() if type(o) is NsmcRow))
        return rows(columns)

    monkeypatch.setattr(nsmc, "rows", counting_rows)
    train, test = nsmc_file(tmp_path / "train.txt", 300, 1), nsmc_file(tmp_path / "test.txt", 30, 2)
    data = nsmc.Nsmc().read(NsmcConfig(max_bad_fraction=0.05), train, test)
    assert live == [0, 0, 0] and len(data.train) + len(data.dev) == 300
    f = read_nsmc(train, 0.05)  # the reader's rows, as objects for callers that want them
    c = f.columns
    assert c["line"][:3] == [2, 3, 4] and len(f.rows) == 300
    assert f.rows[1] == NsmcRow(line=3, id=c["id"][1], document=c["text"][1], label=c["label"][1])


# --- KorQuAD ----------------------------------------------------------------------------------

def squad_questions(n: int, seed: int = 0) -> list[Question]:
    """Questions on contexts of 60-160 words (several windows at max_length 64), answers of 1-3 words at
    their offsets, some with edge whitespace."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        context = words(rng, rng.randint(60, 160))
        toks = context.split(" ")
        k = rng.randrange(len(toks) - 3)
        answer = " ".join(toks[k:k + rng.randint(1, 3)])
        start = len(" ".join(toks[:k])) + (1 if k else 0)
        if i % 5 == 0 and k:
            answer, start = " " + answer, start - 1
        out.append(Question(f"q{i}", words(rng, 4) + "?", context, ((answer, start),)))
    return out


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece([q.context for q in squad_questions(40)], vocab_size=300)


def encoded(tokenizer, questions, cfg):
    ds = rows(question_columns(questions))
    return ds, tokenize(ds, Korquad().encoder(tokenizer, cfg), desc="t", settings={}, cache_dir=None)


def test_the_scored_windows_as_arrays_give_the_same_n_best_lists(tokenizer):
    cfg = KorquadConfig(max_length=64, doc_stride=16, max_query_length=16)
    questions = squad_questions(40)
    w = make_windows(tokenizer, questions, cfg.max_length, cfg.doc_stride, cfg.max_query_length)
    assert np.bincount(w.question_index).min() >= 2  # several overlapping windows a question
    _, enc = encoded(tokenizer, questions, cfg)
    table = enc.data.table
    chunked = pa.concat_tables([table.slice(0, 7), table.slice(7, 30), table.slice(37)])  # sliced chunks
    rng = np.random.default_rng(3)
    starts = [rng.normal(size=len(ids)).astype(np.float32) for ids in w.input_ids]
    ends = [rng.normal(size=len(ids)).astype(np.float32) for ids in w.input_ids]
    from_lists = nbest_spans(questions, w, starts, ends, n_best=20, max_answer_length=30)
    for t in (table, chunked):
        spans = SpanIndex.of_table(t)
        lists = SpanIndex.of(w)
        assert np.array_equal(spans.question_index, lists.question_index)
        assert all(np.array_equal(getattr(spans, k).row(r), getattr(lists, k).row(r))
                   for k in ("start", "end", "max_context") for r in range(len(w.input_ids)))
        assert nbest_spans(questions, spans, starts, ends, n_best=20, max_answer_length=30) == from_lists
    # the answers themselves, as the lists give them: peaked logits at the gold tokens
    peaked = [np.where(np.arange(len(ids)) == s, 10.0, 0.0) for ids, s in zip(w.input_ids, w.start_positions)]
    peaked_end = [np.where(np.arange(len(ids)) == e, 10.0, 0.0) for ids, e in zip(w.input_ids, w.end_positions)]
    got = nbest_spans(questions, SpanIndex.of_table(chunked), peaked, peaked_end, n_best=5, max_answer_length=30)
    assert {q: s[0]["text"] for q, s in got.items()} == {q.id: q.answers[0][0].strip() for q in questions}


def test_the_scored_split_s_windows_are_held_as_arrays_not_a_tuple_a_token(tokenizer):
    """KorQuAD's dev set held 250 MB as a list and a tuple a token (about 190 bytes a token) for the whole run;
    as flat arrays, 17 bytes a token; read in place, a bool a token (plus the questions)."""
    cfg = KorquadConfig(max_length=64, doc_stride=16, max_query_length=16)
    questions = squad_questions(120, seed=1)
    ds, enc = encoded(tokenizer, questions, cfg)
    from kolectra.finetune.features import Features

    feats = Features.of(enc, tokenizer.pad_token_id, Korquad.per_token, Korquad.per_row)
    split = Split(ds, enc, feats)
    rng = np.random.default_rng(0)
    outputs = {k: [rng.normal(size=int(n)).astype(np.float32) for n in feats.lengths]
               for k in ("start_logits", "end_logits")}
    questions_bytes = sum(len(q.context) + len(q.question) for q in questions_from(ds.to_dict())) * 2
    gc.collect()
    tracemalloc.start()
    try:
        Korquad().score(split, outputs, cfg)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # what stays is split.derived (the n-best lists returned were dropped): questions and windows
    per_token = (held - 2 * questions_bytes) / feats.tokens
    assert per_token < 40, (per_token, held, feats.tokens)
