"""Every ``kolectra`` command line in a code block of README.md and docs/*.md, and every one in inline code
(the benchmark table's commands, pieces such as ``kolectra examples --set shard_size=N``), is one the command
line takes as written: its options exist, its ``--set`` keys are keys of that command, its values parse
(a stage command through ``--print-config keys``, which resolves the config and builds nothing; the
others through the parser). A renamed option or config key left in a copied example would otherwise
first be met by a reader (test_docs.py checks the links and the version history; test_cli_surface.py
the examples in ``--help``)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from kolectra.pipeline.cli import COMMANDS, build_parser, main

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# a synopsis, not a command: optional parts in brackets, alternatives, elisions
SYNOPSIS = re.compile(r"\[|\||\.\.\.|…|[\u2500-\u25ff]")  # and a diagram's box lines


def _commands(page: Path):
    """(line number, command) of each `kolectra ...` line in a fenced block, continuation lines joined;
    a shell's `&&`, `|`, redirection and comment end it."""
    fenced, start, buf = False, 0, ""
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced, buf = not fenced, ""
            continue
        if not fenced:
            continue
        if not buf:
            m = re.search(r"(?:^|\s|&&\s*|/bin/)(kolectra\s+[a-z].*)", line)
            if not m:
                continue
            start, buf = n, m.group(1)
        else:
            buf += " " + line.strip()
        if buf.endswith("\\"):
            buf = buf[:-1]
            continue
        command = re.split(r"\s(?:#|&&|\||>|2>)", buf)[0].strip()
        buf = ""
        yield start, command


def _spans(page: Path):
    """(line number, command) of each `kolectra ...` in inline code outside the blocks: whole commands
    (the benchmark table's) and pieces of them (`kolectra examples --set shard_size=N`) alike."""
    fenced = False
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fenced = fenced != line.startswith("```")
        if not fenced and not line.startswith("```"):
            yield from ((n, m.group(1)) for m in re.finditer(r"`(kolectra [^`]+)`", line))


# the value placeholders of the pages' pieces of commands, as a reader fills them in
FILLED = {"N": "128", "FRACTION": "0.1"}


def _cases():
    for page in DOCS:
        for n, command in [*_commands(page), *_spans(page)]:
            try:
                argv = [re.sub(r"=N$", "=128", FILLED.get(a, a)) for a in shlex.split(command)[1:]]
            except ValueError:
                continue
            if (not argv or argv[0] not in COMMANDS or SYNOPSIS.search(command) or "--config" in argv
                    or any(a.endswith(":") for a in argv[:2])
                    or (argv[0] == "finetune" and (len(argv) < 2 or argv[1].startswith("-") or argv[1] == "TASK"))):
                continue  # prose, a message quoted, a synopsis, a --config file only shown, no task named
            yield pytest.param(argv, id=f"{page.name}:{n}")


CASES = list(_cases())


def test_the_pages_hold_commands_to_check():
    assert len(CASES) >= 30, len(CASES)  # the extraction still finds them


@pytest.mark.parametrize("argv", CASES)
def test_a_command_in_the_docs_is_taken_as_written(argv):
    out, err = io.StringIO(), io.StringIO()
    staged = COMMANDS[argv[0]].config is not None or argv[0] == "finetune"
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if staged and "--print-config" not in " ".join(argv):
                code = main([*argv, "--print-config", "keys"])
            else:
                build_parser().parse_args(argv)
                code = 0
        except SystemExit as e:  # a piece of a command that leaves out what it requires is one still
            code = 0 if "the following arguments are required" in err.getvalue() else e.code
    assert not code, f"kolectra {shlex.join(argv)}: {err.getvalue().strip()[-500:]}"


def test_every_command_the_pages_name_is_one():
    """A `kolectra WORD` whose WORD is no command was skipped above as prose: finetune.md named `kolectra probe`
    (the linear probe is a study's readout; kolectra has no such command) until 2026-12-02."""
    named = {(page.name, n, command.split()[1]) for page in DOCS for n, command in _spans(page)
             if re.fullmatch(r"[a-z][a-z_-]*", command.split()[1])}  # inline code: a block's may be prose
    assert len(named) >= 100, len(named)
    assert not [x for x in named if x[2] not in COMMANDS], sorted(x for x in named if x[2] not in COMMANDS)
