"""A frozen-encoder linear probe on NSMC: how much a pretrained encoder's features already know.

Fine-tuning moves every weight and, on a small model, can reach much the same score from a
random initialisation as from a briefly pretrained one, which hides what pretraining bought. A
linear probe does not: the encoder stays frozen, each review becomes the mean of its last
layer's states over its real tokens, and a logistic regression (scikit-learn, standardised
features, L2, lbfgs: deterministic) learns the sentiment from a few thousand labelled rows. The
score on the held-out rows is what the representation carries. The study
(:mod:`kolectra.pipeline.study.runner`) reads it beside low-data fine-tuning.

``run`` writes ``metrics.json`` (``accuracy`` on the evaluation file, train accuracy, counts)
and ``predictions.jsonl`` (one line per evaluation row, in file order: ``id``, ``label``,
``predicted``), and returns the stage output the artifact store publishes as an eval artifact.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from kolectra.core.config import ConfigError, to_dict
from kolectra.core.stage import StageOutput, progress
from kolectra.finetune.files import FinetuneError, write_json
from kolectra.finetune.loading import load_tokenizer
from kolectra.finetune.progress import quiet_libraries
from kolectra.finetune.readers.nsmc import read_nsmc

STAGE_VERSION = 1  # bump when the same request's bytes change; history: docs/artifacts.md


@dataclasses.dataclass(frozen=True)
class ProbeConfig:
    seed: int = 0  # which rows of the train file the probe learns from (with max_train_examples)
    max_length: int = 128
    batch_size: int = 64
    max_train_examples: int = 0  # 0 = every row of the train file; else a seeded sample of this many
    C: float = 1.0  # inverse L2 strength of the logistic regression
    threads: int = 0  # torch intra-op threads while encoding (0 = leave torch's setting)

    def validate(self) -> None:
        """Raise a ConfigError if a setting cannot work."""
        if self.max_length < 4 or self.batch_size < 1 or self.max_train_examples < 0 or self.C <= 0:
            raise ConfigError("probe: max_length >= 4, batch_size >= 1, max_train_examples >= 0 and C > 0")


@torch.no_grad()
def features(model_dir: Path, texts: list[str], max_length: int, batch_size: int) -> np.ndarray:
    """Mean-pooled last-layer states of the encoder in ``model_dir`` (any ELECTRA export): [N, H]."""
    from transformers import AutoModel  # noqa: PLC0415 - transformers: slow to import, only when a probe runs

    tok = load_tokenizer(Path(model_dir))
    try:
        with quiet_libraries():
            encoder = AutoModel.from_pretrained(str(model_dir)).eval()
    except (OSError, ValueError) as e:
        raise FinetuneError(f"{model_dir}: cannot load the encoder: {e}") from None
    enc = tok(texts, truncation=True, max_length=max_length)["input_ids"]
    order = np.argsort([len(x) for x in enc], kind="stable")  # similar lengths per batch: little padding
    out = np.zeros((len(texts), encoder.config.hidden_size), dtype=np.float32)
    for i in range(0, len(order), batch_size):
        idx = order[i:i + batch_size]
        batch = tok.pad({"input_ids": [enc[j] for j in idx]}, return_tensors="pt")
        h_BLH = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        mask_BL1 = batch["attention_mask"].unsqueeze(-1).float()
        out[idx] = ((h_BLH * mask_BL1).sum(1) / mask_BL1.sum(1).clamp(min=1.0)).numpy()
    return out


def run(cfg: ProbeConfig, model_dir: Path, train_file: Path, eval_file: Path, out_dir: Path) -> StageOutput:
    t0 = time.perf_counter()
    train_rows, eval_rows = read_nsmc(Path(train_file)).rows, read_nsmc(Path(eval_file)).rows
    if cfg.max_train_examples and cfg.max_train_examples < len(train_rows):
        pick = np.sort(np.random.default_rng(cfg.seed).choice(len(train_rows), cfg.max_train_examples, replace=False))
        train_rows = [train_rows[i] for i in pick]
    labels = {r.label for r in train_rows}
    if len(labels) < 2 or not eval_rows:
        raise FinetuneError(f"probe: {train_file} needs both labels ({sorted(labels)} found) and {eval_file} rows")
    threads_before = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        x = features(model_dir, [r.document for r in train_rows + eval_rows], cfg.max_length, cfg.batch_size)
    finally:
        torch.set_num_threads(threads_before)
    x_train, x_eval = x[:len(train_rows)], x[len(train_rows):]
    y_train = np.array([r.label for r in train_rows])
    y_eval = np.array([r.label for r in eval_rows])
    clf = make_pipeline(StandardScaler(), LogisticRegression(C=cfg.C, max_iter=2000))
    clf.fit(x_train, y_train)
    predicted = clf.predict(x_eval)
    accuracy = float((predicted == y_eval).mean())
    metrics = {"task": "probe", "accuracy": accuracy, "train_accuracy": float(clf.score(x_train, y_train)),
               "train_examples": len(train_rows), "eval_examples": len(eval_rows),
               "majority_share": float(max(y_eval.mean(), 1 - y_eval.mean())), "config": to_dict(cfg)}
    write_json(Path(out_dir) / "metrics.json", metrics)
    with (Path(out_dir) / "predictions.jsonl").open("w", encoding="utf-8") as f:
        for r, p in zip(eval_rows, predicted):
            f.write(json.dumps({"id": r.id, "label": r.label, "predicted": int(p)}) + "\n")
    seconds = time.perf_counter() - t0
    progress(f"probe: accuracy {accuracy:.4f} on {len(eval_rows)} rows (trained on {len(train_rows)}) in {seconds:.0f}s")
    return StageOutput(stats={k: metrics[k] for k in ("accuracy", "train_accuracy", "train_examples", "eval_examples")},
                       compute={"wall_seconds": round(seconds, 3), "device": "cpu",
                                "parameters_frozen": int(x.shape[1])})
