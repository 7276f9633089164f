"""KorQuAD 1.0 extractive QA: a task of the last stage of the chain.

Cuts every question + context into overlapping windows (:mod:`finetune.readers.korquad`), fine-tunes a
span head (start/end logits per token), decodes the best span of every dev question and scores it
with the official v1.0 semantics (:mod:`finetune.korquad_metric`); the steps are
:mod:`finetune.skeleton`'s.  The scored file is the dev file, so there is no model selection on
it: the model scored is always the last epoch's, and with ``eval_each_epoch`` the dev scores of
earlier epochs are only drawn on the learning curve.  Writes ``metrics.json`` (``exact_match``,
``f1`` in percent, ``eval_set`` naming what they are on), ``predictions.json`` (``{question_id:
answer_text}``), ``nbest_predictions.json`` (``{question_id: [{text, probability, score, ...}]}``,
best first) and ``learning_curve.{png,json}``.

When only one KorQuAD-format file is at hand, :func:`split_by_article` (re-exported here) makes
the train/dev pair; figures from such a split say so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from kolectra.core.stage import progress, warn
from kolectra.finetune import skeleton
from kolectra.finetune.features import TokenColumn, rows
from kolectra.finetune.files import FinetuneError, finite, write_json
from kolectra.finetune.korquad_metric import chance_f1, evaluate
from kolectra.finetune.readers.korquad import (
    SpanIndex,
    make_windows,
    missed,
    nbest_spans,
    question_columns,
    questions_from,
    read_squad,
    rounded_nbest,
    split_by_article,
    why_missed,
    window_columns,
)
from kolectra.finetune.readers.korquad_forms import placed, refound
from kolectra.finetune.report import PERCENT_DECIMALS, korquad_table

__all__ = ["run", "split_by_article", "write_split", "Korquad"]

STAGE_VERSION = 13  # bump when the same request's bytes change; history: docs/artifacts.md
# A run whose F1 stays under this many times the chance F1 learned nothing (health): a model that
# learned something clears it by far (KoELECTRA-Small: F1 89 on the dev set; chance about 4).
CHANCE_FACTOR = 2.0
# A span head whose last epoch's train loss is still this share of what guessing start and end
# uniformly over each window's tokens costs did not learn where answers are, whatever a few dev
# questions' F1 says: character-level F1 moves by points on one lucky syllable (on the embedded
# sample's 12 questions, F1 6.67 against chance 3.20 passed CHANCE_FACTOR with every answer wrong
# and the train loss at 98.5 % of that guess).
LOSS_SHARE = 0.95


def stored(scores: dict) -> dict:
    """``exact_match`` and ``f1`` of :func:`evaluate`'s ``scores`` as metrics.json and the manifest hold them: at
    :data:`finetune.report.PERCENT_DECIMALS` decimals, as NSMC's ``accuracy_pct`` (1 of 3 questions right had been
    stored as 33.333333333333336); printed tables format them as before."""
    return {k: round(scores[k], PERCENT_DECIMALS) for k in ("exact_match", "f1")}


def remapped(stats: dict, read: list, trained: list) -> dict:
    """The training file's reader ``stats`` once the questions ``read`` are ``trained`` as :func:`placed` and
    :func:`refound` put them, with two counts added: ``answer_starts_remapped``, the questions whose first answer is
    trained at another offset than its ``answer_start`` (counted in another Unicode form, or its text in another
    form), and ``bad_answer_starts_after_remapping``, ``bad_answer_starts`` less those of them that had missed it:
    the answers whose start still misses (a question left out of training, a later answer). ``bad_answer_starts``
    stays the file's count as written, as ``dev_file``'s and as korquad 11 and earlier stored it (364bb31 had made
    it the count after remapping, the same key meaning two things)."""
    moved = [(a, b) for a, b in zip(read, trained) if a.answers[0] != b.answers[0]]
    return {**stats, "answer_starts_remapped": len(moved),
            "bad_answer_starts_after_remapping": stats["bad_answer_starts"] - sum(not a.span_ok(0) for a, _ in moved)}


def uniform_span_loss(lengths) -> float:
    """The span loss (the mean of the start and end cross-entropies) of a head that gives each token
    of a window the same weight: ln(tokens), averaged over the windows. A head that has learned only
    to leave the padding alone is here; the initialised one, spread over the padding too, above."""
    lengths = [int(n) for n in lengths if n > 0]
    return sum(math.log(n) for n in lengths) / len(lengths) if lengths else 0.0


class Korquad(skeleton.Task):
    name = "korquad"
    auto_model = "AutoModelForQuestionAnswering"
    per_row = ("start_positions", "end_positions")
    outputs = {"start_logits": True, "end_logits": True}
    select = False
    stats = ("exact_match", "f1", "questions", "train_questions", "train_windows", "dev_windows", "eval_set")

    def pairs(self, cfg) -> bool:
        return True  # [CLS] question [SEP] context [SEP]

    def read(self, cfg, train_file, eval_file):
        (train, train_stats), (dev, dev_stats) = read_squad(train_file), read_squad(eval_file)
        train, dev = train[:cfg.max_train_examples or None], dev[:cfg.max_eval_examples or None]
        if not train or not dev:
            raise FinetuneError(f"no questions in {train_file if not train else eval_file}")
        # answer_start counted in the other Unicode form than the context's (NFC offsets of an NFD context): mapped
        read, (train, moved) = train, placed(train)
        for form, n in moved.items():
            if n and form != "text":  # the answer's text in another form: said with refound's below
                progress(f"korquad: {n} training question(s) whose answer_start counts its context in {form} "
                         f"({'composed' if form == 'NFC' else 'decomposed'} Hangul; the context is not) are trained "
                         "on the answer at that offset")
        # an answer in the other Unicode form than its context (NFC in an NFD context) is there: trained on its slice
        found = {q.id: f for q in train if (f := refound(q)) is not None}
        if found or moved["text"]:
            train = [found.get(q.id, q) for q in train]
            progress(f"korquad: {len(found) + moved['text']} training question(s) whose first answer is in its "
                     "context in another Unicode form (decomposed Hangul, NFD, on one side) are trained on the "
                     "context's slice of it")
        usable = [q for q in train if q.span_ok(0) and q.answers[0][0]]
        if not usable:
            # the questions read, their first answers: the file's count of every answer that misses
            # (bad_answer_starts) had said "(40 mismatches)" of the 5 questions max_train_examples=5 left
            cut = (f"; max_train_examples={cfg.max_train_examples} read the file's first {len(train)} of its "
                   f"{train_stats['questions']} questions: raise it (0: all)"
                   if len(train) < train_stats["questions"] else "")
            raise FinetuneError(f"{train_file}: no training question has its answer at its answer_start (the first "
                                f"answer of each of the {len(train)} questions read misses it): nothing to learn from"
                                + why_missed(train) + cut)
        missing, said = [q for q in train if not q.span_ok(0)], []
        if left_out := len(missing):
            # trained, every window of such a question would teach "no answer here" (the [CLS] target)
            # for a question that has one; BERT's SQuAD reader skips them too. Recorded in the stats' warnings
            # too (before 2026-12-02 on stderr alone: artifacts show, the report and run's summary said nothing)
            said.append(f"korquad: {left_out} training question(s) whose first answer is not at its answer_start "
                        f"are left out of training ({train_file}; train_questions_left_out)" + why_missed(missing))
            warn(said[-1])
        # questions read = train_questions + train_questions_left_out (by reason); the file's bad_answer_starts counts
        # the questions trained after their start was remapped above too: bad_answer_starts_after_remapping does not
        facts = {"train_file": remapped(train_stats, read, train), "dev_file": dev_stats,
                 "train_questions_left_out": left_out, "train_questions_left_out_by_reason": missed(missing),
                 "eval_set": eval_set_label(eval_file, dev_stats)}
        train = usable
        facts["shared_contexts"] = len({q.context for q in train} & {q.context for q in dev})
        return skeleton.Data(rows(question_columns(train)), rows(question_columns(dev)), None, facts, said)

    def encoder(self, tokenizer, cfg):
        def encode(batch: dict, indices: list[int]) -> dict:
            w = make_windows(tokenizer, questions_from(batch), cfg.max_length, cfg.doc_stride, cfg.max_query_length,
                             cfg.max_windows)
            return window_columns(w, indices[0] if indices else 0)
        return encode

    def encoding(self, cfg):
        return {"max_length": cfg.max_length, "doc_stride": cfg.doc_stride, "max_query_length": cfg.max_query_length,
                "max_windows": cfg.max_windows}

    def check(self, splits, data, cfg):
        cut = {name: [n for n in splits[name].encoded["windows_dropped"] if n] for name in ("train", "dev")}
        if any(cut.values()):
            warn(f"korquad: contexts longer than max_windows={cfg.max_windows} windows were cut there: "
                 + ", ".join(f"{len(n)} {name} question(s), {sum(n)} windows dropped" for name, n in cut.items() if n)
                 + " (an answer past the cut is not found); raise max_windows (0: no bound) to keep them")
        if cfg.doc_stride > cfg.max_length - cfg.max_query_length - 3:  # else every question leaves room for it
            capped = {name: stride_capped(splits[name].encoded, cfg.doc_stride, cfg.max_length)
                      for name in ("train", "dev")}
            if any(capped.values()):
                progress(f"korquad: note — doc_stride={cfg.doc_stride} is more than the context a window holds "
                         "after the question (max_length less its tokens and 3) for "
                         + ", ".join(f"{n} {name} question(s)" for name, n in capped.items() if n)
                         + ": their windows follow one another without overlap, a step of that context (none "
                           "skipped), not of doc_stride")
        with_answer = int((splits["train"].feats.per_row["start_positions"] > 0).sum())
        progress(f"korquad: {len(data.train)} train questions -> {len(splits['train'].feats)} windows "
                 f"({with_answer} holding the answer); {len(data.dev)} dev questions -> "
                 f"{len(splits['dev'].feats)} windows")
        if not with_answer:
            raise FinetuneError(f"korquad: no training window holds its question's answer: every answer is longer "
                                f"than the context a window of max_length={cfg.max_length} leaves; raise max_length")

    def score(self, split, outputs, cfg):
        if "questions" not in split.derived:  # built once per split, reused every epoch
            # a batch of rows at a time: the whole table as Python lists held every context once a question
            split.derived.update(questions=[q for batch in split.rows.iter(batch_size=1024) for q in questions_from(batch)],
                                 windows=SpanIndex.of_table(split.encoded.data.table))
        questions = split.derived["questions"]
        nbest = nbest_spans(questions, split.derived["windows"], outputs["start_logits"], outputs["end_logits"],
                            cfg.n_best, cfg.max_answer_length)
        answers = {qid: spans[0]["text"] for qid, spans in nbest.items()}
        return evaluate({q.id: q.answer_texts for q in questions}, answers), nbest

    def evaluate_after(self, epoch, cfg):
        # reported for the learning curve only: the model kept is the last epoch's whatever these say
        return cfg.eval_each_epoch or epoch == cfg.epochs

    def epoch_record(self, scores):
        return {"dev_exact_match": round(scores["exact_match"], PERCENT_DECIMALS),
                "dev_f1": round(scores["f1"], PERCENT_DECIMALS)}

    def health(self, splits, fit):
        """Learned nothing: every answer empty, a train loss still near guessing spans uniformly
        (:func:`uniform_span_loss`: a few dev questions cannot tell), or an F1 under twice what spans
        placed without reading the question score (:func:`chance_f1`)."""
        empty = sum(1 for spans in fit.final.predictions.values() if not spans[0]["text"])
        s = fit.final.scores
        chance = chance_f1(splits["dev"].derived["questions"])
        figures = {"empty_predictions": empty, **stored(s), "chance_f1": round(chance, PERCENT_DECIMALS)}
        if empty == len(fit.final.predictions):
            return ["no question got a non-empty answer: the span head learned nothing"], figures
        loss, uniform = fit.log.history[-1]["train_loss"], uniform_span_loss(splits["train"].feats.lengths)
        figures.update(train_loss=round(loss, 4), uniform_span_loss=round(uniform, 4))
        problems = []
        if s["f1"] < CHANCE_FACTOR * chance:
            problems.append(f"EM {s['exact_match']:.2f} and F1 {s['f1']:.2f} are at chance level: spans of the answer's "
                            f"length placed without reading the question score F1 {chance:.2f} on these "
                            f"{s['questions']} questions; the span head learned nothing")
        if uniform and loss >= LOSS_SHARE * uniform:
            problems.append(f"the last epoch's train loss {loss:.3f} is {loss / uniform:.1%} of what guessing the answer's "
                            f"start and end uniformly over each window costs ({uniform:.3f}): the span head did not "
                            f"learn where answers are")
        return problems, figures

    def metrics(self, data, splits, fit):
        s, nbest = fit.final.scores, fit.final.predictions
        return {**stored(s), "questions": s["questions"],
                "metric": "KorQuAD v1.0 official semantics (char-level F1)",
                "empty_predictions": sum(1 for spans in nbest.values() if not spans[0]["text"]),
                "train_questions": len(data.train), "train_windows": len(splits["train"].feats),
                "train_windows_with_answer": int((splits["train"].feats.per_row["start_positions"] > 0).sum()),
                "dev_windows": len(splits["dev"].feats)}

    def write(self, out_dir, splits, fit):
        # ASCII with escapes, as the official dev file is: the official script opens it in the locale's encoding,
        # and Korean in UTF-8 read as cp949 (Windows in Korea) or ASCII (a C locale) scores as other text or fails
        write_json(out_dir / "predictions.json", {qid: s[0]["text"] for qid, s in fit.final.predictions.items()},
                   ascii_only=True)
        write_nbest(out_dir / "nbest_predictions.json", fit.final.predictions)

    def table(self, metrics):
        return korquad_table(metrics)


def write_nbest(path: Path, nbest) -> None:
    """``nbest_predictions.json``: the bytes ``write_json(path, rounded_nbest(nbest))`` writes (sorted keys,
    indent 2, UTF-8), written a question at a time: the rounded dicts of every question and the whole
    text beside them were the largest part of the run's last step (docs/finetune.md)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("{")
        for n, qid in enumerate(sorted(nbest)):
            spans = json.dumps(finite(rounded_nbest({qid: nbest[qid]})[qid]), ensure_ascii=False, indent=2,
                               sort_keys=True, allow_nan=False)
            f.write(("\n  " if n == 0 else ",\n  ") + json.dumps(qid, ensure_ascii=False) + ": "
                    + spans.replace("\n", "\n  "))
        f.write("\n}\n" if nbest else "}\n")


def stride_capped(encoded, doc_stride: int, max_length: int) -> int:
    """How many questions of ``encoded`` (windows, a question's in a row) have more than one window and
    less context in their first one than ``doc_stride`` (:func:`make_windows` then steps by that room:
    BERT's loop takes the smaller). Read in place from the Arrow columns, 1,024 first windows at a time."""
    index = encoded.data.table.column("question_index").to_numpy()
    first = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    several = first[np.diff(np.r_[first, len(index)]) > 1]
    offsets = TokenColumn(encoded.data.table.column("offset_start"))  # -1 off the context
    return sum(int(((offsets.rows(several[i:i + 1024], max_length, -1) >= 0).sum(axis=1) < doc_stride).sum())
               for i in range(0, len(several), 1024))


def run(cfg, model_dir, train_file, dev_file, out_dir, cache_dir=None):
    """Fine-tune on ``train_file``, score ``dev_file`` (last epoch), write to ``out_dir``."""
    return skeleton.run(Korquad(), cfg, model_dir, train_file, dev_file, out_dir, cache_dir)


def eval_set_label(dev_file: Path, dev_stats: dict) -> str:
    """Names what the scores are on; a by-article split is never called the official dev set."""
    split = dev_stats.get("split")
    if split:
        return (f"by-article split (side {split.get('side')}, seed {split.get('seed')}, "
                f"dev_fraction {split.get('dev_fraction')}) of {split.get('source')}; NOT official figures")
    return Path(dev_file).name


def write_split(path: Path, dev_fraction: float, seed: int, out_dir: Path) -> tuple[Path, Path]:
    """:func:`split_by_article` written to ``out_dir/{train,dev}.json`` (same inputs, same bytes)."""
    train, dev = split_by_article(Path(path), dev_fraction, seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / "train.json", out_dir / "dev.json"
    for p, doc in zip(paths, (train, dev)):
        p.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return paths
