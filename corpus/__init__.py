"""The corpus and examples stages (Beam jobs). Importing the package first quiets Beam's logging
(:mod:`.beam_logging`), before any of its modules imports ``apache_beam``."""

from kolectra.corpus import beam_logging as _beam_logging  # noqa: F401
