"""The ``kolectra`` command line: one subcommand per stage, plus ``run``, ``study``, ``report``
and ``artifacts``.

Every stage command takes ``--out ROOT`` (default ``$KOLECTRA_HOME`` or ``./artifacts``), ``-q``
/ ``-v`` and the common ``--set key=value``, ``--name``, ``--seed`` and ``--force``, and prints the
artifact directory as the last line of stdout (progress goes to stderr). Stage-specific flags are
spelled-out shortcuts for ``--set`` keys; ``--print-config [json|keys]`` prints the resolved
config and every settable key without building. The shared options are in
:mod:`pipeline.cli.options`; the commands themselves beside this module: the building ones (``corpus``,
``vocab``, ``examples``, ``pretrain``, ``run``) in :mod:`pipeline.cli.stages`, ``report`` and ``export``
in :mod:`pipeline.cli.outputs`, the fine-tuning tasks in :mod:`pipeline.cli.finetune`, the study in
:mod:`pipeline.cli.study`, the ``artifacts`` verbs in :mod:`pipeline.cli.artifacts`. This module holds
the table of them, the parser and :func:`main`.

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
from kolectra.pipeline.cli.options import print_config_flag as _print_config_flag
from kolectra.pipeline.cli.outputs import add_export, add_report, run_export, run_report
from kolectra.pipeline.cli.stages import (
    add_corpus,
    add_examples,
    add_pretrain,
    add_run,
    add_vocab,
    config_corpus,
    config_examples,
    config_pretrain,
    config_vocab,
    run_corpus,
    run_examples,
    run_pretrain,
    run_run,
    run_vocab,
)
from kolectra.pipeline.cli.stages import configs as _configs
from kolectra.pipeline.cli.study import add_study, run_study_command
from kolectra.pipeline.store.artifacts import Artifact, Store, default_root
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.roots import as_root

BEAM_COMMANDS = ("corpus", "vocab", "examples")  # any other --option of theirs goes to Beam


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
    check_beam_whole_numbers(beam_args)
    cli_checks.check_beam_args(beam_args, _option_strings(parser, args), args.command, remember=True)


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


def check_beam_whole_numbers(beam_args: list[str]) -> None:
    """The whole-number Beam options in :data:`_WHOLE_NUMBER_OPTIONS`, before anything runs."""
    for i, arg in enumerate(beam_args):
        key, _, value = arg.partition("=")
        if key in _WHOLE_NUMBER_OPTIONS:
            least, meaning = _WHOLE_NUMBER_OPTIONS[key]
            value = value or (beam_args[i + 1] if i + 1 < len(beam_args) else "")
            if not value.lstrip("-").isdigit() or int(value) < least:
                raise ConfigError(f"{key}: expected a whole number >= {least} ({meaning}), got {value!r}")
