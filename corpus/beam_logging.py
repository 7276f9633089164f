"""How much of Apache Beam's own logging the user sees, set before Beam is first imported.

Beam's harness logs 40-odd INFO/WARNING lines per job, and its import warns through the root
logger that apitools is missing. kolectra shows its own progress lines and bars instead, and a
failure as one exception naming the input; Beam's logging appears from ``-v`` (warnings) and
``-vv`` (INFO). The package's ``__init__`` imports this module, so the filter is in place before
any corpus module imports ``apache_beam``: the one place that decides it, with no import-order
rules in the modules that use Beam.
"""

from __future__ import annotations

import logging
import os
import sys

from kolectra.core import url_secrets
from kolectra.core.verbosity import DEBUG, NORMAL, QUIET, VERBOSE
from kolectra.core.verbosity import level as _core_level
from kolectra.core.verbosity import set_level as _core_set_level

# What of Beam's logging each verbosity shows: nothing below VERBOSE (a failure reaches the user as
# kolectra's exception, not as Beam's logged tracebacks), warnings at VERBOSE, everything at DEBUG.
_BEAM_LEVEL = {QUIET: logging.CRITICAL + 1, NORMAL: logging.CRITICAL + 1, VERBOSE: logging.WARNING, DEBUG: logging.INFO}


# the GCS clients log as Beam does: gcsfs a traceback for each request it retries and a warning where
# it cannot ask for the bucket's layout, google-auth one for each credential source it tried; their
# failure reaches the user as kolectra's one line (kolectra.core.storage.describe_failure)
_STORE_LOGGERS = ("gcsfs", "google.auth", "google.api_core", "google.cloud")


def _from_beam(record: logging.LogRecord) -> bool:
    # Beam logs through its module loggers and, for some import-time warnings, the root logger
    return (record.name.startswith("apache_beam") or f"{os.sep}apache_beam{os.sep}" in (record.pathname or "")
            or any(record.name == n or record.name.startswith(f"{n}.") for n in _STORE_LOGGERS))


class _BeamFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _from_beam(record) or record.levelno >= _BEAM_LEVEL[verbosity()]


FILTER = _BeamFilter()


class _Redacting(logging.Formatter):
    """Lines less an ``--input`` URL's credentials (``core/url_secrets.py``): at ``-v`` Beam logs a failed
    bundle's error and traceback, whose download library's text names the URL read, signature and all."""

    def format(self, record: logging.LogRecord) -> str:
        return url_secrets.redacted(super().format(record))


def set_verbosity(level: int) -> None:
    """How much the corpus and examples jobs print: 0 errors only, 1 (default) kolectra's progress,
    2 also Beam's warnings, 3 also Beam's INFO logging. ``$KOLECTRA_VERBOSITY`` sets the default;
    a CLI's ``-q``/``-v`` call this."""
    level = _core_set_level(level)  # in the environment: worker processes started from here inherit it
    root = logging.getLogger()
    if not root.handlers:  # otherwise the first warning would call basicConfig, unfiltered
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Redacting("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    for handler in root.handlers:
        if FILTER not in handler.filters:
            handler.addFilter(FILTER)
    if level >= DEBUG and root.level > logging.INFO:
        root.setLevel(logging.INFO)
    logging.getLogger("apache_beam").setLevel(_BEAM_LEVEL[level])


def verbosity() -> int:
    """The level now: the environment's (:mod:`core.verbosity`), which ``set_verbosity`` writes, so a
    caller that restores the environment (a test, a library user) restores this too."""
    return _core_level()


set_verbosity(verbosity())
