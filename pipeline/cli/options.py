"""The options every ``kolectra`` command shares, and the ones about the command line itself.

- :func:`common`: ``--out``, ``-q``/``-v`` and, on stage commands, ``--set``, ``--config``,
  ``--name``, ``--seed``, ``--force``, spelled the same everywhere;
- :func:`flag_sets`: a command's assignments in the order they apply: ``--config`` file, ``--set``,
  the command's own flags (a key given by a flag and by ``--set`` is refused);
- :func:`print_config_flag`: ``--print-config [json|keys]`` on the stage commands (:mod:`pipeline.configs`);
- :class:`VersionAction`: ``kolectra --version``;
- :func:`set_verbosity`: ``-q``/``-v`` for kolectra (:mod:`core.verbosity`), Beam and transformers;
- :func:`relax`: with ``--print-config`` no option is required.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path


def common(p: argparse.ArgumentParser, with_config: bool = True, set_example: str = "train.lr=1e-3",
           seed_default: int = 0, keys_from: str = "--print-config keys") -> None:
    """``set_example``: a key=value this command accepts, for its --set help (a test holds every
    help example to the command's --print-config keys); ``seed_default``: its config's seed, for the
    --seed help (the fine-tuning presets' is 42); ``keys_from``: what lists the --set keys (a command
    without --print-config names the one that has its keys)."""
    # a string, not a Path: Path("") is ".", and an empty --out is refused (pipeline/cli/checks.py);
    # a store URL stays a URL
    p.add_argument("--out", default=None, metavar="ROOT",
                   help="artifact root: a directory or a store URL (default: $KOLECTRA_HOME, else ./artifacts; "
                        "e.g. --out /data/kolectra or --out s3://bucket/kolectra)")
    p.add_argument("-q", "--quiet", action="count", default=0,
                   help="errors and warnings only on stderr; stdout keeps the results (default: progress shown)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="-v: also the libraries' warnings (Beam, transformers); -vv: also their INFO logging")
    if with_config:
        p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config value, repeatable (dotted keys; unknown keys are errors; default: "
                            f"the preset's values; e.g. --set {set_example}; {keys_from} lists them)")
        p.add_argument("--config", dest="config_file", default=None, metavar="FILE",
                       help="settings from a TOML file (or YAML with PyYAML installed): the --set keys, nested "
                            "tables as dotted keys ([train] lr = 1e-3 is train.lr); --set and the command's flags "
                            "override it (default: none; e.g. --config pretrain.toml)")
        p.add_argument("--name", default=None, help="artifact name: the directory is NAME-ID (default: from the "
                       "stage and its settings; e.g. --name nsmc-small)")
        p.add_argument("--seed", type=int, default=None,
                       help=f"seed for every random choice of the stage (default: the config's, {seed_default}; "
                            "e.g. --seed 3)")
        p.add_argument("--force", action="store_true", help="rebuild even if the same request exists")


def print_config_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--print-config", nargs="?", const="json", default=None, choices=("json", "keys"),
                   metavar="json|keys", help="print the resolved config (json, the default: as the manifest will "
                   "record it; keys: every --set key with its value and type) and exit without building; the other "
                   "required options may be left out (e.g. --print-config keys)")


def version_text() -> str:
    """kolectra's version and those of the libraries that decide its outputs (read without importing them)."""
    from importlib import metadata

    def v(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    libs = ", ".join(f"{d} {v(d)}" for d in ("torch", "transformers", "tokenizers", "datasets", "apache-beam",
                                              "kiwipiepy"))
    return f"kolectra {v('kolectra')} ({libs}; Python {sys.version.split()[0]})"


class VersionAction(argparse.Action):
    """Prints :func:`version_text` as it is (argparse's own version action re-wraps it) and exits 0."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from kolectra.pipeline.cli.errors import PRINTING, after_the_command, handled  # noqa: PLC0415 - argparse's

        def write() -> int:  # under PYTHONUNBUFFERED a full disk fails here, not at the flush: the same words
            with after_the_command(PRINTING):
                print(version_text())
            return 0

        # through the command's handler: stdout on a full disk or with its reader gone (`| head -c0`) ended in
        # a traceback (status 1) or, buffered, Python's 'Exception ignored in: <_io.TextIOWrapper ...' (120)
        parser.exit(handled("--version", Path.cwd, write, after=PRINTING))


def relax(parser: argparse.ArgumentParser) -> None:
    """No option is required (``--print-config`` needs none of a stage's inputs); subcommands stay required."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps them nowhere public
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                relax(sub)
        elif action.option_strings:
            action.required = False
    for group in parser._mutually_exclusive_groups:  # noqa: SLF001
        group.required = False


def verbosity_after_command(argv: list[str]) -> list[str]:
    """``kolectra -q corpus ...`` read as ``kolectra corpus ... -q``: the verbosity flags belong to each
    command's parser (to the verb's, for ``artifacts list`` and ``finetune nsmc``), and users put them
    on either side of the command's name."""
    lead = []
    while argv and (argv[0] in ("--quiet", "--verbose") or re.fullmatch(r"-(q+|v+)", argv[0])):
        lead.append(argv[0])
        argv = argv[1:]
    return argv + lead


def set_verbosity(args: argparse.Namespace) -> None:
    """``-q``/``-v`` (else ``$KOLECTRA_VERBOSITY``) for kolectra, Beam and transformers."""
    from kolectra.core import verbosity

    quiet, verbose = getattr(args, "quiet", 0), getattr(args, "verbose", 0)
    level = verbosity.set_level(verbosity.NORMAL - quiet + verbose) if quiet or verbose else verbosity.level()
    if level >= verbosity.VERBOSE:  # transformers reads it when first imported, after this
        os.environ["TRANSFORMERS_VERBOSITY"] = "info" if level >= verbosity.DEBUG else "warning"
    beam_logging = sys.modules.get("kolectra.corpus.beam_logging")  # imported already (an earlier call)
    if beam_logging is not None:
        beam_logging.set_verbosity(level)


def config_sets(args: argparse.Namespace) -> list[str]:
    """The ``--config`` file's assignments, then ``--set``'s: later ones win."""
    from kolectra.core.config import read_config_file

    path = getattr(args, "config_file", None)
    return (read_config_file(path) if path else []) + list(args.sets)


def flag_sets(args: argparse.Namespace, mapping: dict[str, str]) -> list[str]:
    """A command's flags are shortcuts for config keys; they win over --config. A key given by its flag and
    by --set too is refused (:func:`check_flags_against_sets`), as --set refuses one key twice."""
    check_flags_against_sets(args, mapping)
    extra = [f"{key}={getattr(args, attr)}" for attr, key in mapping.items() if getattr(args, attr) is not None]
    return config_sets(args) + extra


def check_flags_against_sets(args: argparse.Namespace, mapping: dict[str, str]) -> None:
    """A key set by a flag (``mapping``: attribute -> key; ``--seed`` and ``--seeds`` set ``seed``) and by
    ``--set`` is refused in one line naming both, even with the same value (two ``--set`` of one key
    are): the flag won silently, ``--steps 10 --set train.steps=20`` training 10 steps."""
    from kolectra.core.config import ConfigError

    given = {assignment.split("=", 1)[0].strip(): assignment for assignment in getattr(args, "sets", None) or []}
    flags = dict(mapping)
    flags.update({attr: "seed" for attr in ("seed", "seeds")})
    for attr, key in flags.items():
        value = getattr(args, attr, None)
        if value is not None and key in given:
            flag = "--" + attr.replace("_", "-")
            raise ConfigError(f"{key} is given twice, by {flag} {value} and by --set {given[key]}: give it once")
