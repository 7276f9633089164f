"""A progress line is written with its newline in one write (core/bars.py): a SIGTERM's handler that raised
between the two left the line open, and the command's last line was glued to it ('... about 0.3 GB at its
peakkolectra vocab: terminated; ...'), seen with a real SIGTERM as kolectra vocab began counting."""

from __future__ import annotations

import io
import sys

from kolectra.core import bars


class _Writes(io.StringIO):
    def __init__(self):
        super().__init__()
        self.writes: list[str] = []

    def write(self, s: str) -> int:
        self.writes.append(s)
        return super().write(s)


def test_a_progress_line_and_its_newline_are_one_write(monkeypatch):
    err = _Writes()
    monkeypatch.setattr(sys, "stderr", err)
    bars.write("[kolectra] vocab: counting the words")
    assert [w for w in err.writes if w] == ["[kolectra] vocab: counting the words\n"]  # before: the line, then "\n"


def test_a_line_mode_bar_on_another_stream_writes_each_line_whole(monkeypatch):
    monkeypatch.setenv(bars.ENV, "lines")
    out = _Writes()
    with bars.Bar("pretrain", total=4, unit="step", every=1, stream=out) as bar:
        bar.advance(1)
    assert out.writes and all(w.endswith("\n") for w in out.writes if w), out.writes
