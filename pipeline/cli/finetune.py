"""``kolectra finetune TASK``: one subcommand per task of :data:`kolectra.finetune.tasks.TASKS`.

Apart from :mod:`pipeline.cli` because every task adds its own flags (its scored file, ``--dev``,
column names); the task table is torch-free, so ``--help`` answers without importing the runtime.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kolectra.core import scratch
from kolectra.core.errors import UserInputError
from kolectra.pipeline.cli.errors import after_the_command
from kolectra.pipeline.cli.options import common as _common
from kolectra.pipeline.cli.options import flag_sets as _flag_sets
from kolectra.pipeline.cli.options import print_config_flag as _print_config_flag
from kolectra.pipeline.store.artifacts import Artifact, Store


def add_finetune(p: argparse.ArgumentParser) -> None:
    from kolectra.finetune.tasks import TASKS  # the task table (torch-free)

    tasks = p.add_subparsers(dest="task", required=True, metavar="TASK")
    for name, task in TASKS.items():
        train_file, eval_file = EXAMPLE_FILES.get(name, ("train.jsonl", "test.jsonl"))
        t = tasks.add_parser(name, help=task.help, formatter_class=argparse.RawDescriptionHelpFormatter,
                             epilog=f"example:\n  kolectra finetune {name} --model sample --train {train_file} "
                                    f"--{task.eval_flag} {eval_file} --seeds 1-3")
        _common(t, set_example=SET_EXAMPLE, seed_default=task.presets["koelectra"]().seed)
        _print_config_flag(t)
        t.add_argument("--model", required=True, metavar="REF_OR_HF_DIR", help="checkpoint artifact (its "
                       "hf/discriminator) or a local HF ELECTRA directory (e.g. --model sample)")
        t.add_argument("--train", required=True, type=Path, metavar="FILE",
                       help=f"the training file (e.g. --train {train_file})")
        t.add_argument(f"--{task.eval_flag}", required=name not in BY_ARTICLE, type=Path, metavar="FILE",
                       help=f"the file scored once at the end (e.g. --{task.eval_flag} {eval_file})"
                            + (f" (default: none, then {BY_ARTICLE[name]})" if name in BY_ARTICLE else ""))
        if name in BY_ARTICLE:
            t.add_argument("--split-dev-by-article", type=float, default=None, metavar="FRACTION",
                           help="no dev file: score a seeded FRACTION of --train's articles, trained on the rest "
                                "(no article on both sides); its figures say 'by-article split, not the official "
                                "dev set' (default: off; e.g. --split-dev-by-article 0.1)")
        if task.dev_flag:
            t.add_argument("--dev", type=Path, default=None, metavar="FILE", help="the file the epoch is chosen "
                           "on (default: a seeded dev_fraction of --train)")
        for flag, key, what in task.flags:
            t.add_argument(f"--{flag}", default=None, metavar="NAME", help=f"{what} (--set {key}=...)")
        _size_flags(t, name, task)
        t.add_argument("--preset", default="koelectra",
                       help=f"{' | '.join(task.presets)}: settings in docs/finetune.md (default koelectra)")
        t.add_argument("--seeds", default=None, help="several seeds, e.g. 1,2,3 or 1-5: one eval artifact each, "
                       "then a summary artifact with median and spread (default: one run, --seed)")


# the tasks that can score a by-article split of --train instead of a file (finetune/korquad.py write_split)
BY_ARTICLE = {"korquad": "--split-dev-by-article FRACTION"}

# a --set every task accepts (train.lr is pretraining's key: "unknown key" here)
SET_EXAMPLE = "optim.lr=3e-5"

# example file names for each task's --help
EXAMPLE_FILES = {"nsmc": ("ratings_train.txt", "ratings_test.txt"),
                 "korquad": ("KorQuAD_v1.0_train.json", "KorQuAD_v1.0_dev.json"),
                 # files with the default columns (text, label); docs/finetune.md has each benchmark's flags
                 "classify": ("train.tsv", "test.tsv"), "regress": ("train.tsv", "test.tsv"),
                 "ner": ("train.tsv", "test.tsv")}


# The settings that bound a run's size, on every task's --help (they were only in --print-config keys):
# flag -> (key, what). max_dev_examples only where the task carves or reads a dev split besides the scored file.
SIZE_FLAGS = {"epochs": ("epochs", "training epochs (default: the preset's; koelectra {epochs})"),
              "max-train-examples": ("max_train_examples", "train on {train_rows}; 0: all (default: the preset's; "
                                     "koelectra {max_train_examples})"),
              "max-eval-examples": ("max_eval_examples", "score the first N rows of the scored file only, a figure "
                                    "then not comparable with a full-test one; 0: all (default: the preset's; "
                                    "koelectra {max_eval_examples})"),
              "max-dev-examples": ("max_dev_examples", "choose the epoch on the first N dev rows; 0: all; -1: "
                                   "max_eval_examples's cap (default -1)")}


def _train_rows(name: str, task) -> str:
    """Which N training rows --max-train-examples keeps (docs/finetune.md): it read "the first N rows" for
    every task, where only KorQuAD keeps the file's first (questions); the others draw them with the seed."""
    if name == "korquad":
        return "only the training file's first N questions (its first articles')"
    return ("only N rows, drawn with the seed: the first N of the shuffle that carves the dev split"
            + (", or with --dev a seeded sample of N in file order" if task.dev_flag else ""))


def _size_flags(p: argparse.ArgumentParser, name: str, task) -> None:
    cfg = task.presets["koelectra"]()
    for flag, (key, what) in SIZE_FLAGS.items():
        if hasattr(cfg, key):
            p.add_argument(f"--{flag}", type=int, default=None, metavar="N",
                           help=what.format(train_rows=_train_rows(name, task),
                                            **{k: getattr(cfg, k) for k in ("epochs", "max_train_examples",
                                                                            "max_eval_examples")}))


def _finetune_sets(args: argparse.Namespace) -> list[str]:
    from kolectra.finetune.tasks import TASKS

    flags = {flag.replace("-", "_"): key for flag, key, _ in TASKS[args.task].flags}
    flags.update({flag.replace("-", "_"): key for flag, (key, _) in SIZE_FLAGS.items() if hasattr(args, key)})
    return _flag_sets(args, flags)


def config_finetune(args) -> tuple:
    from kolectra.pipeline import configs  # torch-free

    return configs.resolve("finetune", task=args.task, preset=args.preset, sets=_finetune_sets(args),
                              seed=args.seed)


def run_finetune(args, store: Store, beam_args: list[str]) -> Artifact:
    from kolectra.finetune.seeds import parse_seeds
    from kolectra.finetune.tasks import TASKS
    from kolectra.pipeline import stages  # only when a task runs (the task imports torch itself)

    eval_file = getattr(args, TASKS[args.task].eval_flag)
    fraction = getattr(args, "split_dev_by_article", None)
    if args.task in BY_ARTICLE and (eval_file is None) == (fraction is None):
        raise UserInputError(f"finetune {args.task}: give --{TASKS[args.task].eval_flag} FILE or "
                             f"{BY_ARTICLE[args.task]}, one of them")
    if fraction is not None and not 0.0 < fraction < 1.0:  # nan too
        raise UserInputError(f"finetune {args.task}: --split-dev-by-article takes the share of articles for "
                             f"the dev side, between 0 and 1 (e.g. 0.1), got {fraction}")
    if fraction is not None:  # the split's files live as long as the run: the artifact records their hashes
        with scratch.temporary_directory("split") as folder:
            from kolectra.finetune.korquad import write_split

            split_seed = config_finetune(args)[0].seed  # one split for every --seeds run: the same scored questions
            args.train, split_dev = write_split(args.train, fraction, split_seed, Path(folder))
            setattr(args, TASKS[args.task].eval_flag, split_dev)
            args.split_dev_by_article = None
            return run_finetune(args, store, beam_args)
    sets = _finetune_sets(args)
    dev = {"dev_file": args.dev} if TASKS[args.task].dev_flag and args.dev is not None else {}
    if args.seeds and args.seed is not None:
        raise UserInputError("give either --seed or --seeds, not both")
    seeds = parse_seeds(args.seeds) if args.seeds else None
    if _stage_takes_inputs(args, sets, [args.train, eval_file, dev.get("dev_file")]):  # else refused next, for them alone
        _model_health(store, args.task, args.model)
    if seeds:
        art = stages.finetune_seeds(store, args.task, args.model, args.train, eval_file, seeds,
                                    preset=args.preset, sets=sets, name=args.name, force=args.force, **dev)
    else:
        art = stages.finetune(store, args.task, args.model, args.train, eval_file, preset=args.preset,
                              sets=sets, seed=args.seed, name=args.name, force=args.force, **dev)
    from kolectra.pipeline.verdicts import seeds_health  # noqa: PLC0415

    runs_health = seeds_health(store, art) if args.seeds else None
    with after_the_command():  # the eval is published: under PYTHONUNBUFFERED a full disk fails here, not at the flush
        _print_metrics(art.path / "metrics.json", runs_health)
    return art


def _stage_takes_inputs(args, sets: list[str], files: list) -> bool:
    """Whether the stage will take the settings and data files (its own checks, cheap and torch-free): a run it
    refuses for them gets its refusal alone, not a WARNING of the model above it that read as the cause."""
    from kolectra.finetune.files import data_file_problem  # noqa: PLC0415
    from kolectra.finetune.tasks import TASKS  # noqa: PLC0415
    from kolectra.pipeline import configs  # noqa: PLC0415

    try:
        cfg, _ = configs.resolve("finetune", task=args.task, preset=args.preset, sets=sets, seed=args.seed)
    except Exception:  # noqa: BLE001 - the stage resolves it again and says why in its words
        return False
    if any(data_file_problem(Path(f), folder_ok=TASKS[args.task].dev_flag) for f in files if f is not None):
        return False
    # the training file named as the scored one, refused next (train_on_eval): the same path only, no file read here
    return getattr(cfg, "train_on_eval", False) or Path(files[0]).resolve() != Path(files[1]).resolve()


def _model_health(store, task: str, model: str) -> None:
    """A WARNING before training when the model is a checkpoint whose pretraining learned nothing: the run's own
    verdict at its end ("the model predicts class 1 for all dev rows") pointed at the fine-tuning settings, the
    checkpoint's verdict being in its manifest, cards and report alone. A model folder (no verdict): nothing."""
    from kolectra.core.shown import shown  # noqa: PLC0415
    from kolectra.core.stage import warn  # noqa: PLC0415
    from kolectra.pipeline import stages  # noqa: PLC0415
    from kolectra.pipeline.store.artifacts import ArtifactError  # noqa: PLC0415
    from kolectra.pipeline.verdicts import health_of, untrained  # noqa: PLC0415

    try:
        parents = stages.model_source(store, model)[1]  # the artifact only: nothing is fetched
    except ArtifactError:
        return  # refused by the stage, in its order (the settings first)
    health = health_of(parents[0]) if parents else None
    if health is not None and health["status"] == "not_learning" and not untrained(parents[0]):
        why = "; ".join(health.get("problems") or [])
        # the folder's name and the manifest's words, which a root from elsewhere fills: escaped, as every such line
        warn(shown(f"{task}: the model, checkpoint {parents[0].path.name}, learned nothing in pretraining"
                   + (f" ({why})" if why else "") + ": expect a score near chance, whatever the fine-tuning settings"))


def _print_metrics(path: Path, runs_health: str | None = None) -> None:
    """The scores on stdout, and the run's health verdict when it is not ok: a reused artifact prints no
    warning on stderr (they were printed when it was built), and ``-q`` keeps stdout alone. ``runs_health``:
    a ``--seeds`` summary's, from its runs (:func:`pipeline.verdicts.seeds_health`)."""
    from kolectra.core.shown import shown  # noqa: PLC0415 - the file's names and a verdict's words: data

    if path.is_file():
        metrics = json.loads(path.read_text(encoding="utf-8"))
        for k, v in metrics.items():
            if isinstance(v, (int, float)):
                print(shown(f"{k:>24}  {v:.4f}" if isinstance(v, float) else f"{k:>24}  {v}"))
        health = metrics.get("health")
        if isinstance(health, dict) and health.get("status") not in (None, "ok"):
            from kolectra.pipeline.verdicts import said  # noqa: PLC0415

            print(shown(f"{'health':>24}  {said(health)}"))
        if runs_health:
            print(shown(f"{'health':>24}  {runs_health}"))
