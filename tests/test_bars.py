"""Progress (core/bars.py): a tqdm bar with ETA on a terminal, with kolectra's own lines written
cleanly above it; one plain line per report (or per ``every`` units) anywhere else."""

import io
import sys

from kolectra.core import bars
from kolectra.core.stage import progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_without_a_terminal_one_plain_line_per_report():
    out = io.StringIO()
    bar = bars.Bar("pretrain", 12, "step", initial=3, stream=out)
    for step in range(4, 13):
        bar.advance()
        if step % 3 == 0:
            bar.report(f"loss {step / 10:.2f}", at=step)
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert [ln.split(" [")[0] for ln in lines] == ["[kolectra] pretrain 6/12", "[kolectra] pretrain 9/12",
                                                     "[kolectra] pretrain 12/12"]
    assert all("<" in ln and "step/s" in ln for ln in lines)  # elapsed<remaining and the rate
    assert lines[-1].endswith("] loss 1.20")


def test_every_gives_a_line_per_stretch_and_one_for_the_rest():
    out = io.StringIO()
    with bars.Bar("vocab: counting words", 25, "doc", every=10, stream=out) as bar:
        for _ in range(25):
            bar.advance()
    assert [ln.split(" [")[0] for ln in out.getvalue().splitlines()] == [
        "[kolectra] vocab: counting words 10/25", "[kolectra] vocab: counting words 20/25",
        "[kolectra] vocab: counting words 25/25"]


def test_on_a_terminal_a_bar_with_eta_and_progress_lines_above_it(monkeypatch):
    monkeypatch.delenv(bars.ENV, raising=False)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    bar = bars.Bar("pretrain", 100, "step")
    for _ in range(40):
        bar.advance()
    bar.report("loss 2.5000")
    progress("checkpoint saved")
    bar.advance(10)
    bar.close()
    text = term.getvalue()
    assert "\r" in text and "pretrain:" in text and "|" in text and "loss 2.5000" in text
    assert "50/100 [" in text and "<" in text  # position and time left
    # the bar is cleared before the line and redrawn after it: the line stands alone
    screen_lines = [chunk.split("\r")[-1].rstrip() for chunk in text.split("\n")]
    assert "[kolectra] checkpoint saved" in screen_lines


def test_environment_forces_lines_on_a_terminal(monkeypatch):
    monkeypatch.setenv(bars.ENV, "lines")
    term = Terminal()
    bar = bars.Bar("study", 2, "point", every=1, stream=term)
    bar.advance()
    bar.advance()
    bar.close()
    assert "\r" not in term.getvalue() and len(term.getvalue().splitlines()) == 2


def test_min_seconds_leaves_a_fast_pass_one_closing_line():
    # the vocab stage's passes take under a second on the sample: ten lines each was noise (issue 28)
    out = io.StringIO()
    with bars.Bar("vocab: counting words", 1000, "doc", every=100, stream=out, min_seconds=bars.QUIET_SECONDS) as bar:
        for _ in range(1000):
            bar.advance()
    assert [ln.split(" [")[0] for ln in out.getvalue().splitlines()] == ["[kolectra] vocab: counting words 1000/1000"]
