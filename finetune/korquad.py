"""KorQuAD 1.0 extractive QA fine-tuning: the second task of the last stage of the chain.

``run`` loads an ELECTRA discriminator directory with a fresh span head (start/end logits per
token), trains on the windows of the train file (``finetune.squad_data``), decodes the best span
of every dev question and scores it with the official v1.0 semantics
(``finetune.korquad_metric``).  Writes ``metrics.json`` (``exact_match``, ``f1`` in percent,
``eval_set`` naming what they are on), ``predictions.json`` (``{question_id: answer_text}``),
``nbest_predictions.json`` (``{question_id: [{text, probability, score, ...}]}``, best first) and
``learning_curve.{png,json}``.  There is no model selection on the dev file: the model scored is
always the last epoch's; with ``eval_each_epoch`` the dev scores of earlier epochs are only
drawn on the learning curve.

When only one KorQuAD-format file is at hand, :func:`split_by_article` (re-exported here) makes
the train/dev pair; figures from such a split must say so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from kolectra.finetune.config import KorquadConfig
from kolectra.finetune.korquad_metric import evaluate
from kolectra.finetune.report import korquad_table, write_learning_curve
from kolectra.finetune.runtime import (FinetuneError, autocast, compute_record, fixed_width, length_sorted_batches,
                              load_model, load_tokenizer, resolve_device, seed_everything, train_epochs,
                              write_json)
from kolectra.finetune.squad_data import (Question, Windows, make_windows, nbest_spans, read_squad, rounded_nbest,
                                  split_by_article)
from kolectra.core.config import to_dict
from kolectra.core.stage import StageOutput, progress

__all__ = ["run", "split_by_article", "write_split", "predict"]


def write_split(path: Path, dev_fraction: float, seed: int, out_dir: Path) -> tuple[Path, Path]:
    """:func:`split_by_article` written to ``out_dir/{train,dev}.json`` (same inputs, same bytes)."""
    train, dev = split_by_article(Path(path), dev_fraction, seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / "train.json", out_dir / "dev.json"
    for p, doc in zip(paths, (train, dev)):
        p.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return paths


def _padded(w: Windows, pad_id: int) -> dict:
    """The windows as padded tensors, built once per Windows object (a batch is then a row
    selection and a column cut instead of a Python loop over rows)."""
    cached = getattr(w, "_padded_cache", None)
    if cached is None:
        n, width = len(w.input_ids), max(1, max((len(x) for x in w.input_ids), default=1))
        ids_NL = torch.full((n, width), pad_id, dtype=torch.long)
        types_NL = torch.zeros((n, width), dtype=torch.long)
        mask_NL = torch.zeros((n, width), dtype=torch.long)
        for row, (ids, types) in enumerate(zip(w.input_ids, w.token_type_ids)):
            ids_NL[row, :len(ids)] = torch.tensor(ids)
            types_NL[row, :len(ids)] = torch.tensor(types)
            mask_NL[row, :len(ids)] = 1
        cached = {"input_ids": ids_NL, "token_type_ids": types_NL, "attention_mask": mask_NL,
                  "lengths": np.array([len(x) for x in w.input_ids]),
                  "start_positions": torch.tensor(w.start_positions), "end_positions": torch.tensor(w.end_positions)}
        w._padded_cache = cached
    return cached


def _batch(w: Windows, idx: np.ndarray, pad_id: int, device: torch.device, labels: bool,
           max_length: int) -> dict:
    p = _padded(w, pad_id)
    sel = torch.as_tensor(idx)
    width = fixed_width(device, max_length) or int(p["lengths"][idx].max())
    out = {}
    for key, fill in (("input_ids", pad_id), ("token_type_ids", 0), ("attention_mask", 0)):
        t = p[key][sel, :width]
        if t.shape[1] < width:  # fixed width (XLA) wider than the longest window
            t = torch.nn.functional.pad(t, (0, width - t.shape[1]), value=fill)
        out[key] = t.to(device)
    if labels:
        out["start_positions"] = p["start_positions"][sel].to(device)
        out["end_positions"] = p["end_positions"][sel].to(device)
    return out


@torch.no_grad()
def predict(model, questions: list[Question], w: Windows, cfg: KorquadConfig, pad_id: int,
            device: torch.device) -> dict[str, list[dict]]:
    """The n-best answers of every question (best first), from the model's span logits."""
    model.eval()
    starts: list[np.ndarray] = [np.zeros(0)] * len(w.input_ids)
    ends: list[np.ndarray] = [np.zeros(0)] * len(w.input_ids)
    for idx in length_sorted_batches([len(x) for x in w.input_ids], cfg.eval_batch_size):
        with autocast(device):
            out = model(**_batch(w, idx, pad_id, device, labels=False, max_length=cfg.max_length))
        s = out.start_logits.float().cpu().numpy()
        e = out.end_logits.float().cpu().numpy()
        for row, i in enumerate(idx):
            n = len(w.input_ids[i])
            starts[i], ends[i] = s[row, :n], e[row, :n]
    return nbest_spans(questions, w, starts, ends, cfg.n_best, cfg.max_answer_length)


def eval_set_label(dev_file: Path, dev_stats: dict) -> str:
    """Names what the scores are on; a by-article split is never called the official dev set."""
    split = dev_stats.get("split")
    if split:
        return (f"by-article split (side {split.get('side')}, seed {split.get('seed')}, "
                f"dev_fraction {split.get('dev_fraction')}) of {split.get('source')}; NOT official figures")
    return Path(dev_file).name


def run(cfg: KorquadConfig, model_dir: Path, train_file: Path, dev_file: Path, out_dir: Path) -> StageOutput:
    from transformers import AutoModelForQuestionAnswering  # noqa: PLC0415

    t_start = time.perf_counter()
    seed_everything(cfg.seed)
    device = resolve_device(cfg.device)
    train_q, train_stats = read_squad(Path(train_file))
    dev_q, dev_stats = read_squad(Path(dev_file))
    if cfg.max_train_examples:
        train_q = train_q[:cfg.max_train_examples]
    if cfg.max_eval_examples:
        dev_q = dev_q[:cfg.max_eval_examples]
    if not train_q or not dev_q:
        raise FinetuneError(f"no questions in {train_file if not train_q else dev_file}")
    overlap = {q.context for q in train_q} & {q.context for q in dev_q}
    tokenizer = load_tokenizer(Path(model_dir))
    train_w = make_windows(tokenizer, train_q, cfg.max_length, cfg.doc_stride, cfg.max_query_length)
    dev_w = make_windows(tokenizer, dev_q, cfg.max_length, cfg.doc_stride, cfg.max_query_length)
    with_answer = sum(1 for s in train_w.start_positions if s > 0)
    progress(f"korquad: {len(train_q)} train questions -> {len(train_w.input_ids)} windows "
             f"({with_answer} holding the answer); {len(dev_q)} dev questions -> {len(dev_w.input_ids)} windows")
    model = load_model(AutoModelForQuestionAnswering, Path(model_dir), cfg.seed).to(device)
    pad_id = tokenizer.pad_token_id
    gold = {q.id: q.answer_texts for q in dev_q}
    last = {"nbest": None, "scores": None, "seconds": 0.0}

    def loss_fn(idx: np.ndarray) -> torch.Tensor:
        return model(**_batch(train_w, idx, pad_id, device, labels=True, max_length=cfg.max_length)).loss

    def evaluate_dev() -> dict:
        t0 = time.perf_counter()
        nbest = predict(model, dev_q, dev_w, cfg, pad_id, device)
        last.update(nbest=nbest, seconds=time.perf_counter() - t0,
                    scores=evaluate(gold, {qid: spans[0]["text"] for qid, spans in nbest.items()}))
        return last["scores"]

    def after_epoch(epoch: int) -> dict:
        # reported for the learning curve only: the model kept is the last epoch's whatever these say
        if not cfg.eval_each_epoch and epoch < cfg.epochs:
            return {}
        scores = evaluate_dev()
        return {"dev_exact_match": round(scores["exact_match"], 4), "dev_f1": round(scores["f1"], 4)}

    log = train_epochs(model, cfg.optim, len(train_w.input_ids), cfg.batch_size, cfg.epochs, cfg.seed,
                       device, loss_fn, after_epoch)
    train_seconds = sum(t["seconds"] for t in log.timings)  # per-epoch timings leave dev evaluation out
    if last["nbest"] is None:  # epochs == 0
        evaluate_dev()
    nbest, scores, eval_seconds = last["nbest"], last["scores"], last["seconds"]
    predictions = {qid: spans[0]["text"] for qid, spans in nbest.items()}

    metrics = {
        "task": "korquad",
        "exact_match": scores["exact_match"], "f1": scores["f1"],
        "metric": "KorQuAD v1.0 official semantics (char-level F1)",
        "eval_set": eval_set_label(Path(dev_file), dev_stats),
        "questions": scores["questions"], "empty_predictions": sum(1 for v in predictions.values() if not v),
        "epochs": log.history,
        "train_questions": len(train_q), "train_windows": len(train_w.input_ids),
        "train_windows_with_answer": with_answer, "dev_windows": len(dev_w.input_ids),
        "shared_contexts": len(overlap),
        "train_file": train_stats, "dev_file": dev_stats,
        "config": to_dict(cfg),
    }
    out_dir = Path(out_dir)
    write_json(out_dir / "metrics.json", metrics)
    write_json(out_dir / "predictions.json", predictions)
    write_json(out_dir / "nbest_predictions.json", rounded_nbest(nbest))
    write_learning_curve(out_dir, "korquad", metrics, log)
    for line in korquad_table(metrics).splitlines():
        progress(line)
    tokens = sum(len(x) for x in train_w.input_ids)
    compute = compute_record(
        model, device, time.perf_counter() - t_start,
        train_examples=len(train_w.input_ids), train_questions=len(train_q),
        train_seconds=round(train_seconds, 3),
        train_examples_per_second=round(len(train_w.input_ids) * cfg.epochs / train_seconds, 2) if train_seconds else None,
        eval_examples=len(dev_w.input_ids),
        eval_examples_per_second=round(len(dev_w.input_ids) / eval_seconds, 2) if eval_seconds else None,
        epochs=log.timings,
        # ~6 FLOPs per parameter per trained token (Kaplan et al. 2020); padding not counted
        flops=6 * sum(p.numel() for p in model.parameters()) * tokens * cfg.epochs,
    )
    stats = {k: metrics[k] for k in ("exact_match", "f1", "questions", "train_questions",
                                     "train_windows", "dev_windows", "eval_set")}
    return StageOutput(stats=stats, compute=compute)
