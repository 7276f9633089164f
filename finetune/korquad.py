"""KorQuAD 1.0 extractive QA fine-tuning: the second task of the last stage of the chain.

``run`` loads an ELECTRA discriminator directory with a fresh span head (start/end logits per
token), trains on the windows of the train file (``finetune.squad_data``), decodes the best span
of every dev question and scores it with the official v1.0 semantics
(``finetune.korquad_metric``).  Writes ``metrics.json`` (``exact_match``, ``f1`` in percent) and
``predictions.json`` (``{question_id: answer_text}``).  The dev file is only used once, after
training: there is no model selection on it.

When only one KorQuAD-format file is at hand, :func:`split_by_article` (re-exported here) makes
the train/dev pair; figures from such a split must say so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from finetune.config import KorquadConfig
from finetune.korquad_metric import evaluate
from finetune.runtime import (FinetuneError, autocast, batches, compute_record, fixed_width, load_model,
                              load_tokenizer, resolve_device, seed_everything, train_epochs,
                              write_json)
from finetune.squad_data import Question, Windows, decode, make_windows, read_squad, split_by_article
from pipeline.config import to_dict
from pipeline.stage import StageOutput, progress

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


def _batch(w: Windows, idx: np.ndarray, pad_id: int, device: torch.device, labels: bool,
           max_length: int) -> dict:
    width = fixed_width(device, max_length) or max(len(w.input_ids[i]) for i in idx)
    ids_BL = torch.full((len(idx), width), pad_id, dtype=torch.long)
    types_BL = torch.zeros((len(idx), width), dtype=torch.long)
    mask_BL = torch.zeros((len(idx), width), dtype=torch.long)
    for row, i in enumerate(idx):
        n = len(w.input_ids[i])
        ids_BL[row, :n] = torch.tensor(w.input_ids[i])
        types_BL[row, :n] = torch.tensor(w.token_type_ids[i])
        mask_BL[row, :n] = 1
    out = {"input_ids": ids_BL.to(device), "token_type_ids": types_BL.to(device),
           "attention_mask": mask_BL.to(device)}
    if labels:
        sel = torch.as_tensor(idx)
        out["start_positions"] = torch.tensor(w.start_positions)[sel].to(device)
        out["end_positions"] = torch.tensor(w.end_positions)[sel].to(device)
    return out


@torch.no_grad()
def predict(model, questions: list[Question], w: Windows, cfg: KorquadConfig, pad_id: int,
            device: torch.device) -> dict[str, str]:
    model.eval()
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    for idx in batches(len(w.input_ids), cfg.eval_batch_size, None):
        with autocast(device):
            out = model(**_batch(w, idx, pad_id, device, labels=False, max_length=cfg.max_length))
        s = out.start_logits.float().cpu().numpy()
        e = out.end_logits.float().cpu().numpy()
        for row, i in enumerate(idx):
            n = len(w.input_ids[i])
            starts.append(s[row, :n])
            ends.append(e[row, :n])
    return decode(questions, w, starts, ends, cfg.n_best, cfg.max_answer_length)


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

    def loss_fn(idx: np.ndarray) -> torch.Tensor:
        return model(**_batch(train_w, idx, pad_id, device, labels=True, max_length=cfg.max_length)).loss

    t_train = time.perf_counter()
    history, timings = train_epochs(model, cfg.optim, len(train_w.input_ids), cfg.batch_size,
                                    cfg.epochs, cfg.seed, device, loss_fn)
    train_seconds = time.perf_counter() - t_train
    t_eval = time.perf_counter()
    predictions = predict(model, dev_q, dev_w, cfg, pad_id, device)
    eval_seconds = time.perf_counter() - t_eval
    scores = evaluate({q.id: q.answer_texts for q in dev_q}, predictions)
    progress(f"korquad: EM {scores['exact_match']:.2f} F1 {scores['f1']:.2f} on {len(dev_q)} questions")

    metrics = {
        "task": "korquad",
        "exact_match": scores["exact_match"], "f1": scores["f1"],
        "metric": "KorQuAD v1.0 official semantics (char-level F1)",
        "questions": scores["questions"], "empty_predictions": sum(1 for v in predictions.values() if not v),
        "epochs": history,
        "train_questions": len(train_q), "train_windows": len(train_w.input_ids),
        "train_windows_with_answer": with_answer, "dev_windows": len(dev_w.input_ids),
        "shared_contexts": len(overlap),
        "train_file": train_stats, "dev_file": dev_stats,
        "config": to_dict(cfg),
    }
    write_json(Path(out_dir) / "metrics.json", metrics)
    write_json(Path(out_dir) / "predictions.json", predictions)
    tokens = sum(len(x) for x in train_w.input_ids)
    compute = compute_record(
        model, device, time.perf_counter() - t_start,
        train_examples=len(train_w.input_ids), train_questions=len(train_q),
        train_seconds=round(train_seconds, 3),
        train_examples_per_second=round(len(train_w.input_ids) * cfg.epochs / train_seconds, 2) if train_seconds else None,
        eval_examples=len(dev_w.input_ids),
        eval_examples_per_second=round(len(dev_w.input_ids) / eval_seconds, 2) if eval_seconds else None,
        epochs=timings,
        # ~6 FLOPs per parameter per trained token (Kaplan et al. 2020); padding not counted
        flops=6 * sum(p.numel() for p in model.parameters()) * tokens * cfg.epochs,
    )
    stats = {k: metrics[k] for k in ("exact_match", "f1", "questions", "train_questions",
                                     "train_windows", "dev_windows")}
    return StageOutput(stats=stats, compute=compute)
