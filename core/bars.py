"""Progress of long loops: a tqdm bar with ETA on a terminal, plain lines everywhere else.

Used by the pretraining loop (model/metrics.py), the vocab stage (vocab/build.py) and the study
(pipeline/study/runner.py); :func:`core.stage.progress` writes its ``[kolectra] ...`` lines through
:func:`write`, so they appear above the bars instead of through them.

- stderr is a terminal: a tqdm bar (rate, elapsed<remaining), its postfix set at each report.
  Bars nest (a study's points above the pretraining steps) and share tqdm's registry with
  transformers' own bars, so a line written by :func:`write` clears and redraws all of them.
- stderr is a file or a pipe (CI logs, ``2> log``): no bar and no carriage returns, one
  ``[kolectra] ...`` line per report (pretraining: per ``log_every``), or every ``every`` units for
  loops that have no reports, with the same position, rate and ETA, formatted by tqdm.

``KOLECTRA_PROGRESS=lines`` (or ``bar``) overrides the choice. At ``-q`` (:mod:`core.verbosity`)
there is neither: a bar counts silently.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Iterable, Iterator, TextIO, TypeVar

from tqdm import tqdm

from kolectra.core import streams, verbosity

ENV = "KOLECTRA_PROGRESS"
LINE = "{n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"
LINE_NO_TOTAL = "{n_fmt} [{elapsed}, {rate_fmt}]"
T = TypeVar("T")
# Line mode: the vocab stage's passes report at most this often; each still ends with one line.
QUIET_SECONDS = 10.0


def write(line: str) -> None:
    """One line on stderr, above any progress bar there (tqdm clears and redraws them); a reader gone
    (``2>&1 | tee`` with tee stopped) loses the line, not the command (:mod:`core.streams`). The line and
    its newline are one write: a signal's handler that raised between the two (SIGTERM as ``kolectra vocab``
    said where it counts) left the line open, and the command's last line was glued to it ('... at its
    peakkolectra vocab: terminated; ...'), no longer a line of its own for a log's reader."""
    try:
        tqdm.write(line + "\n", file=sys.stderr, end="")
        sys.stderr.flush()
    except OSError as e:
        if not streams.gone(e):
            raise
        streams.lost(sys.stderr)


def use_bars(stream: TextIO) -> bool:
    if verbosity.quiet():
        return False
    forced = os.environ.get(ENV, "").strip().lower()
    if forced in ("bar", "bars"):
        return True
    if forced == "lines":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Bar:
    """Progress over ``total`` units (None: unknown) starting at ``initial`` (a resumed run).

    ``advance(n)`` is cheap (call it per step); ``report(text)`` sets what is shown beside the
    counts: the bar's postfix, or one line in line mode.
    """

    def __init__(self, desc: str, total: int | None, unit: str = "it", initial: int = 0,
                 every: int | None = None, stream: TextIO | None = None, scale: bool = False,
                 min_seconds: float = 0.0):
        self.desc, self.total, self.unit, self.initial, self.scale = desc, total, unit, initial, scale
        self.n, self.every, self.text, self.shown = initial, every, "", initial
        # line mode: an ``every`` line only this long after the previous line (or the start), so a
        # pass of under a second prints its closing line alone, not ten lines in a burst
        self.min_seconds = min_seconds
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = self.last_line = time.monotonic()
        self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=self.stream, leave=None,
                        dynamic_ncols=True, unit_scale=scale) if use_bars(self.stream) else None

    def advance(self, n: int = 1) -> None:
        before, self.n = self.n, self.n + n
        if self.bar is not None:
            self._drawn(self.bar.update, n)
        elif (self.every and (self.n - self.initial) // self.every > (before - self.initial) // self.every
              and time.monotonic() - self.last_line >= self.min_seconds):
            self._line()

    def report(self, text: str, at: int | None = None) -> None:
        """Show ``text``; in line mode as one line at position ``at`` (default: the current one),
        for reports that arrive after the loop moved on (XLA delivers a step's metrics later)."""
        self.text = text
        if self.bar is not None:
            self._drawn(self.bar.set_postfix_str, text)
        else:
            self._line(at)

    def _drawn(self, draw, *args) -> None:
        """``draw(*args)`` on the bar; a terminal that hung up (EIO) loses the bar, not the command."""
        try:
            draw(*args)
        except OSError as e:
            if not streams.gone(e):
                raise
            streams.lost(self.stream)

    def line(self, at: int | None = None) -> str:
        """The line-mode text: ``desc n/total [elapsed<remaining, rate] text``."""
        meter = tqdm.format_meter(self.n if at is None else at, self.total, time.monotonic() - self.t0, unit=self.unit,
                                  unit_scale=self.scale, initial=self.initial, bar_format=LINE if self.total else LINE_NO_TOTAL)
        return " ".join(p for p in (self.desc, meter, self.text) if p)

    def _line(self, at: int | None = None) -> None:
        self.shown, self.last_line = self.n, time.monotonic()
        if verbosity.quiet():
            return
        text = f"[kolectra] {self.line(at)}"
        if self.stream is sys.stderr:
            write(text)
        else:
            print(text + "\n", end="", file=self.stream, flush=True)  # one write, as write()'s

    def close(self) -> None:
        if self.bar is not None:
            self._drawn(self.bar.close)
            self.bar = None
        elif self.every and self.n != self.shown:  # the last stretch, shorter than ``every``
            self._line()

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def iterate(items: Iterable[T], desc: str, total: int | None = None, unit: str = "it",
            every: int | None = None, scale: bool = True, min_seconds: float = 0.0) -> Iterator[T]:
    """``items`` with a :class:`Bar` advanced per item (a line every ``every`` items without a
    terminal, at most one per ``min_seconds``)."""
    with Bar(desc, total, unit, every=every, scale=scale, min_seconds=min_seconds) as bar:
        for item in items:
            yield item
            bar.advance()
