"""Benchmark of the fine-tuning stage: training and inference examples/s, NSMC and KorQuAD.

Figure (``value``): NSMC training examples per second through kolectra's loop
(:func:`finetune.runtime.train_epochs` over :class:`finetune.nsmc.Encoded` batches padded to
their longest row).  Baseline, same process, same model, same batch order and optimizer: the
common Hugging Face recipe of tokenising with ``padding="max_length"`` and a plain
forward/backward/step loop.  Extra keys give the same pair for NSMC inference (kolectra sorts
evaluation rows by length, then pads per batch), KorQuAD training on windows and KorQuAD
inference, plus the loss of one batch computed both ways (padding must not change it).

    python benchmarks/finetune.py [--quick] [--model HF_ELECTRA_DIR]

``--quick``: a tiny random ELECTRA (hidden 64, 2 layers) made in-process, the embedded sample
files (``pipeline/sample/``), about a minute on 2 cores.  Full: an ELECTRA-Small-shaped random
model (hidden 256, 12 layers; or ``--model``), 2,048 NSMC training rows of
``shared/data/nsmc/`` at KoELECTRA's max length 128, and 64 KorQuAD questions of
``shared/data/korquad/`` at length 512, stride 128.  Random weights change nothing here: the
cost of a step does not depend on the values of the weights.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dataclasses
import json
import tempfile
import time

import numpy as np
import torch

from common import SHARED_DATA, emit, parser
from kolectra.finetune.config import OptimConfig
from kolectra.finetune.nsmc import Encoded, accuracy
from kolectra.finetune.nsmc_reader import read_nsmc
from kolectra.finetune.runtime import batches, load_model, train_epochs
from kolectra.finetune.squad_data import make_windows, read_squad
from kolectra.finetune.tiny import build_tiny_model_dir

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "pipeline" / "sample"


@dataclasses.dataclass(frozen=True)
class Size:
    nsmc_train: int
    nsmc_eval: int
    korquad_questions: int
    max_length: int
    korquad_max_length: int
    doc_stride: int
    batch_size: int
    korquad_batch_size: int
    hidden: int
    layers: int
    heads: int


QUICK = Size(nsmc_train=512, nsmc_eval=512, korquad_questions=24, max_length=128, korquad_max_length=256,
             doc_stride=64, batch_size=32, korquad_batch_size=8, hidden=64, layers=2, heads=2)
FULL = Size(nsmc_train=2048, nsmc_eval=2048, korquad_questions=64, max_length=128, korquad_max_length=512,
            doc_stride=128, batch_size=32, korquad_batch_size=8, hidden=256, layers=12, heads=4)


def data_files(quick: bool) -> tuple[Path, Path]:
    if quick:
        return SAMPLE / "nsmc_train.txt", SAMPLE / "korquad_sample.json"
    nsmc, korquad = SHARED_DATA / "nsmc" / "ratings_train.txt", SHARED_DATA / "korquad" / "KorQuAD_v1.0_dev.json"
    for p in (nsmc, korquad):
        if not p.is_file():
            sys.exit(f"benchmarks/finetune.py: {p} not found (set KOLECTRA_SHARED_DATA, or use --quick)")
    return nsmc, korquad


def rows_for(rows: list, n: int) -> list:
    """``n`` rows, cycling through the file when it is shorter (the sample has a few hundred)."""
    return [rows[i % len(rows)] for i in range(n)]


def model_dir(size: Size, texts: list[str], given: str | None, tmp: Path) -> Path:
    if given:
        return Path(given)
    return build_tiny_model_dir(tmp / "model", texts, seed=0, hidden=size.hidden, layers=size.layers,
                                heads=size.heads, vocab_size=4000, max_position=512)


def warm_up(model, batch: dict) -> None:
    """A few untimed steps first (thread pools, allocator, kernel selection), so neither side
    of the comparison pays the process's start-up costs."""
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(3):
        model(**batch).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def baseline_train(model, ids_BL: torch.Tensor, extra: dict[str, torch.Tensor], n: int, batch_size: int,
                   seed: int, opt_cfg: OptimConfig) -> float:
    """The plain loop: every batch already padded to max length; seconds for one epoch."""
    opt = torch.optim.AdamW(model.parameters(), lr=opt_cfg.lr, eps=opt_cfg.adam_eps)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    t0 = time.perf_counter()
    for idx in batches(n, batch_size, gen):
        sel = torch.as_tensor(idx)
        loss = model(input_ids=ids_BL[sel], attention_mask=(ids_BL[sel] != 0).long(),
                     **{k: v[sel] for k, v in extra.items()}).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), opt_cfg.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


@torch.no_grad()
def baseline_infer(model, ids_BL: torch.Tensor, extra: dict[str, torch.Tensor], batch_size: int) -> float:
    model.eval()
    t0 = time.perf_counter()
    for i in range(0, len(ids_BL), batch_size):
        model(input_ids=ids_BL[i:i + batch_size], attention_mask=(ids_BL[i:i + batch_size] != 0).long(),
              **{k: v[i:i + batch_size] for k, v in extra.items()})
    return time.perf_counter() - t0


def pad(seqs: list[list[int]], width: int) -> torch.Tensor:
    out = torch.zeros((len(seqs), width), dtype=torch.long)
    for r, s in enumerate(seqs):
        out[r, :len(s)] = torch.tensor(s[:width])
    return out


def bench_nsmc(size: Size, mdir: Path, nsmc_file: Path) -> dict:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    rows = read_nsmc(nsmc_file).rows
    tok = AutoTokenizer.from_pretrained(str(mdir))
    train = Encoded(tok, rows_for(rows, size.nsmc_train), size.max_length)
    evald = Encoded(tok, rows_for(rows[::-1], size.nsmc_eval), size.max_length)
    opt_cfg = OptimConfig()
    cpu = torch.device("cpu")

    def fresh():
        return load_model(AutoModelForSequenceClassification, mdir, 0, num_labels=2)

    # one batch, both ways: padding is masked, so the loss must agree
    m = fresh().eval()
    idx = np.arange(min(size.batch_size, len(train)))
    with torch.no_grad():
        ours = float(m(**train.batch(idx, cpu)).loss)
        ids_full = pad([train.ids[i] for i in idx], size.max_length)
        theirs = float(m(input_ids=ids_full, attention_mask=(ids_full != 0).long(), labels=train.labels[idx]).loss)

    warm_up(fresh(), train.batch(np.arange(size.batch_size), cpu))
    m = fresh()
    log = train_epochs(m, opt_cfg, len(train), size.batch_size, 1, 0, cpu, lambda i: m(**train.batch(i, cpu)).loss)
    k_train = len(train) / log.timings[0]["seconds"]
    t0 = time.perf_counter()
    accuracy(m, evald, 128, cpu)
    k_infer = len(evald) / (time.perf_counter() - t0)

    m = fresh()
    b_train = len(train) / baseline_train(m, pad(train.ids, size.max_length), {"labels": train.labels},
                                          len(train), size.batch_size, 0, opt_cfg)
    b_infer = len(evald) / baseline_infer(m, pad(evald.ids, size.max_length), {}, 128)
    tokens = sum(map(len, train.ids))
    return {"train": (k_train, b_train), "infer": (k_infer, b_infer),
            "mean_tokens": tokens / len(train), "loss_diff": abs(ours - theirs)}


def bench_korquad(size: Size, mdir: Path, squad_file: Path) -> dict:
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from kolectra.finetune.config import KorquadConfig
    from kolectra.finetune.korquad import _batch, predict

    questions, _ = read_squad(squad_file)
    questions = rows_for(questions, size.korquad_questions)
    tok = AutoTokenizer.from_pretrained(str(mdir))
    w = make_windows(tok, questions, size.korquad_max_length, size.doc_stride, 64)
    n = len(w.input_ids)
    cpu = torch.device("cpu")
    opt_cfg = OptimConfig()
    cfg = KorquadConfig(max_length=size.korquad_max_length, doc_stride=size.doc_stride, eval_batch_size=32)

    def fresh():
        return load_model(AutoModelForQuestionAnswering, mdir, 0)

    warm_up(fresh(), _batch(w, np.arange(min(n, size.korquad_batch_size)), 0, cpu, True, size.korquad_max_length))
    m = fresh()
    log = train_epochs(m, opt_cfg, n, size.korquad_batch_size, 1, 0, cpu,
                       lambda i: m(**_batch(w, i, 0, cpu, True, size.korquad_max_length)).loss)
    k_train = n / log.timings[0]["seconds"]
    t0 = time.perf_counter()
    predict(m, questions, w, cfg, 0, cpu)
    k_infer = n / (time.perf_counter() - t0)

    m = fresh()
    extra = {"token_type_ids": pad(w.token_type_ids, size.korquad_max_length),
             "start_positions": torch.tensor(w.start_positions), "end_positions": torch.tensor(w.end_positions)}
    b_train = n / baseline_train(m, pad(w.input_ids, size.korquad_max_length), extra, n,
                                 size.korquad_batch_size, 0, opt_cfg)
    b_infer = n / baseline_infer(m, pad(w.input_ids, size.korquad_max_length),
                                 {"token_type_ids": extra["token_type_ids"]}, 32)
    return {"train": (k_train, b_train), "infer": (k_infer, b_infer), "windows": n,
            "mean_tokens": sum(map(len, w.input_ids)) / n}


def pair(kb: tuple[float, float]) -> dict:
    return {"kolectra": round(kb[0], 2), "baseline": round(kb[1], 2), "ratio": round(kb[0] / kb[1], 3)}


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", help="a HF ELECTRA discriminator directory (default: a random one made here)")
    args = p.parse_args()
    size = QUICK if args.quick else FULL
    torch.manual_seed(0)
    nsmc_file, squad_file = data_files(args.quick)
    with tempfile.TemporaryDirectory() as tmp:
        nsmc_rows = read_nsmc(nsmc_file).rows
        squad_q, _ = read_squad(squad_file)
        contexts = sorted({q.context for q in squad_q})
        texts = [r.document for r in nsmc_rows[:20000]] + contexts + [q.question for q in squad_q]
        mdir = model_dir(size, texts, args.model, Path(tmp))
        t0 = time.perf_counter()
        nsmc = bench_nsmc(size, mdir, nsmc_file)
        korquad = bench_korquad(size, mdir, squad_file)
        seconds = time.perf_counter() - t0
    print(json.dumps({"nsmc": nsmc, "korquad": korquad}), file=sys.stderr)
    emit("finetune", "NSMC training examples/s", round(nsmc["train"][0], 2),
         "HF-style loop, padding to max length", round(nsmc["train"][1], 2),
         config={**dataclasses.asdict(size), "quick": args.quick, "model": args.model or "random (in-process)",
                 "torch_threads": torch.get_num_threads(), "device": "cpu",
                 "nsmc_file": str(nsmc_file.name), "korquad_file": str(squad_file.name)},
         nsmc_train=pair(nsmc["train"]), nsmc_inference=pair(nsmc["infer"]),
         korquad_train=pair(korquad["train"]), korquad_inference=pair(korquad["infer"]),
         nsmc_mean_tokens=round(nsmc["mean_tokens"], 1), korquad_windows=korquad["windows"],
         korquad_mean_tokens=round(korquad["mean_tokens"], 1),
         padding_loss_difference=nsmc["loss_diff"], seconds=round(seconds, 1))


if __name__ == "__main__":
    main()
