"""Charts for artifacts and reports: a thin kolectra layer over matplotlib.

Used by the fine-tuning stage (``learning_curve.png`` in every eval artifact), ``kolectra report``
(pipeline/report.py) and the study (pipeline/study/runner.py). What this module adds to matplotlib:

- one look: a style applied per figure (``rc_context``, so a user's own matplotlib settings are
  never touched), the Tableau-10 palette (:data:`PALETTE`, distinguishable for the common
  colour-vision deficiencies), a grid, legends;
- Hangul: labels are set in NanumGothic, loaded from the file the ``koreanize-matplotlib`` package
  ships (that package is never imported: importing it rewrites the global rcParams). Nothing is
  looked up on the system or the network, so a Korean label renders the same everywhere;
- no display: figures are drawn by the Agg canvas directly (``matplotlib.figure.Figure`` +
  ``FigureCanvasAgg``); pyplot and its global backend are never used;
- reproducible bytes: fixed size and dpi, and no ``Software`` text chunk, so the same input gives
  the same PNG bytes (with the same matplotlib and font) and plots can live inside hashed artifacts.

    line_chart("curve.png", {"train loss": [(1, 0.9), (2, 0.5)]}, title="NSMC",
               xlabel="epoch", ylabel="loss")
    chart("two.png", [Panel(...), Panel(...)], columns=2)   # a grid of panels
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import logging
import math
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib
from matplotlib import font_manager, ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from kolectra.core.errors import EnvironmentProblem

Color = tuple[int, int, int]
Point = tuple[float, float]

DPI = 100  # sizes are given in pixels: inches = pixels / DPI
# Tableau 10 (matplotlib's "tab10"), as 8-bit RGB so tests can find a series' pixels.
PALETTE: tuple[Color, ...] = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207))
MARKERS = ("o", "s", "^", "D", "v", "P")
FONT_PACKAGE, FONT_FILES = "koreanize_matplotlib", ("NanumGothic.ttf", "NanumGothicBold.ttf")


def hex_color(c: Color) -> str:
    return "#%02x%02x%02x" % c


@lru_cache(maxsize=1)
def korean_font() -> str:
    """Register the packaged NanumGothic files with matplotlib once; return the family name."""
    spec = importlib.util.find_spec(FONT_PACKAGE)  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise EnvironmentProblem(f"the {FONT_PACKAGE} package (Korean font for plots) is not installed: "
                           "pip install koreanize-matplotlib")
    folder = Path(list(spec.submodule_search_locations)[0]) / "fonts"
    for name in FONT_FILES:
        font_manager.fontManager.addfont(str(folder / name))
    return font_manager.FontProperties(fname=str(folder / FONT_FILES[0])).get_name()


def style() -> dict:
    """The rcParams every kolectra figure is drawn under."""
    return {
        "font.family": [korean_font(), "DejaVu Sans"],  # DejaVu (bundled with matplotlib) for what Nanum lacks
        "font.size": 9,
        # NanumGothicBold is weight 600: titles ask for "semibold", not "bold"
        "axes.titlesize": 10, "axes.titleweight": "semibold", "axes.labelsize": 9,
        "axes.unicode_minus": False,  # NanumGothic has no U+2212
        "axes.prop_cycle": matplotlib.cycler(color=[hex_color(c) for c in PALETTE]),
        "axes.grid": True, "axes.axisbelow": True, "grid.color": "#e1e1e1", "grid.linewidth": 0.8,
        "axes.spines.top": False, "axes.spines.right": False,
        "legend.fontsize": 8, "legend.framealpha": 0.9,
        "lines.linewidth": 2.0, "lines.markersize": 6,
        "figure.dpi": DPI, "savefig.dpi": DPI, "savefig.facecolor": "white",
        "path.simplify": False,  # every logged point drawn as given
    }


@contextlib.contextmanager
def drawing():
    """kolectra's style (``rc_context``: nothing global changes), and matplotlib's font-fallback
    notes kept off stderr: NanumGothic has no 700 weight and DejaVu Sans no 600, so a semibold
    title logs "Failed to find font weight ..." once per family although the glyphs are right."""
    log = logging.getLogger("matplotlib.font_manager")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with matplotlib.rc_context(style()):
            yield
    finally:
        log.setLevel(level)


def new_figure(width: int, height: int) -> Figure:
    """An empty figure of ``width`` x ``height`` pixels on an Agg canvas (no display needed)."""
    if width < 1 or height < 1:
        raise ValueError(f"figure size must be positive, got {width}x{height}")
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG: fixed dpi and no metadata, so equal figures give equal bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def save(fig: Figure, path: Path | str) -> Path:
    path = Path(path)
    path.write_bytes(png_bytes(fig))
    return path


# ---- line panels -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Panel:
    """One set of axes: named series of (x, y) points drawn in the given order.

    A series of one point is drawn as a large star with its value written beside it (a test
    score next to the dev curve); ``hlines`` are dashed reference lines (``{"chance": 0.5}``).
    """

    series: Mapping[str, Sequence[Point]]
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    logx: bool = False
    markers: bool | None = None  # None: markers when every series has at most 40 points
    lines: bool = True
    logy: bool = False
    hlines: Mapping[str, float] = dataclasses.field(default_factory=dict)
    ylim: tuple[float, float] | None = None  # e.g. (0, 1) for shares, so levels read at a glance
    # "best": inside the axes where matplotlib finds the least overlap; "below": under the axes, for
    # panels whose curves fill the whole box (shares from 0 to 1), where "best" still covers some
    legend: str = "best"


def finite(points: Sequence[Point], logx: bool = False) -> list[Point]:
    """The points with finite x and y (a NaN loss is left out, not drawn as a gap to zero)."""
    out = []
    for x, y in points:
        if x is None or y is None:
            continue
        x, y = float(x), float(y)
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        if logx and x <= 0:
            raise ValueError(f"log x axis needs positive x values, got {x}")
        out.append((x, y))
    return out


# Columns of a thinned series (:class:`Thinned`): a long run's curve keeps at most four points in each,
# more than the pixels across a report's panel (about 430), so its drawing does not change.
COLUMNS = 1024


class Thinned:
    """A series fed one point at a time that keeps what a plot of it shows, in memory bounded
    whatever its length: its points split, in order, into at most :data:`COLUMNS` runs of equal
    count, each kept as its first, lowest, highest and last point (min/max decimation, "M4": the
    line drawn through them covers the same pixels as one through every point, a single spike
    included). A series of up to ``columns`` points keeps every point. When the runs outnumber
    ``columns``, neighbours merge two by two: the result depends on the points alone."""

    def __init__(self, columns: int = COLUMNS):
        self.columns, self.width, self.count = columns, 1, 0
        # one per run: [first, lowest, highest, last], each (index, x, y); the last run may be short
        self.runs: list[list[tuple[int, float, float]]] = []

    def add(self, x, y) -> None:
        """Add the next point; a None or non-finite value is left out, as :func:`finite` leaves it."""
        if x is None or y is None or not (math.isfinite(x := float(x)) and math.isfinite(y := float(y))):
            return
        p = (self.count, x, y)
        if self.count % self.width:
            run = self.runs[-1]
            if y < run[1][2]:
                run[1] = p
            if y > run[2][2]:
                run[2] = p
            run[3] = p
        else:
            self.runs.append([p, p, p, p])
            if len(self.runs) > self.columns:
                self.runs = [self._merged(self.runs[i:i + 2]) for i in range(0, len(self.runs), 2)]
                self.width *= 2
        self.count += 1

    @staticmethod
    def _merged(pair: list[list[tuple[int, float, float]]]) -> list[tuple[int, float, float]]:
        a, b = pair[0], pair[-1]
        return [a[0], b[1] if b[1][2] < a[1][2] else a[1], b[2] if b[2][2] > a[2][2] else a[2], b[3]]

    def points(self) -> list[Point]:
        """The points kept, in the order they came."""
        return [(x, y) for _, x, y in sorted({p for run in self.runs for p in run})]


def draw_panel(ax, panel: Panel) -> None:
    data = {name: finite(pts, panel.logx) for name, pts in panel.series.items()}
    show_markers = panel.markers if panel.markers is not None else all(len(p) <= 40 for p in data.values())
    for k, (name, pts) in enumerate(data.items()):
        color, marker = hex_color(PALETTE[k % len(PALETTE)]), MARKERS[k % len(MARKERS)]
        xs, ys = [x for x, _ in pts], [y for _, y in pts]
        if len(pts) == 1:
            ax.plot(xs, ys, linestyle="none", marker="*", markersize=14, color=color, label=name, zorder=3)
            ax.annotate(f"{ys[0]:.4g}", (xs[0], ys[0]), textcoords="offset points", xytext=(-9, 6), ha="right",
                        color=color)
        else:
            ax.plot(xs, ys, color=color, label=name, linestyle="-" if panel.lines else "none",
                    marker=marker if show_markers or not panel.lines else None)
    for k, (name, y) in enumerate(panel.hlines.items()):
        ax.axhline(y, color="#7f7f7f", linestyle=(0, (4, 3)), linewidth=1.2, label=name, zorder=1)
    if panel.logx:
        ax.set_xscale("log")
    if panel.logy:
        ax.set_yscale("log")
    if panel.ylim is not None:
        ax.set_ylim(*panel.ylim)
    if not any(data.values()):
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="#7f7f7f")
    ax.set_title(panel.title)
    ax.set_xlabel(panel.xlabel)
    ax.set_ylabel(panel.ylabel)
    entries = len(data) + len(panel.hlines)
    if entries > 1 and panel.legend == "below":  # constrained layout shrinks the axes to make room
        under_label = offset_copy(ax.transAxes, fig=ax.figure, y=-30, units="points")  # ticks and x label first
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=under_label, ncol=min(entries, 2),
                  frameon=False)
    elif entries > 1:  # one series: the title names it
        ax.legend(loc="best")


def figure(panels: Sequence[Panel], width: int = 640, panel_height: int = 360, columns: int = 1,
           title: str = "") -> bytes:
    """PNG bytes of ``panels`` laid out in rows of ``columns``, each row ``panel_height`` pixels."""
    if not panels:
        raise ValueError("nothing to plot: no panels")
    rows = math.ceil(len(panels) / columns)
    with drawing():
        fig = new_figure(width, rows * panel_height)
        axes = fig.subplots(rows, columns, squeeze=False).ravel()
        for ax, panel in zip(axes, panels):
            draw_panel(ax, panel)
        for ax in axes[len(panels):]:
            ax.set_visible(False)
        if title:
            fig.suptitle(title, fontweight="semibold")
        return png_bytes(fig)


render = figure  # the name the pre-matplotlib module used


def chart(path: Path | str, panels: Sequence[Panel], width: int = 640, panel_height: int = 360,
          columns: int = 1, title: str = "") -> Path:
    path = Path(path)
    path.write_bytes(figure(panels, width, panel_height, columns, title))
    return path


def line_chart(path: Path | str, series: Mapping[str, Sequence[Point]], title: str = "",
               xlabel: str = "", ylabel: str = "", logx: bool = False, width: int = 640,
               height: int = 400, markers: bool | None = None) -> Path:
    """One panel: ``series`` maps a legend name to its (x, y) points."""
    return chart(path, [Panel(series, title, xlabel, ylabel, logx, markers)], width, height)


# ---- bars --------------------------------------------------------------------------------------
def bar_chart(path: Path | str, bars: Sequence[tuple[str, float]], title: str = "", xlabel: str = "",
              width: int = 720, bar_height: int = 26, colors: Sequence[Color] | None = None,
              share_of: float | None = None) -> Path:
    """Horizontal bars, one per (label, value), top to bottom, each with its value written at its
    end (and its share of ``share_of`` when given): for funnels and counts by reason."""
    if not bars:
        raise ValueError("nothing to plot: no bars")
    colors = colors or [PALETTE[k % len(PALETTE)] for k in range(len(bars))]
    height = 70 + (24 if title else 0) + (20 if xlabel else 0) + bar_height * len(bars)
    with drawing():
        fig = new_figure(width, height)
        ax = fig.subplots()
        labels, values = [label for label, _ in bars], [float(v) for _, v in bars]
        ys = list(range(len(bars)))
        ax.barh(ys, values, color=[hex_color(c) for c in colors], height=0.7)
        ax.set_yticks(ys, labels)
        ax.invert_yaxis()  # first bar on top
        ax.grid(axis="y", visible=False)
        vmax = max((abs(v) for v in values), default=0.0) or 1.0
        ax.set_xlim(0, vmax * 1.3)  # room for the value labels
        for y, v in zip(ys, values):
            shown = f"{v:,.0f}" if v.is_integer() else f"{v:,.4g}"
            if share_of:
                shown += f"  ({v / share_of:.1%})"
            ax.text(v + vmax * 0.01, y, shown, va="center")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        return save(fig, path)
