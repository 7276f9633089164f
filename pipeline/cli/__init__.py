"""The ``kolectra`` command line: :mod:`.commands` holds every command (:data:`COMMANDS`, the whole
surface) and :func:`main`; :mod:`.options` the options they share, :mod:`.finetune`, :mod:`.study` and
:mod:`.artifacts` the commands with options of their own, :mod:`.checks` what is refused before a
command runs, and :mod:`.errors` how a command ends when something goes wrong.

``kolectra`` (the installed script) and ``python -m kolectra.pipeline.cli`` both call :func:`main`.
"""

from kolectra.pipeline.cli.commands import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
