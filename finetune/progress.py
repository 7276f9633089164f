"""Progress bars of a fine-tuning run: tqdm with ETA on a terminal, plain ``[kolectra]`` lines elsewhere.

On a terminal (stderr is a TTY) each epoch and each evaluation gets a tqdm bar that disappears
when done (``leave=False``), so the lines that stay are kolectra's own ``[kolectra] ...`` lines
and transformers' bars, one after the other; nothing else is printed while a bar is open.
When stderr is a file or a pipe (CI, ``2> log``) the same bar writes one plain line at most
every 30 s (nothing for shorter loops) through :func:`kolectra.core.stage.progress`, with the
count, elapsed time, ETA and rate, and no carriage returns.  The bars of ``datasets`` (``map``)
and ``transformers`` (loading weights) are kept on a terminal and silenced elsewhere
(:func:`quiet_libraries`).
"""

from __future__ import annotations

import contextlib
import sys

from tqdm import tqdm

from kolectra.core.stage import progress

LINE_EVERY_S = 30.0
LINE_FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit}s ({percentage:.0f}%), {elapsed} elapsed, ETA {remaining}, {rate_fmt}{postfix}"


class _Lines:
    """A file for tqdm: every refresh becomes one ``[kolectra]`` line (blank clears are dropped)."""

    def write(self, text: str) -> None:
        text = text.strip("\r\n\x1b[A ")
        if text:
            progress(text)

    def flush(self) -> None:
        pass


def interactive() -> bool:
    return sys.stderr.isatty()


def bar(total: int, desc: str, unit: str = "step") -> tqdm:
    """A bar over ``total`` units; ``set_postfix_str`` adds e.g. the running loss."""
    if interactive():
        return tqdm(total=total, desc=f"[kolectra] {desc}", unit=unit, leave=False, dynamic_ncols=True,
                    file=sys.stderr)
    return tqdm(total=total, desc=desc, unit=unit, leave=False, file=_Lines(), mininterval=LINE_EVERY_S,
                delay=LINE_EVERY_S, bar_format=LINE_FORMAT, ascii=True)


@contextlib.contextmanager
def quiet_libraries():
    """``datasets``' and ``transformers``' progress bars off while not on a terminal (they would fill
    a log with carriage-return lines); as they were afterwards."""
    from datasets.utils import logging as ds_logging  # noqa: PLC0415 - heavy imports
    from transformers.utils import logging as tf_logging  # noqa: PLC0415

    switched = [lib for lib in (ds_logging, tf_logging) if lib.is_progress_bar_enabled() and not interactive()]
    for lib in switched:
        lib.disable_progress_bar()
    try:
        yield
    finally:
        for lib in switched:
            lib.enable_progress_bar()
