"""How much kolectra writes on stderr: one level for the process and the workers it starts.

==========  =====  ============================================================================
level       flag   what stderr shows
==========  =====  ============================================================================
0 quiet     ``-q``  errors and warnings only (stdout keeps its results and the artifact path)
1 normal    —      kolectra's progress: bars on a terminal, plain lines in a log
2 verbose   ``-v``  also the libraries' warnings (Apache Beam, transformers)
3 debug     ``-vv`` also their INFO logging (Beam's harness: some 40 lines per corpus job)
==========  =====  ============================================================================

The level lives in ``$KOLECTRA_VERBOSITY`` (read on every call: it is cheap, and Beam worker
processes started from here inherit it), so ``KOLECTRA_VERBOSITY=0 kolectra ...`` and ``-q`` mean
the same; the CLI's ``-q``/``-v`` move it from the environment's value.
"""

from __future__ import annotations

import os

QUIET, NORMAL, VERBOSE, DEBUG = 0, 1, 2, 3
ENV = "KOLECTRA_VERBOSITY"


def clamp(n: int) -> int:
    return min(max(int(n), QUIET), DEBUG)


def level() -> int:
    try:
        return clamp(int(os.environ.get(ENV, NORMAL) or NORMAL))
    except ValueError:
        return NORMAL


def set_level(n: int) -> int:
    """Set the level for this process and its future children; returns it (clamped to 0-3)."""
    n = clamp(n)
    os.environ[ENV] = str(n)
    return n


def quiet() -> bool:
    return level() <= QUIET
