"""The ``kolectra`` command line: one subcommand per stage, plus ``run``, ``study``, ``report``
and ``artifacts``.

Every stage command takes ``--out ROOT`` (default ``$KOLECTRA_HOME`` or ``./artifacts``) and the
common ``--set key=value``, ``--name``, ``--seed`` and ``--force``, and prints the artifact
directory as the last line of stdout (progress goes to stderr). Stage-specific flags are
spelled-out shortcuts for ``--set`` keys.

:data:`COMMANDS` is the whole surface: a command's name, help, how it adds its options and which
function runs it. Handlers return the artifact they produced (its directory is printed) or an
exit code. Stage handlers import :mod:`kolectra.pipeline.stages` (torch, Beam) when they run,
so ``kolectra artifacts list`` and ``--help`` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import math
import os
import sys
from pathlib import Path
from typing import Callable

from kolectra.core.config import ConfigError
from kolectra.pipeline.artifacts import Artifact, Store, default_root
from kolectra.pipeline.errors import handled

BEAM_COMMANDS = ("corpus", "examples")  # any other --option of theirs goes to Beam


def _common(p: argparse.ArgumentParser, with_config: bool = True) -> None:
    p.add_argument("--out", type=Path, default=None,
                   help="artifact root (default: $KOLECTRA_HOME or ./artifacts)")
    if with_config:
        p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config value (dotted keys; unknown keys are errors)")
        p.add_argument("--name", default=None, help="artifact name (the directory is NAME-ID)")
        p.add_argument("--seed", type=int, default=None, help="seed for every random choice of the stage")
        p.add_argument("--force", action="store_true", help="rebuild even if the same request exists")


def _flag_sets(args: argparse.Namespace, mapping: dict[str, str]) -> list[str]:
    """Stage flags are shortcuts for config keys; they win over --set."""
    extra = [f"{key}={getattr(args, attr)}" for attr, key in mapping.items() if getattr(args, attr) is not None]
    return list(args.sets) + extra


def _stage_common(args: argparse.Namespace) -> dict:
    return dict(seed=args.seed, name=args.name, force=args.force)


def _stages():
    from kolectra.pipeline import stages  # torch and Beam: only for commands that run a stage

    return stages


# ---- corpus -------------------------------------------------------------------------------------
CORPUS_FLAGS = {"format": "format", "text_field": "text_field", "id_field": "id_field"}


def add_corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", action="append", required=True, help="path or glob (repeatable)")
    p.add_argument("--format", choices=["auto", "text", "jsonl", "blocks"], default=None,
                   help="auto picks by extension; blocks = documents separated by blank lines")
    p.add_argument("--preset", choices=["default", "production"], default="default",
                   help="default: Unicode clean-up, length filters, exact dedup; production: also web cleaning, "
                        "quality filters and near-duplicate removal")
    p.add_argument("--text-field", default=None)
    p.add_argument("--id-field", default=None)


def run_corpus(args, store: Store, beam_args: list[str]) -> Artifact:
    return _stages().corpus(store, args.input, preset=args.preset, sets=_flag_sets(args, CORPUS_FLAGS),
                            beam_args=beam_args, **_stage_common(args))


# ---- vocab --------------------------------------------------------------------------------------
def add_vocab(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", required=True, help="corpus artifact (path or id)")
    p.add_argument("--vocab-size", type=int, default=None)


def run_vocab(args, store: Store, beam_args: list[str]) -> Artifact:
    return _stages().vocab(store, args.corpus, sets=_flag_sets(args, {"vocab_size": "vocab_size"}),
                           **_stage_common(args))


# ---- examples -----------------------------------------------------------------------------------
def add_examples(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", required=True)
    p.add_argument("--vocab", required=True)
    p.add_argument("--max-seq-length", type=int, default=None)


def run_examples(args, store: Store, beam_args: list[str]) -> Artifact:
    sets = _flag_sets(args, {"max_seq_length": "max_seq_length"})
    return _stages().examples(store, args.corpus, args.vocab, sets=sets, beam_args=beam_args,
                              **_stage_common(args))


# ---- pretrain -----------------------------------------------------------------------------------
# Pretrain flags -> keys of model.config.PretrainConfig.
PRETRAIN_FLAGS = {"objective": "objective.objective", "device": "train.device", "steps": "train.steps",
                  "save_every": "train.save_every", "embedding_sharing": "model.embedding_sharing"}


def add_pretrain(p: argparse.ArgumentParser) -> None:
    p.add_argument("--examples", required=True)
    p.add_argument("--preset", default="tiny", help="tiny | small | small++ | base")
    p.add_argument("--objective", default=None, help="electra | mlm | ...")
    p.add_argument("--embedding-sharing", default=None, choices=["es", "gdes", "none"],
                   help="es: ELECTRA's shared embeddings (default); gdes: DeBERTaV3's gradient-disentangled "
                        "sharing; none: separate tables")
    p.add_argument("--device", default=None, help="cpu | cuda | xla")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--save-every", type=int, default=None)
    p.add_argument("--resume", action="store_true",
                   help="continue the same request from its newest complete checkpoint")


def _pretrain_sets(args: argparse.Namespace) -> list[str]:
    return _flag_sets(args, PRETRAIN_FLAGS)


def run_pretrain(args, store: Store, beam_args: list[str]) -> Artifact:
    return _stages().pretrain(store, args.examples, preset=args.preset, sets=_pretrain_sets(args),
                              resume=args.resume, **_stage_common(args))


# ---- finetune -----------------------------------------------------------------------------------
def add_finetune(p: argparse.ArgumentParser) -> None:
    from kolectra.finetune.tasks import TASKS  # the task table (torch-free)

    tasks = p.add_subparsers(dest="task", required=True, metavar="TASK")
    for name, task in TASKS.items():
        t = tasks.add_parser(name, help=task.help)
        _common(t)
        t.add_argument("--model", required=True, help="checkpoint artifact or a local HF ELECTRA directory")
        t.add_argument("--train", required=True, type=Path)
        t.add_argument(f"--{task.eval_flag}", required=True, type=Path)
        t.add_argument("--preset", default="koelectra", help=" | ".join(task.presets))
        t.add_argument("--seeds", default=None, help="several seeds, e.g. 1,2,3 or 1-5: one eval artifact each, "
                       "then a summary artifact with median and spread")


def run_finetune(args, store: Store, beam_args: list[str]) -> Artifact:
    from kolectra.finetune.seeds import parse_seeds
    from kolectra.finetune.tasks import TASKS

    stages = _stages()
    eval_file = getattr(args, TASKS[args.task].eval_flag)
    if args.seeds:
        if args.seed is not None:
            raise ValueError("give either --seed or --seeds, not both")
        art = stages.finetune_seeds(store, args.task, args.model, args.train, eval_file, parse_seeds(args.seeds),
                                    preset=args.preset, sets=args.sets, name=args.name, force=args.force)
    else:
        art = stages.finetune(store, args.task, args.model, args.train, eval_file, preset=args.preset,
                              sets=args.sets, **_stage_common(args))
    _print_metrics(art.path / "metrics.json")
    return art


def _print_metrics(path: Path) -> None:
    if path.is_file():
        metrics = json.loads(path.read_text(encoding="utf-8"))
        for k, v in metrics.items():
            if isinstance(v, (int, float)):
                print(f"{k:>24}  {v:.4f}" if isinstance(v, float) else f"{k:>24}  {v}")


# ---- run, study, report -------------------------------------------------------------------------
def add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="rebuild every stage")


def run_run(args, store: Store, beam_args: list[str]) -> Artifact:
    from kolectra.pipeline.run import run_sample

    return run_sample(store, force=args.force)


def add_study(p: argparse.ArgumentParser) -> None:
    from kolectra.pipeline.study_plan import READOUTS, StudyPlan

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
    p.add_argument("--objectives", dest="arms", help=argparse.SUPPRESS)  # the earlier name of --arms
    p.add_argument("--readouts", default=",".join(d.readouts), help=f"of {', '.join(READOUTS)} "
                   f"(default {','.join(d.readouts)})")
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
    p.add_argument("--finetune-preset", default=d.finetune_preset)
    p.add_argument("--finetune-set", dest="finetune_sets", action="append", default=None, metavar="KEY=VALUE",
                   help=f"fine-tuning overrides (default {' '.join(d.finetune_sets)})")


def run_study_command(args, store: Store, beam_args: list[str]) -> Artifact:
    from kolectra.pipeline.study import StudyPlan, run_study

    if not math.isfinite(args.flops) or args.flops <= 0:
        raise ConfigError(f"--flops: expected a finite number > 0, got {args.flops}")
    if args.points < 1:
        raise ConfigError(f"--points: expected at least 1, got {args.points}")
    split = lambda s: tuple(x.strip() for x in s.split(",") if x.strip())  # noqa: E731
    plan = StudyPlan(flops=args.flops, points=args.points, preset=args.preset, arms=split(args.arms),
                     readouts=split(args.readouts), pretrain_seeds=args.pretrain_seeds,
                     finetune_seeds=args.finetune_seeds, pretrain_sets=tuple(args.sets),
                     finetune_preset=args.finetune_preset, vocab_size=args.vocab_size, seed=args.seed or 0,
                     dev_rows=args.dev_rows, probe_rows=args.probe_rows, lowdata_rows=args.lowdata_rows,
                     finetune_rows=args.finetune_rows,
                     **({"finetune_sets": tuple(args.finetune_sets)} if args.finetune_sets is not None else {}))
    art = run_study(store, plan, args.nsmc_train, corpus_ref=args.corpus, examples_ref=args.examples,
                    name=args.name, force=args.force)
    print((art.path / "report.md").read_text(encoding="utf-8"))
    return art


def add_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref")
    p.add_argument("--dest", type=Path, default=None, help="folder for report.md and its PNGs "
                   "(default ROOT/reports/<kind>-<name>-<id>)")


def run_report(args, store: Store, beam_args: list[str]) -> int:
    from kolectra.pipeline.report import render

    print(render(store, args.ref, args.dest))
    return 0


# ---- artifacts ----------------------------------------------------------------------------------
def add_artifacts(p: argparse.ArgumentParser) -> None:
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    v = verbs.add_parser("list", help="every complete artifact under the root")
    _common(v, with_config=False)
    v.add_argument("--kind", default=None)
    v = verbs.add_parser("show", help="manifest summary and lineage tree back to the raw inputs")
    _common(v, with_config=False)
    v.add_argument("ref")
    v.add_argument("--json", action="store_true", help="print the whole manifest")
    v = verbs.add_parser("verify", help="re-hash every file; non-zero exit on any mismatch")
    _common(v, with_config=False)
    v.add_argument("ref")
    v = verbs.add_parser("gc", help="remove what killed or refused runs left in ROOT/.tmp, .work and .locks")
    _common(v, with_config=False)
    v.add_argument("--interrupted", action="store_true",
                   help="also remove interrupted pretraining runs (their checkpoints: --resume could continue them)")
    v.add_argument("--dry-run", action="store_true", help="only say what would be removed")


def run_artifacts(args, store: Store, beam_args: list[str]) -> int:
    verbs = {"list": artifacts_list, "show": artifacts_show, "verify": artifacts_verify, "gc": artifacts_gc}
    return verbs[args.verb](args, store)


def artifacts_list(args, store: Store) -> int:
    arts, broken = store.scan(args.kind)
    for a in arts:
        finished = a.manifest.get("provenance", {}).get("finished", "")
        print(f"{a.kind:<11} {a.path.name:<48} {finished}")
    for problem in broken:  # one bad directory does not hide the others
        print(f"skipped: {problem}", file=sys.stderr)
    if not arts:
        print(f"(no artifacts under {store.root})", file=sys.stderr)
    return 0


def artifacts_gc(args, store: Store) -> int:
    removed, kept = store.collect(interrupted=args.interrupted, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for path in removed:
        print(f"{verb} {path}")
    for run in kept:
        print(f"kept interrupted run {run.path} ({run.request.get('name', '?')}, {run.size() / 1e6:.1f} MB): "
              "--resume continues it; gc --interrupted removes it")
    print(f"{len(removed)} {verb}, {len(kept)} interrupted run(s) kept", file=sys.stderr)
    return 0


def artifacts_show(args, store: Store) -> int:
    art = store.resolve(args.ref)
    if args.json:
        print(json.dumps(art.manifest, indent=2, ensure_ascii=False))
        return 0
    m = art.manifest
    print(f"{m['kind']} {m['name']}-{m['id']}  ({art.path})")
    prov = m.get("provenance", {})
    print(f"  built     {prov.get('started', '?')} -> {prov.get('finished', '?')} on {prov.get('host', '?')}"
          f" (kolectra {prov.get('kolectra', '?')}, git {str(prov.get('git_commit'))[:12]})")
    print(f"  files     {len(m['files'])} ({sum(f['bytes'] for f in m['files']):,} bytes), digest {m['digest'][:16]}")
    print(f"  stats     {json.dumps(_headline(m.get('stats', {})), ensure_ascii=False)}")
    if "compute" in m:
        print(f"  compute   {json.dumps(m['compute'], ensure_ascii=False)}")
    print("  lineage")
    for line in store.lineage_lines(art):
        print("    " + line)
    return 0


def artifacts_verify(args, store: Store) -> int:
    problems = store.verify(args.ref)
    for p in problems:
        print(f"MISMATCH {p}")
    if problems:
        print(f"{len(problems)} problem(s)", file=sys.stderr)
        return 1
    art = store.resolve(args.ref)
    print(f"ok {art.path} ({len(art.manifest['files'])} files, digest {art.manifest['digest'][:16]})")
    return 0


def _headline(stats: dict) -> dict:
    """Scalars only: the manifest's stats can hold long tables."""
    return {k: v for k, v in stats.items() if isinstance(v, (int, float, str, bool))}


# ---- the table ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Command:
    help: str
    add: Callable[[argparse.ArgumentParser], None]
    run: Callable[..., Artifact | int]
    common: str = "stage"  # "stage": --out and the config options; "out": --out only; "none": per verb
    description: str | None = None


BEAM_NOTE = "Any further --option is passed to Beam unchanged (e.g. --runner)."
COMMANDS: dict[str, Command] = {
    "corpus": Command("clean, deduplicate and segment raw text (Apache Beam)", add_corpus, run_corpus,
                      description=BEAM_NOTE),
    "vocab": Command("learn a morpheme-aware WordPiece vocabulary from a corpus", add_vocab, run_vocab),
    "examples": Command("build fixed-length pretraining examples (Apache Beam)", add_examples, run_examples,
                        description=BEAM_NOTE),
    "pretrain": Command("replaced token detection pretraining (ELECTRA)", add_pretrain, run_pretrain),
    "finetune": Command("fine-tune and evaluate on NSMC or KorQuAD 1.0", add_finetune, run_finetune, common="none"),
    "run": Command("the whole chain on the embedded sample, then a summary", add_run, run_run, common="out"),
    "study": Command("which pretraining buys the better encoder per FLOP: arms (ELECTRA, MLM, GDES, ...) at equal "
                     "budgets against an untrained floor, read out on held-out NSMC rows with intervals",
                     add_study, run_study_command),
    "report": Command("render an artifact's lineage, stats and metrics as Markdown with plots", add_report,
                      run_report, common="out"),
    "artifacts": Command("list, show, verify or garbage-collect artifacts", add_artifacts, run_artifacts, common="none"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kolectra",
        description="Korean ELECTRA pretraining: corpus -> vocab -> examples -> pretrain -> finetune.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.description)
        if cmd.common != "none":
            _common(p, with_config=cmd.common == "stage")
        cmd.add(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse, run the command, print the artifact directory last; any failure is one line on stderr
    and a non-zero exit (:mod:`kolectra.pipeline.errors`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Nothing is fetched from a hub at run time; and transformers' per-load weight reports are noise here.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    parser = build_parser()
    if argv and argv[0] in BEAM_COMMANDS:
        args, beam_args = parser.parse_known_args(argv)
    else:
        args, beam_args = parser.parse_args(argv), []
    root = args.out if args.out is not None else default_root()
    command = " ".join(c for c in (args.command, getattr(args, "verb", None) or getattr(args, "task", None)) if c)

    def run() -> int:
        if root.exists() and not root.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "is not a directory (--out names the artifact root)", str(root))
        check_beam_args(beam_args)
        result = COMMANDS[args.command].run(args, Store(root), beam_args)
        if isinstance(result, Artifact):
            print(result.path)
            return 0
        return result

    return handled(command, lambda: root, run)


def check_beam_args(beam_args: list[str]) -> None:
    """The Beam options whose bad values Beam itself reports with a traceback from deep inside."""
    for i, arg in enumerate(beam_args):
        key, _, value = arg.partition("=")
        if key == "--direct_num_workers":
            value = value or (beam_args[i + 1] if i + 1 < len(beam_args) else "")
            if not value.lstrip("-").isdigit() or int(value) < 0:
                raise ConfigError(f"--direct_num_workers: expected a whole number >= 0 (0 = one per core), "
                                  f"got {value!r}")


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
