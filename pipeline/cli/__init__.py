"""The ``kolectra`` command line: :mod:`.commands` holds every command (:data:`COMMANDS`, the whole
surface) and its ``main``; :mod:`.options` the options they share, :mod:`.finetune`, :mod:`.study` and
:mod:`.artifacts` the commands with options of their own, :mod:`.checks` what is refused before a
command runs, and :mod:`.errors` how a command ends when something goes wrong.

``kolectra`` (the installed script) and ``python -m kolectra.pipeline.cli`` both call :func:`main`.
This module imports nothing of kolectra until then: the installed script imports it before it calls
:func:`main`, and a Ctrl-C during :mod:`.commands`' imports and its parser (about 0.5 s, before a
command's own handler is in place) printed a KeyboardInterrupt traceback from the import machinery.
"""

from __future__ import annotations

import sys

__all__ = ["COMMANDS", "build_parser", "main"]

STARTING_LINE = "kolectra: interrupted while starting; nothing was done"


def main(argv: list[str] | None = None) -> int:
    """The command's exit status (:func:`kolectra.pipeline.cli.commands.main`); a Ctrl-C before the
    command's handler is in place (:func:`kolectra.pipeline.cli.errors.handled`) is one line, 130."""
    try:
        from kolectra.pipeline.cli import commands  # noqa: PLC0415 - here, so that a Ctrl-C in it is caught

        return commands.main(argv)
    except KeyboardInterrupt:
        errors = sys.modules.get("kolectra.pipeline.cli.errors")  # imported by then, unless cut short itself
        if not getattr(errors, "ENTERED", False):  # else its line is out (Ctrl-C again as it was said)
            print(STARTING_LINE, file=sys.stderr, flush=True)
        return 130  # errors.EXIT_INTERRUPTED


def __getattr__(name: str):
    """``COMMANDS`` and ``build_parser``, from :mod:`.commands` when first asked for."""
    if name in ("COMMANDS", "build_parser"):
        from kolectra.pipeline.cli import commands  # noqa: PLC0415

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
