"""Benchmark of the fine-tuning stage: training and inference examples/s, NSMC and KorQuAD.

Figure (``value``): NSMC training examples per second through kolectra's loop
(:func:`finetune.loop.train_epochs` on the CPU :class:`~kolectra.model.device.Device`: batches cut
to their longest row, kolectra's CPU dropout, fused AdamW).  Baseline, same process, same model,
same batch order and the same number of CPU threads: the common Hugging Face recipe of
tokenising with ``padding="max_length"`` and a plain forward/backward/step loop with torch's
AdamW.  Extra keys give the same pair for NSMC inference (kolectra sorts evaluation rows by
length, then pads per batch), KorQuAD training on windows and KorQuAD inference, plus the loss of
one NSMC batch computed both ways (padding must not change it; KorQuAD's does move with the width:
transformers' span loss takes its softmax over every position of the window, [PAD] included).

    python benchmarks/finetune.py [--quick] [--nsmc-train FILE --korquad FILE | --data DIR]
                                  [--model HF_ELECTRA_DIR] [--threads N]

``--quick``: a tiny random ELECTRA (hidden 64, 2 layers) made in-process, the embedded sample
files (``pipeline/sample/``), about a minute on 2 cores.  Full: an ELECTRA-Small-shaped random
model (hidden 256, 12 layers; or ``--model``), 2,048 training rows of an NSMC-format file
(``--nsmc-train``) at KoELECTRA's max length 128, and 64 questions of a KorQuAD-format file
(``--korquad``) at length 512, stride 128; about 10 minutes on 2 cores.  Random weights change nothing here: the
cost of a step does not depend on the values of the weights.  ``--threads``: CPU threads of
both sides (default 1, fine-tuning's ``cpu_threads`` default; ``benchmarks/finetune_threads.py``
measures other counts).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from common import add_data_args, emit, parser, require_data

if TYPE_CHECKING:
    import numpy as np

    from kolectra.finetune.features import Features

# torch, transformers and kolectra.finetune are imported where they are used: a run without its
# data stops with its one-line message before paying seconds of imports (tests/test_cli_surface.py)

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


def data_files(args) -> tuple[Path, Path]:
    """The embedded sample's files with ``--quick``; else the files the arguments name."""
    if args.quick:
        return SAMPLE / "nsmc_train.txt", SAMPLE / "korquad_sample.json"
    who = "benchmarks/finetune.py"
    return Path(require_data(args, "nsmc_train", who)), Path(require_data(args, "korquad", who))


def cycle(items: list, n: int) -> list:
    """``n`` items, cycling through the list when it is shorter (the sample has a few hundred)."""
    return [items[i % len(items)] for i in range(n)]


def model_dir(size: Size, texts: list[str], given: str | None, tmp: Path) -> Path:
    from tiny_model import build_tiny_model_dir

    if given:
        return Path(given)
    return build_tiny_model_dir(tmp / "model", texts, seed=0, hidden=size.hidden, layers=size.layers,
                                heads=size.heads, vocab_size=4000, max_position=512)


def encode(task, tokenizer, table, cfg) -> tuple[Features, dict[str, np.ndarray]]:
    """kolectra's features of ``table``, and the baseline's: every column padded to max_length."""
    import numpy as np
    import torch

    from kolectra.finetune.features import Features, tokenize

    enc = tokenize(table, task.encoder(tokenizer, cfg), desc="tokenising", settings={}, cache_dir=None)
    feats = Features.of(enc, tokenizer.pad_token_id, task.per_token, task.per_row)
    full = {k: torch.from_numpy(np.pad(a[:, :cfg.max_length], ((0, 0), (0, max(0, cfg.max_length - a.shape[1])))))
            for k, a in ((k, feats.padded(k)) for k in feats.per_token)}
    full["attention_mask"] = (full["input_ids"] != tokenizer.pad_token_id).long()
    full.update({k: torch.from_numpy(a) for k, a in feats.per_row.items()})
    return feats, full


def warm_up(model, batches: list[dict]) -> None:
    """A few untimed steps first (thread pools, allocator, kernel selection), so neither side
    of the comparison pays the process's start-up costs."""
    import torch

    opt = torch.optim.AdamW(model.parameters())
    for batch in batches:
        model(**batch).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def kolectra_side(task, mdir: Path, tok, cfg, train: Features, evald: Features, threads: int,
                  **model_kw) -> tuple[float, float]:
    """(training, inference) examples/s through the fine-tuning loop on the CPU Device."""
    import numpy as np

    from kolectra.finetune.loading import load_model
    from kolectra.finetune.loop import inputs, predict, train_epochs
    from kolectra.model import runtime

    dev = runtime.resolve("cpu", cpu_threads=threads)
    try:
        idx = np.arange(min(cfg.batch_size, len(train)))
        warm_up(load_model(task.auto_model, mdir, cfg, dev, tok, **model_kw),
                [inputs(train, idx, dev, cfg)] * 3)
        model = load_model(task.auto_model, mdir, cfg, dev, tok, **model_kw)
        log = train_epochs(model, dev, train, dataclasses.replace(cfg, epochs=1), name="kolectra")
        t0 = time.perf_counter()
        predict(model, dev, evald, cfg, task.outputs)
        return len(train) / log.timings[0]["seconds"], len(evald) / (time.perf_counter() - t0)
    finally:
        dev.close()


def baseline_side(task, mdir: Path, cfg, train: dict, evald: dict, threads: int, **model_kw) -> tuple[float, float]:
    """The plain loop: every batch already padded to max length; the same batch order."""
    import torch
    import transformers

    from kolectra.finetune.loop import shuffled_batches

    auto = getattr(transformers, task.auto_model)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        n = len(train["input_ids"])
        sel = torch.arange(min(cfg.batch_size, n))
        torch.manual_seed(cfg.seed)
        warm_up(auto.from_pretrained(str(mdir), **model_kw), [{k: v[sel] for k, v in train.items()}] * 3)
        torch.manual_seed(cfg.seed)
        model = auto.from_pretrained(str(mdir), **model_kw).train()
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, eps=cfg.optim.adam_eps)
        t0 = time.perf_counter()
        for idx in shuffled_batches(n, cfg.batch_size, torch.Generator().manual_seed(cfg.seed)):
            model(**{k: v[torch.as_tensor(idx)] for k, v in train.items()}).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.max_grad_norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
        t_train = time.perf_counter() - t0
        model.eval()
        keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in evald]
        t0 = time.perf_counter()
        with torch.no_grad():
            for i in range(0, len(evald["input_ids"]), cfg.eval_batch_size):
                model(**{k: evald[k][i:i + cfg.eval_batch_size] for k in keys})
        return n / t_train, len(evald["input_ids"]) / (time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)


def padding_loss_difference(task, mdir: Path, tok, cfg, feats: Features, full: dict, **model_kw) -> float:
    """One batch's loss cut to its longest row (kolectra) and padded to max_length: must agree."""
    import numpy as np
    import torch

    from kolectra.finetune.loading import load_model
    from kolectra.finetune.loop import inputs
    from kolectra.model import runtime

    dev = runtime.resolve("cpu")
    try:
        model = load_model(task.auto_model, mdir, cfg, dev, tok, **model_kw).eval()
        idx = np.arange(min(cfg.batch_size, len(feats)))
        with torch.no_grad():
            ours = float(model(**inputs(feats, idx, dev, cfg)).loss)
            theirs = float(model(**{k: v[torch.as_tensor(idx)] for k, v in full.items()}).loss)
        return abs(ours - theirs)
    finally:
        dev.close()


def bench(task, mdir: Path, cfg, train_table, eval_table, threads: int, **model_kw) -> dict:
    from kolectra.finetune.loading import load_tokenizer

    tok = load_tokenizer(mdir)
    train, train_full = encode(task, tok, train_table, cfg)
    evald, eval_full = encode(task, tok, eval_table, cfg)
    k = kolectra_side(task, mdir, tok, cfg, train, evald, threads, **model_kw)
    b = baseline_side(task, mdir, cfg, train_full, eval_full, threads, **model_kw)
    return {"train": (k[0], b[0]), "infer": (k[1], b[1]), "examples": len(train),
            "mean_tokens": train.tokens / len(train),
            "loss_diff": padding_loss_difference(task, mdir, tok, cfg, train, train_full, **model_kw)}


def pair(kb: tuple[float, float]) -> dict:
    return {"kolectra": round(kb[0], 2), "baseline": round(kb[1], 2), "ratio": round(kb[0] / kb[1], 3)}


def main() -> None:
    p = parser(__doc__, "about 10 minutes on 2 cores")
    add_data_args(p, "nsmc_train", "korquad")
    p.add_argument("--model", help="a HF ELECTRA discriminator directory (default: a random one made here)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of both sides (default 1)")
    args = p.parse_args()
    size = QUICK if args.quick else FULL
    nsmc_file, squad_file = data_files(args)
    from kolectra.finetune.config import KorquadConfig, NsmcConfig
    from kolectra.finetune.features import rows
    from kolectra.finetune.korquad import Korquad
    from kolectra.finetune.nsmc import Nsmc
    from kolectra.finetune.readers.korquad import question_columns, read_squad
    from kolectra.finetune.readers.nsmc import read_nsmc

    nsmc_cfg = NsmcConfig(max_length=size.max_length, batch_size=size.batch_size, seed=0)
    korquad_cfg = KorquadConfig(max_length=size.korquad_max_length, doc_stride=size.doc_stride,
                                batch_size=size.korquad_batch_size, eval_batch_size=32, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        nsmc_rows = read_nsmc(nsmc_file).rows
        squad_q, _ = read_squad(squad_file)
        texts = ([r.document for r in nsmc_rows[:20000]] + sorted({q.context for q in squad_q})
                 + [q.question for q in squad_q])
        mdir = model_dir(size, texts, args.model, Path(tmp))

        def nsmc_table(rs):
            return rows({"text": [r.document for r in rs], "label": [r.label for r in rs]})

        t0 = time.perf_counter()
        nsmc = bench(Nsmc(), mdir, nsmc_cfg, nsmc_table(cycle(nsmc_rows, size.nsmc_train)),
                     nsmc_table(cycle(nsmc_rows[::-1], size.nsmc_eval)), args.threads, num_labels=2)
        questions = rows(question_columns(cycle(squad_q, size.korquad_questions)))
        korquad = bench(Korquad(), mdir, korquad_cfg, questions, questions, args.threads)
        seconds = time.perf_counter() - t0
    print(json.dumps({"nsmc": nsmc, "korquad": korquad}), file=sys.stderr)
    emit("finetune", "NSMC training examples/s", round(nsmc["train"][0], 2),
         "HF-style loop, padding to max length", round(nsmc["train"][1], 2),
         config={**dataclasses.asdict(size), "quick": args.quick, "model": args.model or "random (in-process)",
                 "threads": args.threads, "device": "cpu",
                 "nsmc_file": str(nsmc_file.name), "korquad_file": str(squad_file.name)},
         nsmc_train=pair(nsmc["train"]), nsmc_inference=pair(nsmc["infer"]),
         korquad_train=pair(korquad["train"]), korquad_inference=pair(korquad["infer"]),
         nsmc_mean_tokens=round(nsmc["mean_tokens"], 1), korquad_windows=korquad["examples"],
         korquad_mean_tokens=round(korquad["mean_tokens"], 1),
         padding_loss_difference=nsmc["loss_diff"], seconds=round(seconds, 1))


if __name__ == "__main__":
    main()
