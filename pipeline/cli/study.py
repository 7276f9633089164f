"""``kolectra study``: its options and how they become a :class:`~kolectra.pipeline.study.plan.StudyPlan`.

Apart from :mod:`pipeline.cli` because the study has more options than any stage; the study itself
is :mod:`pipeline.study.runner`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

from kolectra.core.config import ConfigError
from kolectra.pipeline.cli.options import config_sets
from kolectra.pipeline.store.artifacts import Artifact, Store


def add_study(p: argparse.ArgumentParser) -> None:
    from kolectra.pipeline.study.plan import READOUTS, StudyPlan

    d = StudyPlan(flops=1.0)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="corpus artifact: the study builds vocab and examples, holding its "
                     "evaluation rows out of the pretraining text")
    src.add_argument("--examples", help="a ready examples artifact (the report counts held-out rows it contains)")
    p.add_argument("--flops", type=float, required=True, help="the largest pretraining budget, e.g. 3e13")
    p.add_argument("--points", type=int, default=d.points, help="budgets on a doubling grid ending at --flops "
                   f"(default {d.points})")
    p.add_argument("--preset", default=d.preset, help=f"model size (default {d.preset})")
    p.add_argument("--arms", default=",".join(d.arms), help="objectives, optionally with an embedding-sharing "
                   f"suffix: electra, mlm, electra-gdes, electra15, replace_mlm, ... (default {','.join(d.arms)})")
    p.add_argument("--readouts", default=",".join(d.readouts), help=f"readout recipes, read side by side on the "
                   f"same checkpoints, each with its own floor: {', '.join(READOUTS)}, with switches -best-layer, "
                   f"-layerN, -cls (probe), -reinitN, -nodecay (fine-tuning), e.g. probe,probe-best-layer,lowdata,"
                   f"lowdata-reinit1 (default {','.join(d.readouts)})")
    p.add_argument("--pretrain-seeds", type=int, default=d.pretrain_seeds,
                   help=f"pretraining runs per arm and budget (default {d.pretrain_seeds})")
    p.add_argument("--finetune-seeds", type=int, default=d.finetune_seeds,
                   help=f"readouts per checkpoint (default {d.finetune_seeds})")
    p.add_argument("--nsmc-train", type=Path, required=True,
                   help="NSMC-format file; the held-out rows and every readout's training rows are carved from it")
    p.add_argument("--vocab-size", type=int, default=d.vocab_size, help="when building from --corpus "
                   f"(default {d.vocab_size})")
    for key, what in (("dev_rows", "held-out rows every readout is scored on"),
                      ("probe_rows", "labelled rows the linear probe learns from"),
                      ("lowdata_rows", "rows of low-data fine-tuning"), ("finetune_rows", "rows of fine-tuning")):
        p.add_argument(f"--{key.replace('_', '-')}", dest=key, type=int, default=getattr(d, key),
                       help=f"{what} (default {getattr(d, key)})")
    p.add_argument("--finetune-preset", default=d.finetune_preset,
                   help=f"the fine-tuning preset of every readout: koelectra | electra | sample (default {d.finetune_preset})")
    p.add_argument("--finetune-set", dest="finetune_sets", action="append", default=None, metavar="KEY=VALUE",
                   help=f"fine-tuning overrides, on top of the study's own (default {' '.join(d.finetune_sets)}; "
                   "a key given here replaces the study's), e.g. dev_fraction=0.2")


# pretraining keys each run of the study sets itself (pipeline/study/runner.py pretrain_point), and from what
STUDY_KEYS = {"train.steps": "--flops", "train.warmup_steps": "--flops (a tenth of the steps)",
              "train.log_every": "--flops (a twentieth of the steps)", "objective.objective": "--arms",
              "model.embedding_sharing": "--arms (electra-gdes)", "seed": "--pretrain-seeds (1, 2, ...)"}

# fine-tuning keys each readout sets itself (pipeline/study/runner.py read_out)
READOUT_KEYS = {"seed": "--finetune-seeds (1, 2, ...)", "max_train_examples": "--lowdata-rows / --finetune-rows",
                "max_eval_examples": "--dev-rows"}


def run_study_command(args, store: Store, beam_args: list[str]) -> Artifact:
    from kolectra.core import storage
    from kolectra.pipeline.study.runner import StudyPlan, run_study

    if storage.is_url(str(store.root)):  # before anything is built: it ended in 'TypeError: ... S3Path'
        given = f"--out {args.out}" if args.out else f"the root {store.root} (KOLECTRA_HOME)"
        raise ConfigError(f"study: {given}: a study runs on a disk root, not in a store: its NSMC splits and "
                          "held-out ids are files under the root that its examples and readouts name by path, "
                          "and it reads the corpus and its runs' files from disk; give --out a local directory")
    if not math.isfinite(args.flops) or args.flops <= 0:
        raise ConfigError(f"--flops: expected a finite number > 0, got {args.flops}")
    if args.points < 1:
        raise ConfigError(f"--points: expected at least 1, got {args.points}")
    from kolectra.model.presets import requested_preset  # torch-free

    named = requested_preset(args.preset, config_sets(args))
    if named != args.preset:  # the run would train it, with steps worked out for --preset's model
        raise ConfigError(f"study: --set/--config name preset {named!r}, but the study sizes every budget by "
                          f"--preset ({args.preset}): give --preset {named}")
    for assignment in config_sets(args):  # the study's own settings come after these: they were ignored
        key = assignment.split("=", 1)[0].strip()
        if key in STUDY_KEYS:
            raise ConfigError(f"study: {key} is the study's to set, from {STUDY_KEYS[key]} (every run's would "
                              "overwrite it): leave it out of --set/--config")
        if key == "train.init_from" and assignment.split("=", 1)[1].strip():
            raise ConfigError("study: train.init_from would start every arm, and the floor reported as untrained, "
                              "from that model: a study compares pretraining from scratch; leave it out")
    split = lambda s: tuple(x.strip() for x in s.split(",") if x.strip())  # noqa: E731
    plan = StudyPlan(flops=args.flops, points=args.points, preset=args.preset, arms=split(args.arms),
                     readouts=split(args.readouts), pretrain_seeds=args.pretrain_seeds,
                     finetune_seeds=args.finetune_seeds, pretrain_sets=tuple(config_sets(args)),
                     finetune_preset=args.finetune_preset, vocab_size=args.vocab_size, seed=args.seed or 0,
                     dev_rows=args.dev_rows, probe_rows=args.probe_rows, lowdata_rows=args.lowdata_rows,
                     finetune_rows=args.finetune_rows)
    from kolectra.pipeline.configs import resolve  # torch-free

    seen: set[str] = set()
    for assignment in args.finetune_sets or ():  # each readout's own come after these, as the pretraining keys above
        key = assignment.split("=", 1)[0].strip()
        if key in READOUT_KEYS:
            raise ConfigError(f"study: --finetune-set {key} is the study's to set, from {READOUT_KEYS[key]}: leave it out")
        if key in seen:  # as --set refuses a key twice (pipeline/cli/checks.py)
            raise ConfigError(f"study: --finetune-set {key} is given twice: give each key once")
        seen.add(key)
    if seen:  # on top of the study's own (docs/studies.md): dev_fraction=0.2 alone dropped lr 1e-3 and 10 epochs
        plan = dataclasses.replace(plan, finetune_sets=(
            *(a for a in plan.finetune_sets if a.split("=", 1)[0].strip() not in seen), *args.finetune_sets))
    try:  # a bad key or value now, not after the examples are built and the floor is trained
        resolve("finetune", task="nsmc", preset=plan.finetune_preset, sets=plan.finetune_sets)
    except ConfigError as e:
        raise ConfigError(f"study: --finetune-set / --finetune-preset: {e}") from None
    art = run_study(store, plan, args.nsmc_train, corpus_ref=args.corpus, examples_ref=args.examples,
                    name=args.name, force=args.force)
    print((art.path / "report.md").read_text(encoding="utf-8"))
    return art
