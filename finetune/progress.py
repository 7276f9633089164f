"""Quiet library progress bars where kolectra writes plain progress lines (no terminal).

Fine-tuning's own progress goes through :mod:`kolectra.core.bars` (a bar per epoch and per
evaluation on a terminal, plain ``[kolectra]`` lines elsewhere).  The bars of ``datasets``
(``map``) and ``transformers`` (loading weights) stay on a terminal, where tqdm draws them in turn
with kolectra's; without one (CI, ``2> log``) they would fill the log with carriage-return lines,
so :func:`quiet_libraries` turns them off around tokenising and loading.
"""

from __future__ import annotations

import contextlib
import sys

from kolectra.core.bars import use_bars


@contextlib.contextmanager
def quiet_libraries():
    """``datasets``' and ``transformers``' progress bars off without a terminal; as they were afterwards."""
    from datasets.utils import logging as ds_logging  # noqa: PLC0415 - heavy imports
    from transformers.utils import logging as tf_logging  # noqa: PLC0415

    quiet = not use_bars(sys.stderr)
    switched = [lib for lib in (ds_logging, tf_logging) if quiet and lib.is_progress_bar_enabled()]
    for lib in switched:
        lib.disable_progress_bar()
    try:
        yield
    finally:
        for lib in switched:
            lib.enable_progress_bar()
