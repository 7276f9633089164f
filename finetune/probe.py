"""A frozen-encoder linear probe on NSMC: how much a pretrained encoder's features already know.

Fine-tuning moves every weight and, on a small model, can reach much the same score from a
random initialisation as from a briefly pretrained one, which hides what pretraining bought. A
linear probe does not: the encoder stays frozen, each review becomes the mean of one layer's
states over its real tokens (or that layer's [CLS] state: ``pooling``; the top layer unless
``layer`` names another, or ``best`` picks it on dev rows carved from the train file), and a
logistic regression (scikit-learn, standardised features, L2, lbfgs: deterministic) learns the
sentiment from a few thousand labelled rows. The score on the held-out rows is what the
representation carries. The study
(:mod:`kolectra.pipeline.study.runner`) reads it beside low-data fine-tuning.

``run`` writes ``metrics.json`` (``accuracy`` on the evaluation file, train accuracy, counts, the
layer read and, for ``best``, every layer's dev accuracy; ``health``, fine-tuning's verdict: one
class predicted for every evaluation row, or no better than that, is ``not_learning``) and
``predictions.jsonl`` (one line per evaluation row, in file order: ``id``, ``label``,
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
from kolectra.finetune.files import FinetuneError, say_bad, write_json
from kolectra.finetune.loading import check_fits, check_weights, load_tokenizer
from kolectra.finetune.positions import warn_untrained
from kolectra.finetune.progress import quiet_libraries
from kolectra.finetune.readers.nsmc import read_nsmc
from kolectra.finetune.skeleton import majority_check
from kolectra.model.electra import count_parameters
from kolectra.model.hf_folder import NO_CODE

STAGE_VERSION = 6  # bump when the same request's bytes change; history: docs/artifacts.md


POOLINGS = ("mean", "cls")


@dataclasses.dataclass(frozen=True)
class ProbeConfig:
    seed: int = 0  # which rows of the train file the probe learns from (with max_train_examples), the dev rows
    max_length: int = 128
    batch_size: int = 64
    max_train_examples: int = 0  # 0 = every row of the train file; else a seeded sample of this many
    C: float = 1.0  # inverse L2 strength of the logistic regression
    threads: int = 0  # torch intra-op threads while encoding (0 = leave torch's setting)
    # Which hidden states are read: "last" (the top layer), a number (0 = the embeddings' output,
    # 1 = the first layer's, ...) or "best": the layer whose probe scores best on ``dev_rows`` rows
    # carved from the train file (never the evaluation rows).  An early ELECTRA discriminator's top
    # layer reads worse than its lower ones (issue 44: below the untrained floor at mini, 1.8e13 FLOPs).
    layer: str = "last"
    pooling: str = "mean"  # mean over the real tokens | cls: the [CLS] position's state
    # rows of the train file (seeded) the "best" layer is chosen on; the chosen layer's probe then
    # learns from every train row.  At most half the train rows.  Unused for a fixed layer.
    dev_rows: int = 1000

    def validate(self) -> None:
        """Raise a ConfigError if a setting cannot work."""
        if self.max_length < 4 or self.batch_size < 1 or self.max_train_examples < 0 or self.C <= 0:
            raise ConfigError("probe: max_length >= 4, batch_size >= 1, max_train_examples >= 0 and C > 0")
        if self.layer not in ("last", "best") and not self.layer.isdigit():
            raise ConfigError(f"layer: must be last, best or a layer number (0 = the embeddings), got {self.layer!r}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling: must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if self.dev_rows < 1:
            raise ConfigError(f"dev_rows: must be at least 1, got {self.dev_rows}")
        if self.threads < 0:  # torch.set_num_threads refused it once the train rows were read
            raise ConfigError(f"threads: must be 0 (leave torch's setting) or more, got {self.threads}")


def load_encoder(model_dir: Path):
    """(tokenizer, frozen encoder in eval mode) of any ELECTRA export."""
    from transformers import AutoModel  # noqa: PLC0415 - transformers: slow to import, only when a probe runs

    tok = load_tokenizer(Path(model_dir))
    try:
        with quiet_libraries():
            encoder, info = AutoModel.from_pretrained(str(model_dir), output_loading_info=True, **NO_CODE)
    except (OSError, ValueError) as e:
        raise FinetuneError(f"{model_dir}: cannot load the encoder: {e}") from None
    # renamed or foreign weights left the encoder at its random initialisation, read without a word
    check_weights(encoder, info, Path(model_dir), "The probe would read a randomly initialised encoder")
    return tok, encoder.eval()


def layers_read(cfg: ProbeConfig, n_layers: int) -> list[int]:
    """The hidden-state indices the probe needs (0 = embeddings, ``n_layers`` = the top layer)."""
    if cfg.layer == "best":
        return list(range(n_layers + 1))
    layer = n_layers if cfg.layer == "last" else int(cfg.layer)
    if layer > n_layers:
        raise ConfigError(f"layer: the model has {n_layers} layers (0 = the embeddings), got {layer}")
    return [layer]


@torch.no_grad()
def features(tok, encoder, texts: list[str], max_length: int, batch_size: int, layers: list[int],
             pooling: str = "mean", tokens: list[int] | None = None) -> np.ndarray:
    """Pooled hidden states of ``layers`` for every text: [len(layers), N, H]. ``tokens``: gets the
    number of tokens encoded appended (the FLOPs of the manifest's ``compute``)."""
    enc = tok(texts, truncation=True, max_length=max_length)["input_ids"]
    if tokens is not None:
        tokens.append(sum(map(len, enc)))
    order = np.argsort([len(x) for x in enc], kind="stable")  # similar lengths per batch: little padding
    out = np.zeros((len(layers), len(texts), encoder.config.hidden_size), dtype=np.float32)
    for i in range(0, len(order), batch_size):
        idx = order[i:i + batch_size]
        batch = tok.pad({"input_ids": [enc[j] for j in idx]}, return_tensors="pt")
        states = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         output_hidden_states=True).hidden_states
        mask_BL1 = batch["attention_mask"].unsqueeze(-1).float()
        for n, layer in enumerate(layers):
            h_BLH = states[layer]
            out[n, idx] = (h_BLH[:, 0] if pooling == "cls" else
                           (h_BLH * mask_BL1).sum(1) / mask_BL1.sum(1).clamp(min=1.0)).numpy()
    return out


def fit(x: np.ndarray, y: np.ndarray, C: float):
    """Standardised features, L2 logistic regression (lbfgs: deterministic)."""
    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000)).fit(x, y)


def choose_layer(x_LNH: np.ndarray, y: np.ndarray, dev_idx: np.ndarray, C: float) -> tuple[int, list[float]]:
    """The layer whose probe, fit on the train rows outside ``dev_idx``, scores best on ``dev_idx``
    (the first such layer on a tie), and every layer's dev accuracy.  Only train rows come in: the
    evaluation rows cannot move the choice."""
    inside = np.zeros(len(y), dtype=bool)
    inside[dev_idx] = True
    scores = [float(fit(x[~inside], y[~inside], C).score(x[inside], y[inside])) for x in x_LNH]
    return int(np.argmax(scores)), scores


def run(cfg: ProbeConfig, model_dir: Path, train_file: Path, eval_file: Path, out_dir: Path,
        eval_set: str = "") -> StageOutput:
    """``eval_set``: what ``eval_file``'s rows are (a study's held-out rows), recorded in ``metrics.json``
    and said with the accuracy; without it a probe's bytes are as they were."""
    t0 = time.perf_counter()
    cfg.validate()
    files = {"train_file": read_nsmc(Path(train_file)), "eval_file": read_nsmc(Path(eval_file))}
    said = []  # each file's bad rows left out, positions never pretrained: for the stats' warnings too
    for (key, read), path in zip(files.items(), (train_file, eval_file)):
        said += say_bad("probe", read.stats, key, Path(path).name)
    train_rows, eval_rows = files["train_file"].rows, files["eval_file"].rows
    if cfg.max_train_examples and cfg.max_train_examples < len(train_rows):
        pick = np.sort(np.random.default_rng(cfg.seed).choice(len(train_rows), cfg.max_train_examples, replace=False))
        train_rows = [train_rows[i] for i in pick]
    labels = {r.label for r in train_rows}
    if len(labels) < 2 or not eval_rows:
        raise FinetuneError(f"probe: {train_file} needs both labels ({sorted(labels)} found) and {eval_file} rows")
    tok, encoder = load_encoder(Path(model_dir))
    # as fine-tuning's: a max_length past the position table failed inside the encoder's forward
    check_fits(encoder.config, cfg, len(tok), Path(model_dir))
    # past the rows it was pretrained on: said as fine-tuning says it; a frozen encoder never trains them
    # (before 2026-12-02 on stderr alone)
    said += [text] if (text := warn_untrained(encoder.config, cfg, Path(model_dir), frozen=True)) else []
    layers = layers_read(cfg, int(encoder.config.num_hidden_layers))
    threads_before = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    try:
        encoded: list[int] = []
        x_train = features(tok, encoder, [r.document for r in train_rows], cfg.max_length, cfg.batch_size,
                           layers, cfg.pooling, encoded)
        y_train = np.array([r.label for r in train_rows])
        chosen = {}
        if cfg.layer == "best":  # chosen before an evaluation row is encoded
            n_dev = min(cfg.dev_rows, len(train_rows) // 2)
            dev_idx = np.random.default_rng([cfg.seed, 1]).choice(len(train_rows), n_dev, replace=False)
            best, scores = choose_layer(x_train, y_train, dev_idx, cfg.C)
            chosen = {"dev_examples": n_dev, "layers_dev_accuracy": scores}
            layers, x_train = [layers[best]], x_train[best:best + 1]
        x_eval = features(tok, encoder, [r.document for r in eval_rows], cfg.max_length, cfg.batch_size,
                          layers, cfg.pooling, encoded)
    finally:
        torch.set_num_threads(threads_before)
    y_eval = np.array([r.label for r in eval_rows])
    clf = fit(x_train[0], y_train, cfg.C)
    predicted = clf.predict(x_eval[0])
    accuracy = float((predicted == y_eval).mean())
    problems, figures = majority_check(y_eval, predicted, "eval")
    for line in problems:
        progress(f"probe: {line}")
    metrics = {"task": "probe", "accuracy": accuracy, "train_accuracy": float(clf.score(x_train[0], y_train)),
               "train_examples": len(train_rows), "eval_examples": len(eval_rows),
               # each file's rows, bad rows by reason, blank lines (the nsmc task's train_file/test_file)
               **{key: read.stats for key, read in files.items()},
               "majority_share": float(max(y_eval.mean(), 1 - y_eval.mean())), "layer": layers[0],
               "layers": int(encoder.config.num_hidden_layers), **chosen,
               # the shape of fine-tuning's verdict (finetune/skeleton.py): the study flags such a readout
               "health": {"status": "not_learning", "problems": problems, "figures": figures} if problems
               else {"status": "ok", "figures": figures}, "config": to_dict(cfg),
               **({"eval_set": eval_set} if eval_set else {})}
    write_json(Path(out_dir) / "metrics.json", metrics)
    with (Path(out_dir) / "predictions.jsonl").open("w", encoding="utf-8") as f:
        for r, p in zip(eval_rows, predicted):
            f.write(json.dumps({"id": r.id, "label": r.label, "predicted": int(p)}) + "\n")
    seconds = time.perf_counter() - t0
    parameters = count_parameters(encoder)
    progress(f"probe: accuracy {accuracy:.4f} on {len(eval_rows)} {eval_set or 'rows'} (trained on {len(train_rows)}; layer "
             f"{layers[0]}{' chosen on dev' if chosen else ''}, {cfg.pooling} pooling) in {seconds:.0f}s")
    stats = {k: metrics[k] for k in ("accuracy", "train_accuracy", "train_examples", "eval_examples", "layer", "health")}
    return StageOutput(stats={**stats, "warnings": said} if said else stats,
                       # the contract's compute of every compute stage: parameters and FLOPs too (one forward
                       # pass a token, 2 FLOPs a parameter, as fine-tuning counts 6 for its passes)
                       compute={"wall_seconds": round(seconds, 3), "device": "cpu",
                                "parameters_frozen": int(x_train.shape[-1]), "parameters": parameters,
                                "flops": 2 * parameters * sum(encoded)})
