"""What the command line refuses before a command runs, each in one line (exit status 2): settings
that would otherwise be taken silently as something else.

- the environment: ``KOLECTRA_HOME`` set but empty (the artifact root would be the current
  directory), ``KOLECTRA_VERBOSITY`` not one of 0-3, ``KOLECTRA_PROGRESS`` not ``lines`` or ``bar``;
- ``--out ''`` (the same) or a path through a regular file, ``--name`` that is not a valid artifact name as given
  (:func:`pipeline.stages.artifact_name`'s rule), a ``--set`` key given twice;
- on the Beam commands (``corpus``, ``vocab``, ``examples``), every argument kolectra does not know goes to
  Beam, whose option parser drops what it does not know with a log line nobody sees: so
  ``--max-seq-lenght 32`` built ``seq128``. :func:`check_beam_args` parses them with every
  option of every registered ``PipelineOptions`` subclass (Beam's own, any runner's, kolectra's
  ``--corpus_staging``), after importing the named runner's module, which may register its own;
  what is left is refused, with the closest known option; on the other commands, at once
  (:func:`refuse_unknown`). Building that parser imports Beam (about 2 CPU s and 160 MB), which a
  reused artifact's command needs for nothing else: arguments that passed are remembered
  (:func:`_passed_before`), and the same arguments under the same Beam, Python and kolectra pass
  again without it. A refused argument is never remembered: it is refused every time.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Mapping

from kolectra.core.config import ConfigError
from kolectra.core.storage import one_slash_problem
from kolectra.core.verbosity import DEBUG, ENV, QUIET

PROGRESS_ENV = "KOLECTRA_PROGRESS"  # core/bars.ENV
PROGRESS_VALUES = {"", "lines", "bar", "bars"}


class UnknownOption(ConfigError):
    """An argument neither kolectra nor Beam knows; names it and the closest known option."""


def check_environment(environ: Mapping[str, str]) -> None:
    """``environ``: the environment as the command found it (setting the verbosity rewrites it)."""
    home = environ.get("KOLECTRA_HOME")
    if home is not None and not home.strip():
        raise ConfigError("KOLECTRA_HOME is set but empty, which would put the artifact root in the current "
                          "directory: unset it (the root is then ./artifacts) or name a directory")
    if home is not None and (why := one_slash_problem(home, "KOLECTRA_HOME=")):
        raise ConfigError(why.replace("= ", "=", 1))
    level = environ.get(ENV)
    if level is not None and level.strip() not in {str(n) for n in range(QUIET, DEBUG + 1)}:
        raise ConfigError(f"{ENV}={level!r}: expected one of 0 (errors only), 1 (progress, the default), "
                          "2 (also the libraries' warnings), 3 (also their INFO logging)")
    # read by core/bars.use_bars (not imported here: it imports tqdm); any other value meant the terminal's choice
    progress = environ.get(PROGRESS_ENV)
    if progress is not None and progress.strip().lower() not in PROGRESS_VALUES:
        raise ConfigError(f"{PROGRESS_ENV}={progress!r}: expected lines (one line a report) or bar (progress bars); "
                          "unset, the terminal decides")


def check_out(out: str | None) -> None:
    if out is not None and not out.strip():
        raise ConfigError("--out is empty, which would put the artifact root in the current directory: "
                          "name a directory (e.g. --out ./artifacts)")
    if out is None or "://" in out:
        return
    if why := one_slash_problem(out, "--out"):  # s3:/b/x: the root was ./s3:/b/x, built there silently
        raise ConfigError(why)
    # a regular file at or above the root: the store's first write said "ROOT/.locks: is not a directory"
    for above in (Path(out), *Path(out).parents):
        if above.exists():
            if not above.is_dir():
                raise ConfigError(f"--out {out}: {above} is a file, not a directory: the artifact root is a "
                                  "directory; name another (e.g. --out ./artifacts)")
            return


def check_sets(sets: list[str]) -> None:
    """A key set twice is refused: which one would win is not what anyone means."""
    seen: dict[str, str] = {}
    for assignment in sets:
        key = assignment.split("=", 1)[0].strip()
        if key in seen:
            raise ConfigError(f"--set {key} is given twice ({seen[key]!r} and {assignment!r}): give each key once")
        seen[key] = assignment


def check_name(name: str | None) -> None:
    if name is not None:
        from kolectra.pipeline.stages import artifact_name  # noqa: PLC0415 - the store: only when a name is given

        artifact_name(name, "")


class _Refused(Exception):
    pass


def check_beam_args(beam_args: list[str], ours: list[str], command: str, remember: bool = False) -> None:
    """Refuse any of ``beam_args`` that no Beam ``PipelineOptions`` subclass parses; ``ours`` are the
    command's own option strings, offered as suggestions too (``--text-feild`` -> ``--text-field``).
    ``remember``: the same arguments that passed under the same Beam, Python and kolectra pass without
    importing Beam (:func:`_passed_before`), and these are remembered if they pass."""
    if not beam_args:
        return
    mark = _passed_before(beam_args) if remember else None
    if mark is not None and mark.exists():
        return
    _check_beam_args(beam_args, ours, command)
    if mark is not None:
        with contextlib.suppress(OSError):  # a cache that cannot be written: the check runs again next time
            mark.parent.mkdir(parents=True, exist_ok=True)
            mark.touch()


def _passed_before(beam_args: list[str]) -> Path | None:
    """The file that says these ``beam_args`` passed the check, named for everything its verdict depends on
    (``$KOLECTRA_CACHE/beam-options/``, default ``~/.cache/kolectra``): the arguments; the Python; Beam's
    version and the folder it is installed in, whose time changes with any package installed, upgraded or
    removed there (a runner's options come with one); kolectra's options and this check (``corpus/``'s
    sources and this module's, by size and time). None, remembered by no file, for a ``--runner`` named by a
    module path (``pkg.mod.Runner``: a module of the user's, which may change without any of these) or where
    Beam or kolectra's corpus cannot be found."""
    for i, arg in enumerate(beam_args):
        runner = arg.split("=", 1)[1] if arg.startswith("--runner=") else \
            beam_args[i + 1] if arg == "--runner" and i + 1 < len(beam_args) else ""
        if "." in runner:
            return None
    try:
        beam = Path(importlib.util.find_spec("apache_beam").submodule_search_locations[0])  # not imported
        ours = Path(importlib.util.find_spec("kolectra.corpus").submodule_search_locations[0])
        facts = {"args": beam_args, "python": [sys.executable, sys.version],
                 "beam": [str(beam), (beam / "version.py").read_text(encoding="utf-8"), beam.parent.stat().st_mtime_ns],
                 "kolectra": sorted([str(f), f.stat().st_mtime_ns, f.stat().st_size]
                                    for f in [*ours.glob("*.py"), Path(__file__)])}
    except (AttributeError, ImportError, OSError, TypeError, ValueError):
        return None
    key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]
    cache = Path(os.environ.get("KOLECTRA_CACHE") or Path.home() / ".cache" / "kolectra")
    return cache / "beam-options" / key


def _check_beam_args(beam_args: list[str], ours: list[str], command: str) -> None:
    from apache_beam.options.pipeline_options import _BeamArgumentParser  # noqa: PLC0415

    from kolectra.corpus.runners import PipelineOptions  # noqa: PLC0415 - Beam, quieted by the corpus package

    class Parser(_BeamArgumentParser):
        def error(self, message):  # argparse would print a usage and exit
            raise _Refused(message)

    _import_runner(beam_args)
    parser = Parser(allow_abbrev=False, add_help=False, conflict_handler="resolve")
    classes: dict[str, type] = {}
    stack = list(PipelineOptions.__subclasses__())
    while stack:  # every registered subclass, at any depth (Beam itself reads the direct ones)
        cls = stack.pop()
        classes.setdefault(str(cls), cls)
        stack.extend(cls.__subclasses__())
    for cls in classes.values():
        try:
            cls._add_argparse_args(parser)  # noqa: SLF001 - how Beam builds its own parser
        except Exception:  # noqa: BLE001 - a third-party options class that cannot add itself: Beam would fail on it later
            continue
    try:
        _, unknown = parser.parse_known_args(beam_args)
    except _Refused as e:
        raise UnknownOption(f"Beam option: {e}") from None
    if not unknown:
        return
    token = unknown[0]
    if not token.startswith("-"):
        raise UnknownOption(f"unexpected argument {token!r} (a value needs its option, e.g. --input PATH for each "
                            "input)")
    flag = token.split("=", 1)[0]
    known = ours + [s for a in parser._actions for s in a.option_strings]  # noqa: SLF001
    close = difflib.get_close_matches(flag, known, n=1, cutoff=0.7)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UnknownOption(f"unknown option {flag}{hint}: neither kolectra's (kolectra {command} --help) nor one of "
                        "Beam's pipeline options")


def refuse_unknown(extra: list[str], ours: list[str], command: str) -> None:
    """On a command that passes nothing to Beam: an argument it does not know, in one line with the
    closest of ``ours`` (argparse said ``kolectra: error: unrecognized arguments`` under the top
    level's usage, naming neither the command nor its option)."""
    if not extra:
        return
    token = extra[0]
    if not token.startswith("-"):
        raise UnknownOption(f"unexpected argument {token!r} (kolectra {command} --help lists what it takes)")
    flag = token.split("=", 1)[0]
    close = difflib.get_close_matches(flag, ours, n=1, cutoff=0.7)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UnknownOption(f"unknown option {flag}{hint}: kolectra {command} --help lists its options")


def _import_runner(beam_args: list[str]) -> None:
    """Import the module of the runner ``--runner`` names, as Beam will: it may define options."""
    runner = None
    for i, arg in enumerate(beam_args):
        if arg == "--runner" and i + 1 < len(beam_args):
            runner = beam_args[i + 1]
        elif arg.startswith("--runner="):
            runner = arg.split("=", 1)[1]
    if not runner:
        return
    try:
        from apache_beam.runners.runner import _RUNNER_MAP  # noqa: PLC0415

        path = _RUNNER_MAP.get(runner.lower(), _RUNNER_MAP.get(runner.lower() + "runner", runner))
        if "." in path:
            importlib.import_module(path.rsplit(".", 1)[0])
    except Exception:  # noqa: BLE001 - an unknown runner or a missing extra: Beam says so when it creates the runner
        pass
