"""The charts (core/plot.py over matplotlib): reproducible PNG bytes, Hangul set in a real font,
series where their values say, panel grids and bars, clear errors on input a chart cannot show."""

import io
import math
import subprocess
import sys
import warnings

import matplotlib
import pytest
from PIL import Image

from kolectra.core import plot
from kolectra.core.plot import PALETTE, Panel, bar_chart, chart, figure, line_chart


def decode_png(data: bytes) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """(width, height, rows of RGB pixels) of a PNG, read by Pillow."""
    img = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = img.size
    px = list(img.getdata())
    return w, h, [px[y * w:(y + 1) * w] for y in range(h)]


def where(rows, color):
    return [(x, y) for y, row in enumerate(rows) for x, px in enumerate(row) if px == color]


TWO_LINES = [Panel({"high": [(x, 10.0) for x in range(11)], "low": [(x, 0.0) for x in range(11)]},
                   "두 줄 (two lines)", "step", "value")]


def test_series_land_where_their_values_say(tmp_path):
    w, h, rows = decode_png(figure(TWO_LINES, 320, 240))
    assert (w, h) == (320, 240)
    blue, orange = where(rows, PALETTE[0]), where(rows, PALETTE[1])
    assert len(blue) > 200 and len(orange) > 200  # a line across the plot, plus its legend sample
    assert sorted(y for _, y in blue)[len(blue) // 2] < sorted(y for _, y in orange)[len(orange) // 2]
    assert max(x for x, _ in blue) - min(x for x, _ in blue) > 0.6 * w


_SUBPROCESS = """
import sys
from kolectra.core.plot import Panel, figure
sys.stdout.buffer.write(figure([Panel({"high": [(x, 10.0) for x in range(11)], "low": [(x, 0.0) for x in range(11)]},
                                      "두 줄 (two lines)", "step", "value")], 320, 240))
"""


def test_png_bytes_are_reproducible_and_carry_no_metadata(tmp_path):
    first = figure(TWO_LINES, 320, 240)
    assert figure(TWO_LINES, 320, 240) == first
    # a fresh interpreter (font registered anew, nothing cached in the process) gives the same bytes
    other = subprocess.run([sys.executable, "-c", _SUBPROCESS], capture_output=True, check=True).stdout
    assert other == first
    assert b"Software" not in first and b"matplotlib" not in first.lower() and b"tIME" not in first
    path = line_chart(tmp_path / "c.png", TWO_LINES[0].series, title=TWO_LINES[0].title, xlabel="step",
                      ylabel="value", width=320, height=240)
    assert path.read_bytes() == first


def _label_png(text: str) -> bytes:
    return figure([Panel({}, title=text)], 200, 120)


def test_hangul_labels_render_as_glyphs_not_boxes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)" for tofu
        a, b = _label_png("가나다 손실"), _label_png("라마바 정확도")
    assert a != b  # different syllables, different ink (tofu boxes would look alike)
    # the check bites: without the packaged font the same labels are missing glyphs
    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}), pytest.warns(UserWarning, match="missing from font"):
        fig = plot.new_figure(200, 120)
        fig.suptitle("가나다 손실")
        plot.png_bytes(fig)


def test_panel_grid_single_points_and_degenerate_inputs(tmp_path):
    panels = [Panel({"loss": [(1, 0.7)]}, "one point"),
              Panel({"nan skipped": [(1, math.nan), (2, 1.0), (3, 2.0)], "none skipped": [(1, None), (2, 3.0)]}, "b"),
              Panel({}, "empty"),
              Panel({"auc": [(1, 0.5), (2, 0.9)]}, "reference", hlines={"chance": 0.5})]
    w, h, rows = decode_png(chart(tmp_path / "p.png", panels, width=400, panel_height=200, columns=2).read_bytes())
    assert (w, h) == (400, 400)
    assert where(rows[:200], PALETTE[0])  # the single point gets its star
    w, h, _ = decode_png(figure(panels[:3], 300, 150, columns=2))
    assert (w, h) == (300, 300)  # three panels in rows of two: two rows
    with pytest.raises(ValueError, match="no panels"):
        figure([])
    with pytest.raises(ValueError, match="positive"):
        figure([Panel({"s": [(0.0, 1.0)]}, logx=True)])
    assert figure([Panel({"s": [(1e16, 1.0), (1e17, 2.0), (1e18, 3.0)]}, logx=True)])[:4] == b"\x89PNG"


def test_bar_chart_draws_each_bar_in_its_colour(tmp_path):
    colors = [PALETTE[7], PALETTE[3], PALETTE[2]]
    path = bar_chart(tmp_path / "b.png", [("records in", 1000), ("dropped: 짧음", 250), ("kept", 750)],
                     title="funnel", xlabel="records", colors=colors, share_of=1000)
    w, h, rows = decode_png(path.read_bytes())
    assert w == 720
    widths = [len(where(rows, c)) for c in colors]
    assert widths[0] > widths[2] > widths[1] > 0  # areas follow the values
    with pytest.raises(ValueError, match="no bars"):
        bar_chart(tmp_path / "x.png", [])


def test_report_puts_each_loss_on_its_own_axis_and_marks_chance():
    from kolectra.pipeline.report import training_panels

    rows = [{"step": s, "loss": 30.0 - s, "gen_loss": 4.0 - s / 10, "disc_loss": 0.5 - s / 100, "disc_auc": 0.5,
             "disc_precision": 0.0, "disc_recall": 0.0, "disc_acc": 0.85, "gen_acc": 0.1, "lr": 1e-3,
             "tokens_per_s": 1000.0, "mlm_acc": None} for s in (1, 2, 3)]
    panels = {p.title: p for p in training_panels(rows)}
    losses = [p for p in panels.values() if p.ylabel == "loss"]
    assert len(losses) == 3 and all(len(p.series) == 1 for p in losses)  # total, generator, discriminator apart
    disc = panels["discriminator: replaced-token detection"]
    assert set(disc.series) == {"AUC", "precision (replaced)", "recall (replaced)", "accuracy"}  # no prior logged
    assert disc.hlines == {"chance AUC": 0.5} and disc.ylim[0] == 0  # a run stuck at chance shows
    assert "MLM accuracy" not in panels["generator"].series  # None values are no series
    mlm = [{"step": s, "loss": 5.0, "gen_loss": 5.0, "mlm_loss": 5.0, "mlm_acc": 0.2} for s in (1, 2)]
    assert "discriminator loss" not in {p.title for p in training_panels(mlm)}
    assert figure(training_panels(rows), 960, 300, columns=2)[:4] == b"\x89PNG"


def test_the_style_sets_title_and_label_sizes():
    # these keys once sat behind a comment on the font.size line and silently did nothing
    s = plot.style()
    assert (s["axes.titlesize"], s["axes.titleweight"], s["axes.labelsize"]) == (10, "semibold", 9)


def test_a_semibold_title_logs_no_font_fallback_note(caplog):
    plot.font_manager.fontManager._findfont_cached.cache_clear()  # the note is logged once per lookup
    with caplog.at_level("INFO", logger="matplotlib.font_manager"):
        figure([Panel({"a": [(1, 2), (2, 3)]}, "NSMC: 정확도 55.40%", "epoch", "loss")], 320, 240)
    assert not [r for r in caplog.records if r.levelno >= 30], [r.getMessage() for r in caplog.records]


def test_the_rtd_panels_legend_sits_below_its_curves_not_on_them():
    """Issue 46: the discriminator panel's shares fill the whole box (0 to 1), and its legend of six
    entries covered the RTD curves wherever "best" put it: drawn by the report's own panels, the
    legend lies under the axes."""
    from kolectra.pipeline.report import training_panels

    rows = [{"step": s, "disc_auc": 0.5 + s / 210, "disc_precision": s / 105, "disc_recall": 1 - s / 110,
             "disc_acc": 0.85 + s / 800, "replaced_token_share": 0.12, "gen_acc": s / 100, "replaced_share": 1 - s / 100,
             "mlm_acc": 0.5} for s in range(0, 101, 5)]
    panels = {p.title: p for p in training_panels(rows)}
    for title in ("discriminator: replaced-token detection", "generator"):
        with plot.drawing():
            fig = plot.new_figure(960, 300)
            ax = fig.subplots()
            plot.draw_panel(ax, panels[title])
            fig.canvas.draw()
            legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
            label = ax.xaxis.label.get_window_extent()
        assert legend.y1 <= box.y0, (title, legend, box)  # wholly under the axes (display y grows upward)
        assert legend.y1 <= label.y0, (title, legend, label)  # and under the x label
