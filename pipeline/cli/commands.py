"""The ``kolectra`` command line: one subcommand per stage, plus ``run``, ``study``, ``report``
and ``artifacts``.

Every stage command takes ``--out ROOT`` (default ``$KOLECTRA_HOME`` or ``./artifacts``), ``-q``
/ ``-v`` and the common ``--set key=value``, ``--name``, ``--seed`` and ``--force``, and prints the
artifact directory as the last line of stdout (progress goes to stderr). Stage-specific flags are
spelled-out shortcuts for ``--set`` keys; ``--print-config [json|keys]`` prints the resolved
config and every settable key without building. The shared options are in
:mod:`pipeline.cli.options`, the fine-tuning tasks' in :mod:`pipeline.cli.finetune`, the study's in
:mod:`pipeline.cli.study`, the ``artifacts`` verbs in :mod:`pipeline.cli.artifacts`.

:data:`COMMANDS` is the whole surface: a command's name, help, how it adds its options and which
function runs it. Handlers return the artifact they produced (its directory is printed) or an
exit code. Stage handlers import :mod:`kolectra.pipeline.stages` (torch, Beam) when they run,
so ``kolectra artifacts list`` and ``--help`` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import sys
from pathlib import Path
from typing import Callable

import kolectra.pipeline.cli.artifacts as cli_artifacts
import kolectra.pipeline.cli.checks as cli_checks
from kolectra.core import streams
from kolectra.core.config import ConfigError
from kolectra.core.stage import progress
from kolectra.pipeline.cli.artifacts import artifacts_gc, artifacts_list, artifacts_show, artifacts_verify
from kolectra.pipeline.cli.errors import (
    AFTER_BUILDING,
    AFTER_WORKING,
    PRINTING,
    after_the_command,
    handled,
    torchrun_told,
)
from kolectra.pipeline.cli.finetune import add_finetune, config_finetune, run_finetune
from kolectra.pipeline.cli.options import VersionAction, relax, set_verbosity, verbosity_after_command
from kolectra.pipeline.cli.options import common as _common
from kolectra.pipeline.cli.options import flag_sets as _flag_sets
from kolectra.pipeline.cli.options import print_config_flag as _print_config_flag
from kolectra.pipeline.cli.study import add_study, run_study_command
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Store, default_root
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.roots import as_root

BEAM_COMMANDS = ("corpus", "vocab", "examples")  # any other --option of theirs goes to Beam


def _stage_common(args: argparse.Namespace) -> dict:
    return dict(seed=args.seed, name=args.name, force=args.force)


def _stages():
    # the store and the stages: only for commands that run one (each stage imports its libraries as it runs)
    from kolectra.pipeline import stages

    return stages


def _configs():
    from kolectra.pipeline import configs  # torch-free: --print-config answers at once

    return configs


# ---- corpus -------------------------------------------------------------------------------------
CORPUS_FLAGS = {"format": "format", "text_field": "text_field", "id_field": "id_field", "keep_fields": "keep_fields"}


def add_corpus(p: argparse.ArgumentParser) -> None:
    from kolectra.corpus.config import default_config

    d = default_config()
    p.add_argument("--input", action="append", required=True, metavar="PATH_OR_GLOB",
                   help="raw text, repeatable; .gz/.bz2/.zst by extension; gs:// s3:// hdfs:// work "
                        "(e.g. --input 'raw/*.jsonl.gz')")
    p.add_argument("--format", choices=["auto", "text", "jsonl", "blocks", "parquet"], default=None,
                   help=f"text: a document a line; jsonl: an object a line; blocks: documents separated by blank "
                        f"lines; parquet: a document a row; auto: jsonl for *.jsonl|*.json|*.ndjson, parquet for "
                        f"*.parquet|*.pq, else text (default {d.format})")
    p.add_argument("--preset", choices=["default", "production"], default="default",
                   help="default: Unicode clean-up, length filters, exact dedup; production: also web cleaning, "
                        "quality filters and near-duplicate removal (default: default)")
    p.add_argument("--text-field", default=None, metavar="FIELD",
                   help=f"jsonl, parquet: the field (column) holding the text (default {d.text_field}; e.g. --text-field body)")
    p.add_argument("--id-field", default=None, metavar="FIELD",
                   help=f"jsonl, parquet: the field (column) holding the document's id, kept as its id in the corpus; without it the "
                        f"id is made from file and line (default {d.id_field}; e.g. --id-field doc_id)")
    p.add_argument("--keep-fields", default=None, metavar="FIELD,...",
                   help="jsonl, parquet: input fields (columns) carried into each document as they are; a document whose input lacks "
                        "one gets null, counted in stats.json (missing_fields); of duplicates, the kept copy's "
                        "(default: none; e.g. --keep-fields rating,movie_id,date)")


def config_corpus(args) -> tuple:
    return _configs().resolve("corpus", preset=args.preset, sets=_flag_sets(args, CORPUS_FLAGS), seed=args.seed)


def run_corpus(args, store: Store, beam_args: list[str]) -> Artifact:
    return _stages().corpus(store, args.input, preset=args.preset, sets=_flag_sets(args, CORPUS_FLAGS),
                            beam_args=beam_args, **_stage_common(args))


# ---- vocab --------------------------------------------------------------------------------------
def add_vocab(p: argparse.ArgumentParser) -> None:
    from kolectra.vocab.config import default_config

    p.add_argument("--corpus", required=True, metavar="REF",
                   help="the corpus artifact: directory, name-id, id, id prefix or name (e.g. --corpus sample)")
    p.add_argument("--vocab-size", type=int, default=None, metavar="N",
                   help=f"entries, specials and [unusedN] included (default {default_config().vocab_size}; "
                        "e.g. --vocab-size 8000)")


VOCAB_FLAGS = {"vocab_size": "vocab_size"}


def config_vocab(args) -> tuple:
    return _configs().resolve("vocab", sets=_flag_sets(args, VOCAB_FLAGS), seed=args.seed)


def run_vocab(args, store: Store, beam_args: list[str]) -> Artifact:
    return _stages().vocab(store, args.corpus, sets=_flag_sets(args, VOCAB_FLAGS), beam_args=beam_args,
                           **_stage_common(args))


# ---- examples -----------------------------------------------------------------------------------
def add_examples(p: argparse.ArgumentParser) -> None:
    from kolectra.corpus.examples_config import default_config

    p.add_argument("--corpus", required=True, metavar="REF", help="the corpus artifact (e.g. --corpus sample)")
    p.add_argument("--vocab", required=True, metavar="REF",
                   help="the vocab artifact learned from that corpus (e.g. --vocab morph_wordpiece)")
    p.add_argument("--max-seq-length", type=int, default=None, metavar="N",
                   help=f"tokens a row (default {default_config().max_seq_length}; e.g. --max-seq-length 512)")


EXAMPLES_FLAGS = {"max_seq_length": "max_seq_length"}


def config_examples(args) -> tuple:
    return _configs().resolve("examples", sets=_flag_sets(args, EXAMPLES_FLAGS), seed=args.seed)


def run_examples(args, store: Store, beam_args: list[str]) -> Artifact:
    sets = _flag_sets(args, EXAMPLES_FLAGS)
    return _stages().examples(store, args.corpus, args.vocab, sets=sets, beam_args=beam_args,
                              **_stage_common(args))


# ---- pretrain -----------------------------------------------------------------------------------
# Pretrain flags -> keys of model.config.PretrainConfig.
PRETRAIN_FLAGS = {"preset": "preset", "objective": "objective.objective", "device": "train.device", "steps": "train.steps",
                  "save_every": "train.save_every", "embedding_sharing": "model.embedding_sharing"}


def add_pretrain(p: argparse.ArgumentParser) -> None:
    from kolectra.model.config import OBJECTIVES, PRESETS

    # no argparse choices: a bad value is the config's one-line error, naming the known ones
    steps = ", ".join(f"{k} {f().train.steps:,}" for k, f in PRESETS.items())
    p.add_argument("--examples", required=True, metavar="REF", help="the examples artifact (e.g. --examples seq128)")
    p.add_argument("--preset", default=None, help=f"model size and training recipe: {' | '.join(PRESETS)}; "
                   "sizes in docs/pretraining.md; the same as preset = NAME in a --config file, which it overrides "
                   "(default tiny; e.g. --preset small)")
    p.add_argument("--objective", default=None, help=f"{' | '.join(OBJECTIVES)}: electra is replaced token "
                   "detection; hybrid, corrective and mlm_then_rtd add a vocabulary head to its discriminator; the "
                   "others are the paper's ablations (default electra; docs/pretraining.md)")
    p.add_argument("--embedding-sharing", default=None, choices=["es", "gdes", "none"],
                   help="es: ELECTRA's shared embeddings; gdes: DeBERTaV3's gradient-disentangled "
                        "sharing; none: separate tables (default es)")
    p.add_argument("--device", default=None,
                   help="cpu | cuda | xla (a TPU through torch-xla): where to train (default cpu; e.g. --device cuda)")
    p.add_argument("--steps", type=int, default=None, metavar="N",
                   help=f"optimizer steps (default: the preset's: {steps}; e.g. --steps 600)")
    p.add_argument("--save-every", type=int, default=None, metavar="N",
                   help="write a checkpoint every N steps, which --resume continues from (default 0: none; "
                        "e.g. --save-every 1000)")
    p.add_argument("--resume", action="store_true",
                   help="continue the same request from its newest complete checkpoint")


def config_pretrain(args) -> tuple:
    return _configs().resolve("pretrain", sets=_pretrain_sets(args), seed=args.seed)


def _pretrain_sets(args: argparse.Namespace) -> list[str]:
    return _flag_sets(args, PRETRAIN_FLAGS)


def run_pretrain(args, store: Store, beam_args: list[str]) -> Artifact:
    cfg, _ = config_pretrain(args)
    if cfg.train.steps == 0:  # kolectra study makes its untrained floor itself, through the stage
        raise ArtifactError("train.steps: 0 would publish the random initialisation as a trained checkpoint; "
                            "give at least 1 (e.g. --steps 600)")
    return _stages().pretrain(store, args.examples, sets=_pretrain_sets(args),
                              resume=args.resume, **_stage_common(args))


# ---- run, study, report -------------------------------------------------------------------------
def add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="rebuild every stage")


def run_run(args, store: Store, beam_args: list[str]) -> Artifact:
    from kolectra.pipeline.run import run_sample

    return run_sample(store, force=args.force)


def add_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", nargs="*", help="the artifact: directory, name-id, id, id prefix or name (e.g. sample-nsmc); "
                   "several eval artifacts: one table of their scores, models as rows and tasks as columns")
    p.add_argument("--published", action="store_true", help="published Korean models' NSMC and KorQuAD figures, with "
                   "their sources and splits (docs/published.md): alone, printed; with REF, rows of report.md's score "
                   "table beside yours, in percent, with the split each figure used")
    p.add_argument("--dest", default=None, help="folder for report.md and its PNGs, local or in a store "
                   "(s3://, gs://) (default ROOT/reports/<kind>-<name>-<id>, for several eval artifacts "
                   "ROOT/reports/table-<hash>)")


def run_report(args, store: Store, beam_args: list[str]) -> int:
    from kolectra.pipeline.report import render
    from kolectra.pipeline.scores import render_table

    if not args.ref and not args.published:
        raise ConfigError("report: give the artifact to report (e.g. kolectra report sample-nsmc), or --published")
    if args.published and not args.ref:
        from kolectra.pipeline.published import table as published_table

        with after_the_command(PRINTING):  # the table alone builds nothing; under PYTHONUNBUFFERED it fails here
            print("published models (docs/published.md; not comparable with a score on fewer rows or another split):")
            print("\n".join(published_table()))
    if len(args.ref) > 1:  # with --published, their rows join the table (and report.md), with each row's split
        path, table = render_table(store, args.ref, args.dest, args.published)
        with after_the_command():  # report.md is written: under PYTHONUNBUFFERED a full disk fails here
            print(table)
            print(path)
        return 0
    if args.ref:  # with --published, report.md ends with the eval's row in the published models' table
        written = render(store, args.ref[0], args.dest, args.published)
        with after_the_command():
            print(written)
    return 0


# ---- export -------------------------------------------------------------------------------------
def add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", help="the checkpoint artifact: directory, name-id, id, id prefix or name (e.g. sample)")
    p.add_argument("--to", required=True, metavar="DIR",
                   help="the folder to write, new or empty: local, or in a store (s3://, gs://; written locally "
                        "and uploaded) (required, no default; e.g. --to koelectra-small-mine)")
    p.add_argument("--role", default="discriminator", choices=["discriminator", "generator"],
                   help="which network: the discriminator to fine-tune, or the generator, a masked LM "
                        "(default discriminator)")
    p.add_argument("--dataset", dest="datasets", action="append", default=[], metavar="HUB_ID",
                   help="a Hub dataset the model was trained on, for the card's metadata, repeatable "
                        "(default: none; local corpus artifacts are named in the card's lineage; "
                        "e.g. --dataset e9t/nsmc)")
    p.add_argument("--base-model", default=None, metavar="HUB_ID",
                   help="the Hub model pretraining continued from (default: none; e.g. --base-model "
                        "monologg/koelectra-small-v3-discriminator)")
    p.add_argument("--push", default=None, metavar="REPO_ID",
                   help="then upload the folder to this Hub model repository in one commit, creating it if "
                        "absent (default: no upload; needs a token: hf auth login or HF_TOKEN; "
                        "e.g. --push me/kolectra-small)")
    p.add_argument("--private", action="store_true",
                   help="with --push: create the repository private (default: public)")
    p.add_argument("--dry-run", action="store_true",
                   help="with --push: print the files the commit would upload, and upload nothing (default: upload)")


def run_export(args, store: Store, beam_args: list[str]) -> int:
    from kolectra.pipeline import hub

    if (args.dry_run or args.private) and not args.push:
        raise ConfigError("--dry-run and --private go with --push REPO_ID")
    with hub.exported(store, args.ref, args.to, args.role, args.datasets, args.base_model, args.push) as (
            art, folder, where):
        for op in hub.operations(folder):
            print(f"  {op.path_in_repo}")
        positions = hub.positions_note(art, hub.readable(folder))
        if args.push:
            if args.dry_run:
                for line in hub.warnings(art, args.private):
                    streams.say(f"kolectra export: warning: {line}")  # a log's reader gone: not the push's end
            print("\n".join(hub.push(folder, args.push, args.dry_run, args.private)))
    if positions:  # said once the export (and push) stands; its card says it too
        streams.say(f"kolectra export: note: {positions.removeprefix('Positions: ')}")
    with after_the_command():  # the folder is exported (and pushed)
        print(where)
    return 0


# ---- artifacts ----------------------------------------------------------------------------------
def add_artifacts(p: argparse.ArgumentParser) -> None:
    cli_artifacts.add_artifacts(p, _common)


def run_artifacts(args, store: Store, beam_args: list[str]) -> int:
    # looked up here, at call time: a test may replace one verb in this module
    verbs = {"list": artifacts_list, "show": artifacts_show, "verify": artifacts_verify, "gc": artifacts_gc}
    return verbs[args.verb](args, store)


# ---- the table ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Command:
    help: str
    add: Callable[[argparse.ArgumentParser], None]
    run: Callable[..., Artifact | int]
    common: str = "stage"  # "stage": --out and the config options; "out": --out only; "none": per verb
    description: str | None = None
    example: str | None = None  # shown under --help
    config: Callable[[argparse.Namespace], tuple] | None = None  # the resolved config: --print-config
    set_example: str = "train.lr=1e-3"  # a --set this command accepts, for its help
    keys_from: str = "--print-config keys"  # what lists its --set keys, for its help
    code: str = ""  # where the command's stage lives, shown under --help (the README's code map says the same)
    # The heavy libraries the command imports before its first line of progress, named in a
    # "starting" line: on a busy machine, importing them was the longest silence (docs/pretraining.md).
    loads: str = ""


BEAM_NOTE = ("Any further --option is passed to Beam unchanged (e.g. --runner; --direct_num_workers N:\n"
             "local worker processes, by default one per 2 CPUs above 4 MB of input).\n"
             "kolectra's own, beside Beam's:\n"
             "--local_memory_gb GB: the memory a local run may use (default: the machine's); a job\n"
             "whose estimated peak is larger is refused before it starts.")
STAGING_NOTE = "\n--corpus_staging DIR: where remote workers write."
VOCAB_NOTE = BEAM_NOTE + STAGING_NOTE
CORPUS_NOTE = (BEAM_NOTE + "\n--analysis_threads N: Kiwi's threads a worker (default: a local worker's share\n"
               "of the CPUs, 1 on other runners)." + STAGING_NOTE)
COMMANDS: dict[str, Command] = {
    "corpus": Command("clean, deduplicate and segment raw text (Apache Beam)", add_corpus, run_corpus,
                      description=CORPUS_NOTE, config=config_corpus, set_example="min_chars=20", code="corpus/",
                      loads="Apache Beam, kiwipiepy",
                      example="kolectra corpus --input 'raw/*.jsonl.gz' --preset production --name web"),
    "vocab": Command("learn a morpheme-aware WordPiece vocabulary from a corpus (words counted by Apache Beam)",
                     add_vocab, run_vocab, description=VOCAB_NOTE, config=config_vocab, set_example="min_frequency=3",
                     loads="Apache Beam, tokenizers", code="vocab/",
                     example="kolectra vocab --corpus web --vocab-size 35000"),
    "examples": Command("build fixed-length pretraining examples (Apache Beam)", add_examples, run_examples,
                        description=BEAM_NOTE, config=config_examples, set_example="packing=stream",
                        code="corpus/ (examples*.py, packing.py: the second Beam job of the corpus stage)",
                        loads="Apache Beam, tokenizers",
                        example="kolectra examples --corpus web --vocab morph_wordpiece --max-seq-length 128"),
    "pretrain": Command("replaced token detection pretraining (ELECTRA)", add_pretrain, run_pretrain,
                        config=config_pretrain, code="model/ (train.py, the trainer; the objectives beside it)",
                        loads="torch, transformers",
                        example="kolectra pretrain --examples seq128 --preset small --steps 100000 --save-every 5000\n"
                                "  kolectra pretrain --preset small --set train.lr=1e-3 --print-config keys"),
    "finetune": Command("fine-tune and evaluate: NSMC, KorQuAD 1.0, classify, regress, ner", add_finetune, run_finetune,
                        common="none", loads="torch, transformers", code="finetune/"),
    "run": Command("the whole chain on the embedded sample, then a summary", add_run, run_run, common="out",
                   example="kolectra run --out /tmp/kolectra", code="pipeline/run.py",
                   loads="Apache Beam, torch, transformers"),
    "study": Command("which pretraining buys the better encoder per FLOP: arms (ELECTRA, MLM, GDES, ...) at equal "
                     "budgets against an untrained floor, read out on held-out NSMC rows with intervals",
                     add_study, run_study_command, code="pipeline/study/", loads="Apache Beam, torch, transformers",
                     example="kolectra study --corpus web --nsmc-train ratings_train.txt --flops 1e14 --points 3",
                     keys_from="kolectra pretrain --print-config keys"),  # its --set is every arm's pretraining
    "report": Command("render an artifact's lineage, stats and metrics as Markdown with plots", add_report,
                      run_report, common="out", code="pipeline/report.py, pipeline/scores.py",
                      example="kolectra report sample-nsmc sample-korquad --published"),
    "export": Command("a checkpoint's model as a Hugging Face Hub folder (weights, tokenizer, card); "
                      "optionally pushed", add_export, run_export, common="out", code="pipeline/hub.py, model/export.py",
                      example="kolectra export sample --to ./kolectra-tiny --push me/kolectra-tiny --dry-run"),
    "artifacts": Command("list, show, verify or garbage-collect artifacts", add_artifacts, run_artifacts, common="none",
                         code="pipeline/store/"),
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal (a bad option value: ``--steps abc``) is handed to torchrun too:
    its summary of failed ranks said only 'To enable traceback see: ...' for it. Subcommands' parsers are
    of this class as well (``add_subparsers`` makes its parent's kind)."""

    def error(self, message: str):
        torchrun_told(f"{self.prog}: error: {message}")
        super().error(message)

    def print_help(self, file=None) -> None:
        if file is not None:
            return super().print_help(file)
        # through the command's handler, as --version: buffered, a reader gone (`kolectra --help | head -c0`)
        # ended 'Exception ignored in: <_io.TextIOWrapper name='<stdout>'...', status 120. Written here, not by
        # argparse's print_help, which drops a failed write: under PYTHONUNBUFFERED `kolectra --help > /dev/full`
        # ended 0, silent, with no help written
        def write() -> int:
            with after_the_command(PRINTING):
                sys.stdout.write(self.format_help())
            return 0

        code = handled(f"{self.prog.removeprefix('kolectra ')} --help".removeprefix("kolectra "), Path.cwd, write,
                       after=PRINTING)
        if code:
            self.exit(code)
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kolectra",
        description="Korean ELECTRA pretraining: corpus -> vocab -> examples -> pretrain -> finetune.",
        epilog="Every command has its own --help. Start with: kolectra run",
    )
    parser.add_argument("--version", action=VersionAction,
                        help="print kolectra's version and its main libraries' versions, then exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, cmd in COMMANDS.items():
        epilog = "\n".join(([f"example:\n  {cmd.example}"] if cmd.example else [])
                           + ([f"code: {cmd.code}"] if cmd.code else []))
        p = sub.add_parser(name, help=cmd.help, description=cmd.description, epilog=epilog or None,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if cmd.common != "none":
            _common(p, with_config=cmd.common == "stage", set_example=cmd.set_example, keys_from=cmd.keys_from)
        if cmd.config is not None:
            _print_config_flag(p)
        cmd.add(p)
    return parser


def print_config(args: argparse.Namespace) -> int:
    cmd = COMMANDS[args.command]
    resolver = config_finetune if args.command == "finetune" else cmd.config
    cfg, doc = resolver(args)
    try:
        with after_the_command(PRINTING):  # under PYTHONUNBUFFERED a full disk fails here, not at the flush
            print(_configs().render(cfg, doc, args.print_config), flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - no second error when Python flushes at exit
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse, run the command, print the artifact directory last; any failure is one line on stderr
    and a non-zero exit (:mod:`kolectra.pipeline.cli.errors`)."""
    argv = verbosity_after_command(list(sys.argv[1:] if argv is None else argv))
    # The environment as found, for check_environment: building the parser imports kolectra.corpus,
    # whose beam_logging writes KOLECTRA_VERBOSITY back clamped ('loud' -> 1, 7 -> 3), as set_verbosity does
    environ = dict(os.environ)
    # Waiting OpenMP threads sleep instead of spinning (read when torch loads OpenMP, after this):
    # with another job on the CPU, spinning threads slowed pretraining at mini 1.42x with one busy
    # neighbour and 6-20x on busier machines; idle, sleeping costs about a tenth (docs/pretraining.md).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    parser = build_parser()
    if any(a == "--print-config" or a.startswith("--print-config=") for a in argv):
        relax(parser)
    if argv and argv[0] in COMMANDS:  # arguments a command does not know go to Beam, or are refused in
        args, beam_args = parser.parse_known_args(argv)  # its own words (check_arguments), not argparse's top level
    else:
        args, beam_args = parser.parse_args(argv), []
    # Nothing is fetched from a hub at run time; and transformers' per-load weight reports are noise here.
    # The one exception is `kolectra export --push` (not --dry-run): an upload, which needs the Hub. Read
    # from the parsed options (huggingface_hub, which reads it, is not imported yet): `--push=ID` was an
    # upload kolectra itself had put offline ("HF_HUB_OFFLINE is set in the environment")
    if not (args.command == "export" and args.push and not args.dry_run):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    set_verbosity(args)
    root = as_root(args.out) if args.out else default_root()
    command = " ".join(c for c in (args.command, getattr(args, "verb", None) or getattr(args, "task", None)) if c)

    def checked(then: Callable[[], int]) -> Callable[[], int]:
        def run_checked() -> int:
            check_arguments(parser, args, beam_args, environ)
            return then()
        return run_checked

    if getattr(args, "print_config", None):
        return handled(command, lambda: root, checked(lambda: print_config(args)), after=PRINTING)

    def run() -> int:
        if isinstance(root, Path) and root.exists() and not root.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "is not a directory (--out names the artifact root)", str(root))
        if COMMANDS[args.command].loads and sys.stderr.isatty():  # for a person waiting at a terminal; logs
            # and failures keep their first line for what happened (a bad setting is one line, not two)
            progress(f"{command}: starting (loading {COMMANDS[args.command].loads})")
        if COMMANDS[args.command].loads:  # a command that works: what killed runs left in the temporary folder goes
            from kolectra.core import scratch

            scratch.sweep_once(label=command)
        result = COMMANDS[args.command].run(args, open_store(root), beam_args)
        if isinstance(result, Artifact):
            if _first_on_its_machine():
                with after_the_command():  # under PYTHONUNBUFFERED the line is written here, not at the flush
                    print(result.path)
            return 0
        return result

    # the artifacts verbs build nothing: a full disk under their lines claimed '(what it built stands)'; nor does
    # report --published without REF, which prints the published models' table alone
    after = (AFTER_WORKING if args.command == "artifacts" else
             PRINTING if args.command == "report" and not args.ref else AFTER_BUILDING)
    return handled(command, lambda: root, checked(run), after=after)


def _first_on_its_machine() -> bool:
    """This process prints the artifact's path: every rank of a data-parallel build (torchrun's) returns what
    rank 0 published, and each printed it, so `CKPT=$(torchrun --nproc_per_node 8 ... pretrain ...)` held 8
    lines; the first rank of each machine (LOCAL_RANK 0, unset outside a launcher) prints it, once there."""
    return os.environ.get("LOCAL_RANK", "").strip() in ("", "0")


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, beam_args: list[str],
                    environ: dict[str, str]) -> None:
    """What is refused before anything runs (:mod:`pipeline.cli.checks`): the environment, an
    empty --out, a --name that is not one, a --set key twice, arguments neither kolectra nor Beam knows."""
    cli_checks.check_environment(environ)
    cli_checks.check_out(args.out if hasattr(args, "out") else None)
    cli_checks.check_sets(list(getattr(args, "sets", None) or []))
    cli_checks.check_name(getattr(args, "name", None))
    if args.command not in BEAM_COMMANDS:  # nothing goes to Beam: what is left is a slip
        command = " ".join(c for c in (args.command, getattr(args, "verb", None) or getattr(args, "task", None)) if c)
        cli_checks.refuse_unknown(beam_args, _option_strings(parser, args), command)
        return
    check_beam_args(beam_args)
    cli_checks.check_beam_args(beam_args, _option_strings(parser, args), args.command)


def _option_strings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The --options of the (sub)command that ``args`` ran: ``finetune nsmc``'s, not ``finetune``'s."""
    for name in (args.command, getattr(args, "verb", None), getattr(args, "task", None)):
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)  # noqa: SLF001
        if name is None or sub is None or name not in sub.choices:
            continue
        parser = sub.choices[name]
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--")]  # noqa: SLF001


# Beam options whose bad values Beam reports with a traceback from deep inside (or, for ours, only
# when a job runs: a reused artifact would skip the check): the least whole number, and its meaning.
_WHOLE_NUMBER_OPTIONS = {
    "--direct_num_workers": (0, "0 = one per core"),
    "--analysis_threads": (1, "Kiwi's threads a worker"),
}


def check_beam_args(beam_args: list[str]) -> None:
    """The whole-number Beam options in :data:`_WHOLE_NUMBER_OPTIONS`, before anything runs."""
    for i, arg in enumerate(beam_args):
        key, _, value = arg.partition("=")
        if key in _WHOLE_NUMBER_OPTIONS:
            least, meaning = _WHOLE_NUMBER_OPTIONS[key]
            value = value or (beam_args[i + 1] if i + 1 < len(beam_args) else "")
            if not value.lstrip("-").isdigit() or int(value) < least:
                raise ConfigError(f"{key}: expected a whole number >= {least} ({meaning}), got {value!r}")
