"""``kolectra study``: replaced token detection against masked language modelling at equal compute.

The ELECTRA paper's central claim (Clark et al. 2020, figure 1 and section 3.4) is that RTD
learns more per pretraining FLOP than MLM, and more so for small models. A study checks it on the
user's own corpus: every objective the trainer offers is pretrained at the same FLOPs budgets,
each checkpoint is fine-tuned on NSMC (train split of the given file; scored on a dev split
carved from it, never on the test set), and the report plots accuracy against FLOPs.

Budgets form a doubling grid ending at ``--flops`` (B/2^(K-1), ..., B/2, B). Each point is a
complete pretraining run at that compute (warm-up and linear decay over its own steps), so a
point is a fair "what this much compute buys" measurement; runs are artifacts, so an
interrupted study resumes (pretraining continues from its checkpoints) and a rerun with twice
the budget reuses every point but the new largest one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from pathlib import Path
from typing import Sequence

from kolectra.core import plot
from kolectra.core.bars import Bar
from kolectra.pipeline import stages
from kolectra.pipeline.artifacts import Artifact, ArtifactError, Request, Store
from kolectra.core.stage import StageOutput, progress

OBJECTIVES = ("electra", "mlm", "electra15", "replace_mlm", "all_tokens_mlm")
STAGE_VERSION = 1


@dataclasses.dataclass(frozen=True)
class StudyPlan:
    flops: float
    points: int
    preset: str
    objectives: tuple[str, ...]
    pretrain_sets: tuple[str, ...] = ()
    finetune_preset: str = "sample"
    finetune_sets: tuple[str, ...] = ()
    dev_fraction: float = 0.2
    seed: int = 0

    def budgets(self) -> list[float]:
        return [self.flops / 2 ** (self.points - 1 - k) for k in range(self.points)]


def flops_per_step(examples: Artifact, vocab: Artifact, preset: str, sets: Sequence[str], objective: str) -> int:
    """Training FLOPs of one optimizer step for ``objective`` (the trainer's own counting)."""
    from kolectra.model import rtd
    from kolectra.model.config import preset as model_preset
    from kolectra.model.electra import train_flops_per_sequence
    from kolectra.core.config import override

    cfg = override(model_preset(preset), [*sets, f"objective.objective={objective}"])
    index = json.loads((examples.path / "index.json").read_text(encoding="utf-8"))
    seq_len, vocab_size = index["max_seq_length"], index["vocab_size"]
    n_masked = rtd.num_slots(cfg.objective.mask_prob, seq_len)
    return cfg.train.batch_size * train_flops_per_sequence(cfg.model, vocab_size, seq_len, n_masked, objective)


def split_nsmc(train_file: Path, dev_fraction: float, seed: int, cache: Path) -> tuple[Path, Path]:
    """A seeded train/dev split of an NSMC-format file, written once under ``cache`` (content-named)."""
    raw = Path(train_file).read_bytes()
    key = hashlib.sha256(raw + f"|{dev_fraction}|{seed}".encode()).hexdigest()[:16]
    out = cache / f"nsmc-split-{key}"
    train, dev = out / "train.txt", out / "dev.txt"
    if train.is_file() and dev.is_file():
        return train, dev
    lines = raw.decode("utf-8").split("\n")
    header, rows = lines[0], [line for line in lines[1:] if line]
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_dev = max(1, int(len(rows) * dev_fraction))
    dev_idx = set(order[:n_dev])
    out.mkdir(parents=True, exist_ok=True)
    for path, keep in ((train, lambda i: i not in dev_idx), (dev, lambda i: i in dev_idx)):
        body = [rows[i] for i in range(len(rows)) if keep(i)]
        path.write_text("\n".join([header, *body]) + "\n", encoding="utf-8")
    return train, dev


def run_study(store: Store, plan: StudyPlan, nsmc_train: Path, *, corpus_ref: str | None = None,
              examples_ref: str | None = None, name: str | None = None, force: bool = False) -> Artifact:
    for obj in plan.objectives:
        if obj not in OBJECTIVES:
            raise ArtifactError(f"study: unknown objective {obj!r} (known: {', '.join(OBJECTIVES)})")
    if plan.points < 1 or plan.flops <= 0:
        raise ArtifactError("study: need --flops > 0 and --points >= 1")
    if examples_ref is not None:
        examples = store.require(examples_ref, "examples")
    elif corpus_ref is not None:
        corpus = store.require(corpus_ref, "corpus")
        vocab = stages.vocab(store, corpus)
        from kolectra.model.config import preset as model_preset
        seq = model_preset(plan.preset).max_seq_length
        examples = stages.examples(store, corpus, vocab, sets=[f"max_seq_length={seq}"])
    else:
        raise ArtifactError("study: give --corpus or --examples")
    vocab = examples.parent_of_kind(store, "vocab")
    train_file, dev_file = split_nsmc(Path(nsmc_train), plan.dev_fraction, plan.seed, store.root / ".cache")

    rows, evals = [], []
    points = Bar("study", len(plan.objectives) * plan.points, "point", every=1)
    for objective in plan.objectives:
        per_step = flops_per_step(examples, vocab, plan.preset, plan.pretrain_sets, objective)
        for budget in plan.budgets():
            steps = max(1, round(budget / per_step))
            warmup = max(1, steps // 10)
            sets = [*plan.pretrain_sets, f"objective.objective={objective}", f"train.steps={steps}",
                    f"train.warmup_steps={warmup}", f"train.log_every={max(1, steps // 20)}"]
            progress(f"study: {objective} at {budget:.3g} FLOPs = {steps} steps")
            ckpt = stages.pretrain(store, examples, preset=plan.preset, sets=sets, seed=plan.seed,
                                   name=f"study-{objective}", resume=True)
            ev = stages.finetune(store, "nsmc", ckpt, train_file, dev_file, preset=plan.finetune_preset,
                                 sets=plan.finetune_sets, seed=plan.seed, name=f"study-{objective}")
            metrics = json.loads((ev.path / "metrics.json").read_text(encoding="utf-8"))
            rows.append({"objective": objective, "budget_flops": budget, "steps": steps,
                         "flops": ckpt.manifest.get("compute", {}).get("flops", steps * per_step),
                         "pretrain_loss": ckpt.manifest.get("stats", {}).get("final", {}).get("loss"),
                         "dev_accuracy": metrics["accuracy"], "checkpoint": ckpt.id, "eval": ev.id})
            evals.append(ev)
            points.advance()
    points.close()

    request = Request(kind="study", name=stages.artifact_name(name, f"study-{plan.preset}"), stage_version=STAGE_VERSION,
                      config=dataclasses.asdict(plan), parents=tuple(evals))
    return store.build(request, lambda out: _write_report(store, out, plan, rows), force)


def _write_report(store: Store, out: Path, plan: StudyPlan, rows: list[dict]) -> StageOutput:
    (out / "study.json").write_text(json.dumps({"plan": dataclasses.asdict(plan), "rows": rows}, indent=2) + "\n",
                                    encoding="utf-8")
    by_obj: dict[str, list[dict]] = {}
    for r in rows:
        by_obj.setdefault(r["objective"], []).append(r)
    plot.line_chart(out / "accuracy_vs_flops.png",
                    {o: [(r["flops"], 100 * r["dev_accuracy"]) for r in rs] for o, rs in by_obj.items()},
                    title="NSMC dev accuracy vs pretraining FLOPs", xlabel="pretraining FLOPs (log)",
                    ylabel="dev accuracy %", logx=True)
    curves = {}
    for o, rs in by_obj.items():
        ckpt = store.resolve(rs[-1]["checkpoint"])
        per_step = rs[-1]["flops"] / max(rs[-1]["steps"], 1)
        logged = [json.loads(line) for line in (ckpt.path / "metrics.jsonl").read_text().splitlines() if line]
        key = "disc_loss" if o.startswith("electra") else "loss"
        curves[f"{o} ({key})"] = [(m["step"] * per_step, m[key]) for m in logged if key in m]
    plot.line_chart(out / "training_curves.png", curves, title="pretraining loss (largest budget)",
                    xlabel="FLOPs", ylabel="loss")
    lines = [f"# kolectra study: {', '.join(plan.objectives)} at equal pretraining FLOPs", "",
             f"Preset `{plan.preset}`, budgets {', '.join(f'{b:.3g}' for b in plan.budgets())} FLOPs; "
             f"NSMC fine-tuning preset `{plan.finetune_preset}`, scored on a {plan.dev_fraction:.0%} dev split "
             "carved from the given train file (never the test set).", "",
             "| objective | budget FLOPs | steps | pretrain loss | NSMC dev accuracy |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        loss = f"{r['pretrain_loss']:.4f}" if isinstance(r["pretrain_loss"], (int, float)) else "?"
        lines.append(f"| {r['objective']} | {r['budget_flops']:.3g} | {r['steps']:,} | {loss} | "
                     f"{100 * r['dev_accuracy']:.2f} % |")
    lines += ["", "![accuracy vs FLOPs](accuracy_vs_flops.png)", "", "![training curves](training_curves.png)", ""]
    if "electra" in by_obj and "mlm" in by_obj:
        electra, mlm = (100 * by_obj[o][-1]["dev_accuracy"] for o in ("electra", "mlm"))
        verdict = "ahead of" if electra > mlm else "not ahead of"
        lines.append(f"At the largest budget ELECTRA is **{verdict}** MLM: {electra:.2f} % vs {mlm:.2f} % "
                     "(one fine-tuning seed per point: differences under about one point are within its noise).")
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for line in lines[4:4 + len(rows) + 2]:
        progress(line)
    return StageOutput(stats={"rows": rows})
