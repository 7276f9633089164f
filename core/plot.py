"""Dependency-free PNG line charts: learning curves, FLOPs-vs-score plots, anything x/y.

Used by the fine-tuning stage (``learning_curve.png`` in every eval artifact) and by the
reports built over artifacts.  Nothing outside the standard library: an RGB canvas with
Bresenham lines and markers, a built-in 5x8 bitmap font (printable ASCII; other characters
draw as a box), axes with "nice" 1-2-5 ticks (or powers of ten on a log axis), a legend, and a
PNG encoder (``zlib`` + ``struct``: IHDR, one IDAT, IEND; 8-bit RGB, filter 0).  The same
input gives the same bytes, so plots can live inside hashed artifacts.

    line_chart("curve.png", {"train loss": [(1, 0.9), (2, 0.5)]}, title="NSMC",
               xlabel="epoch", ylabel="loss")
    chart("two.png", [Panel(...), Panel(...)])   # panels stacked vertically
"""

from __future__ import annotations

import dataclasses
import math
import struct
import zlib
from pathlib import Path
from typing import Iterable, Mapping, Sequence

Color = tuple[int, int, int]
Point = tuple[float, float]

WHITE: Color = (255, 255, 255)
BLACK: Color = (0, 0, 0)
GRID: Color = (225, 225, 225)
AXIS_TEXT: Color = (40, 40, 40)
# Tableau-10 order: distinguishable on screen and for the common colour-vision deficiencies.
PALETTE: tuple[Color, ...] = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207))
MARKERS = ("square", "circle", "triangle", "diamond", "cross", "plus")

# ---- font: 5 columns x 8 rows per glyph ('#' = ink); rows 0-6 hold capitals, row 7 descenders.
GLYPH_W, GLYPH_H, ADVANCE = 5, 8, 6
_GLYPHS = {
    " ": "", "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.", "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    "3": "##### ...#. ..#.. ...#. ....# #...# .###.", "4": "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ....# #...# .###.", "6": "..##. .#... #.... ####. #...# #...# .###.",
    "7": "##### ....# ...#. ..#.. .#... .#... .#...", "8": ".###. #...# #...# .###. #...# #...# .###.",
    "9": ".###. #...# #...# .#### ....# ...#. .##..",
    "A": ".###. #...# #...# ##### #...# #...# #...#", "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.", "D": "###.. #..#. #...# #...# #...# #..#. ###..",
    "E": "##### #.... #.... ####. #.... #.... #####", "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####", "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.", "J": "..### ...#. ...#. ...#. ...#. #..#. .##..",
    "K": "#...# #..#. #.#.. ##... #.#.. #..#. #...#", "L": "#.... #.... #.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #.#.# #...# #...# #...#", "N": "#...# #...# ##..# #.#.# #..## #...# #...#",
    "O": ".###. #...# #...# #...# #...# #...# .###.", "P": "####. #...# #...# ####. #.... #.... #....",
    "Q": ".###. #...# #...# #...# #.#.# #..#. .##.#", "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "S": ".#### #.... #.... .###. ....# ....# ####.", "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# #...# #...# .###.", "V": "#...# #...# #...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.", "X": "#...# #...# .#.#. ..#.. .#.#. #...# #...#",
    "Y": "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..", "Z": "##### ....# ...#. ..#.. .#... #.... #####",
    "a": "..... ..... .###. ....# .#### #...# .####", "b": "#.... #.... #.##. ##..# #...# #...# ####.",
    "c": "..... ..... .###. #.... #.... #...# .###.", "d": "....# ....# .##.# #..## #...# #...# .####",
    "e": "..... ..... .###. #...# ##### #.... .###.", "f": "..##. .#..# .#... ###.. .#... .#... .#...",
    "g": "..... ..... .#### #...# #...# .#### ....# .###.", "h": "#.... #.... #.##. ##..# #...# #...# #...#",
    "i": "..#.. ..... .##.. ..#.. ..#.. ..#.. .###.", "j": "...#. ..... ..##. ...#. ...#. ...#. #..#. .##..",
    "k": "#.... #.... #..#. #.#.. ##... #.#.. #..#.", "l": ".##.. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "m": "..... ..... ##.#. #.#.# #.#.# #...# #...#", "n": "..... ..... #.##. ##..# #...# #...# #...#",
    "o": "..... ..... .###. #...# #...# #...# .###.", "p": "..... ..... ####. #...# #...# ####. #.... #....",
    "q": "..... ..... .#### #...# #...# .#### ....# ....#", "r": "..... ..... #.##. ##..# #.... #.... #....",
    "s": "..... ..... .###. #.... .###. ....# ####.", "t": ".#... .#... ###.. .#... .#... .#..# ..##.",
    "u": "..... ..... #...# #...# #...# #..## .##.#", "v": "..... ..... #...# #...# #...# .#.#. ..#..",
    "w": "..... ..... #...# #...# #.#.# #.#.# .#.#.", "x": "..... ..... #...# .#.#. ..#.. .#.#. #...#",
    "y": "..... ..... #...# #...# #...# .#### ....# .###.", "z": "..... ..... ##### ...#. ..#.. .#... #####",
    ".": "..... ..... ..... ..... ..... .##.. .##..", ",": "..... ..... ..... ..... .##.. ..#.. .#...",
    ":": "..... .##.. .##.. ..... .##.. .##..", ";": "..... .##.. .##.. ..... .##.. ..#.. .#...",
    "-": "..... ..... ..... #####", "+": "..... ..#.. ..#.. ##### ..#.. ..#..",
    "=": "..... ..... ##### ..... #####", "_": "..... ..... ..... ..... ..... ..... #####",
    "/": "..... ....# ...#. ..#.. .#... #....", "\\": "..... #.... .#... ..#.. ...#. ....#",
    "(": "...#. ..#.. .#... .#... .#... ..#.. ...#.", ")": ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",
    "[": ".###. .#... .#... .#... .#... .#... .###.", "]": ".###. ...#. ...#. ...#. ...#. ...#. .###.",
    "{": "...#. ..#.. ..#.. .#... ..#.. ..#.. ...#.", "}": ".#... ..#.. ..#.. ...#. ..#.. ..#.. .#...",
    "%": "##... ##..# ...#. ..#.. .#... #..## ...##", "#": ".#.#. .#.#. ##### .#.#. ##### .#.#. .#.#.",
    "!": "..#.. ..#.. ..#.. ..#.. ..#.. ..... ..#..", "?": ".###. #...# ....# ...#. ..#.. ..... ..#..",
    "*": "..... ..#.. #.#.# .###. #.#.# ..#..", "<": "...#. ..#.. .#... #.... .#... ..#.. ...#.",
    ">": ".#... ..#.. ...#. ....# ...#. ..#.. .#...", '"': ".#.#. .#.#.", "'": "..#.. ..#..",
    "`": ".#... ..#..", "^": "..#.. .#.#. #...#", "|": "..#.. ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "~": "..... ..... .#... #.#.# ...#.", "&": ".##.. #..#. #.#.. .#... #.#.# #..#. .##.#",
    "$": "..#.. .#### #.#.. .###. ..#.# ####. ..#..", "@": ".###. #...# #.### #.#.# #.### #.... .###.",
}
_BOX = "##### #...# #...# #...# #...# #...# #####"  # any character without a glyph


def _bitmap(rows: str) -> tuple[tuple[int, int], ...]:
    """Ink pixels (column, row) of a glyph description."""
    return tuple((c, r) for r, row in enumerate(rows.split()) for c, ch in enumerate(row) if ch == "#")


FONT: dict[str, tuple[tuple[int, int], ...]] = {ch: _bitmap(rows) for ch, rows in _GLYPHS.items()}
_BOX_BITMAP = _bitmap(_BOX)


def text_width(text: str, scale: int = 1) -> int:
    return max(0, len(text) * ADVANCE - 1) * scale


class Canvas:
    """An RGB image in a bytearray; drawing outside the canvas is silently clipped."""

    def __init__(self, width: int, height: int, background: Color = WHITE):
        if width < 1 or height < 1:
            raise ValueError(f"canvas size must be positive, got {width}x{height}")
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def set(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i:i + 3] = bytes(color)

    def get(self, x: int, y: int) -> Color:
        i = 3 * (y * self.width + x)
        return tuple(self.pixels[i:i + 3])  # type: ignore[return-value]

    def fill(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Inclusive rectangle."""
        for y in range(max(0, y0), min(self.height - 1, y1) + 1):
            for x in range(max(0, x0), min(self.width - 1, x1) + 1):
                self.set(x, y, color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1) -> None:
        """Bresenham; ``width`` > 1 stamps a square brush at every step."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err, lo = dx + dy, -(width // 2)
        while True:
            for oy in range(lo, lo + width):
                for ox in range(lo, lo + width):
                    self.set(x0 + ox, y0 + oy, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def marker(self, x: int, y: int, shape: str, color: Color, r: int = 3) -> None:
        for oy in range(-r, r + 1):
            for ox in range(-r, r + 1):
                inside = {"square": True,
                          "circle": ox * ox + oy * oy <= r * r + 1,
                          "diamond": abs(ox) + abs(oy) <= r,
                          "triangle": oy >= -r and abs(ox) * 2 <= oy + r,
                          "cross": abs(ox) == abs(oy),
                          "plus": ox == 0 or oy == 0}[shape]
                if inside:
                    self.set(x + ox, y + oy, color)

    def text(self, x: int, y: int, text: str, color: Color = BLACK, scale: int = 1,
             vertical: bool = False) -> None:
        """Top-left anchored; ``vertical`` reads bottom to top starting at (x, y) = bottom-left."""
        for k, ch in enumerate(text):
            for c, r in FONT.get(ch, _BOX_BITMAP):
                for sy in range(scale):
                    for sx in range(scale):
                        if vertical:
                            self.set(x + r * scale + sy, y - (k * ADVANCE + c) * scale - sx, color)
                        else:
                            self.set(x + (k * ADVANCE + c) * scale + sx, y + r * scale + sy, color)

    def to_png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.pixels[3 * self.width * y:3 * self.width * (y + 1)])
                       for y in range(self.height))
        return encode_png(self.width, self.height, raw)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(width: int, height: int, filtered_rows: bytes) -> bytes:
    """PNG from rows already prefixed with their filter byte (8-bit RGB, no interlace)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr)
            + _chunk(b"IDAT", zlib.compress(filtered_rows, 9)) + _chunk(b"IEND", b""))


# ---- axes -----------------------------------------------------------------------------------
def nice_ticks(lo: float, hi: float, max_ticks: int = 7) -> list[float]:
    """Multiples of 1, 2 or 5 x 10^k covering [lo, hi] with at most ``max_ticks`` inside."""
    if hi <= lo:
        hi = lo + 1.0
    for power in range(math.floor(math.log10((hi - lo) / max_ticks)) - 1, 400):
        for m in (1, 2, 5):
            step = m * 10.0 ** power
            first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
            if last - first + 1 <= max_ticks + 1:
                return [round(k * step, 12) for k in range(first, last + 1)]
    return [lo, hi]


def format_tick(v: float, step: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        mant, exp = f"{v:.2e}".split("e")
        mant = mant.rstrip("0").rstrip(".")
        return f"{mant}e{int(exp)}"
    decimals = max(0, min(6, -math.floor(math.log10(step) + 1e-9))) if step > 0 else 2
    return f"{v:.{decimals}f}"


@dataclasses.dataclass(frozen=True)
class Panel:
    """One set of axes: named series of (x, y) points drawn in the given order."""

    series: Mapping[str, Sequence[Point]]
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    logx: bool = False
    markers: bool | None = None  # None: markers when every series has at most 40 points
    lines: bool = True


def _finite(points: Iterable[Point], logx: bool) -> list[Point]:
    out = []
    for x, y in points:
        x, y = float(x), float(y)
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        if logx and x <= 0:
            raise ValueError(f"log x axis needs positive x values, got {x}")
        out.append((x, y))
    return out


def _draw_panel(cv: Canvas, panel: Panel, ox: int, oy: int, w: int, h: int) -> None:
    data = {name: _finite(pts, panel.logx) for name, pts in panel.series.items()}
    xs = [x for pts in data.values() for x, _ in pts]
    ys = [y for pts in data.values() for _, y in pts]
    fx = (lambda v: math.log10(v)) if panel.logx else (lambda v: v)
    # x range: the data with 3% room; y range: widened to whole ticks
    if xs:
        xlo, xhi = fx(min(xs)), fx(max(xs))
    else:
        xlo, xhi = (0.0, 1.0)
    if xhi - xlo < 1e-12:
        xlo, xhi = xlo - 0.5, xhi + 0.5
    pad = 0.03 * (xhi - xlo)
    xlo, xhi = xlo - pad, xhi + pad
    ylo, yhi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if yhi - ylo < 1e-12:
        ylo, yhi = ylo - 0.5, yhi + 0.5
    yticks = nice_ticks(ylo, yhi, 6)
    ylo, yhi = yticks[0], yticks[-1]
    if panel.logx and xhi - xlo >= 1.0:
        every = max(1, math.ceil((math.floor(xhi) - math.ceil(xlo) + 1) / 7))
        xticks = [float(k) for k in range(math.ceil(xlo), math.floor(xhi) + 1) if k % every == 0]
        xlabels = [format_tick(10.0 ** k, 10.0 ** k) for k in xticks]
    else:
        lin = nice_ticks(10 ** xlo, 10 ** xhi, 7) if panel.logx else nice_ticks(xlo, xhi, 7)
        step = lin[1] - lin[0] if len(lin) > 1 else 1.0
        lin = [t for t in lin if (t > 0 or not panel.logx) and xlo - 1e-9 <= fx(t) <= xhi + 1e-9]
        xticks = [fx(t) for t in lin]
        xlabels = [format_tick(t, step) for t in lin]
    ystep = yticks[1] - yticks[0] if len(yticks) > 1 else 1.0
    ylabels = [format_tick(t, ystep) for t in yticks]

    left = ox + 8 + (GLYPH_H + 6 if panel.ylabel else 0) + max(map(text_width, ylabels)) + 6
    top = oy + (2 * GLYPH_H + 12 if panel.title else 10)
    right = ox + w - 12
    bottom = oy + h - (GLYPH_H + 10) - (GLYPH_H + 8 if panel.xlabel else 0)
    if right - left < 20 or bottom - top < 20:
        raise ValueError(f"panel of {w}x{h} pixels is too small for its labels")

    def px(x: float) -> int:
        return round(left + (x - xlo) / (xhi - xlo) * (right - left))

    def py(y: float) -> int:
        return round(bottom - (y - ylo) / (yhi - ylo) * (bottom - top))

    for t, label in zip(yticks, ylabels):
        y = py(t)
        cv.line(left, y, right, y, GRID)
        cv.line(left - 4, y, left, y, BLACK)
        cv.text(left - 6 - text_width(label), y - GLYPH_H // 2 + 1, label, AXIS_TEXT)
    last_end = -10**9
    for t, label in zip(xticks, xlabels):
        x = px(t)
        cv.line(x, top, x, bottom, GRID)
        cv.line(x, bottom, x, bottom + 4, BLACK)
        start = x - text_width(label) // 2
        if start > last_end + 4:  # skip labels that would overlap their neighbour
            cv.text(start, bottom + 7, label, AXIS_TEXT)
            last_end = start + text_width(label)
    cv.line(left, top, right, top, BLACK)
    cv.line(left, bottom, right, bottom, BLACK)
    cv.line(left, top, left, bottom, BLACK)
    cv.line(right, top, right, bottom, BLACK)
    if panel.title:
        scale = 2 if text_width(panel.title, 2) <= w - 8 else 1  # long titles drop to small type
        title = panel.title[:max(1, (w - 8) // (ADVANCE * scale))]
        cv.text(ox + (w - text_width(title, scale)) // 2, oy + 6, title, BLACK, scale=scale)
    if panel.xlabel:
        cv.text((left + right - text_width(panel.xlabel)) // 2, bottom + GLYPH_H + 14, panel.xlabel, BLACK)
    if panel.ylabel:
        cv.text(ox + 6, (top + bottom + text_width(panel.ylabel)) // 2, panel.ylabel, BLACK, vertical=True)

    show_markers = panel.markers if panel.markers is not None else all(len(p) <= 40 for p in data.values())
    for k, (name, pts) in enumerate(data.items()):
        color, shape = PALETTE[k % len(PALETTE)], MARKERS[k % len(MARKERS)]
        screen = [(px(fx(x)), py(y)) for x, y in pts]
        if panel.lines:
            for (x0, y0), (x1, y1) in zip(screen, screen[1:]):
                cv.line(x0, y0, x1, y1, color, width=2)
        if show_markers or len(screen) == 1 or not panel.lines:
            for x, y in screen:
                cv.marker(x, y, shape, color)
    _legend(cv, list(data), (left, top, right, bottom), show_markers)


def _legend(cv: Canvas, names: list[str], box: tuple[int, int, int, int], markers: bool) -> None:
    """Legend in the corner of the plot area ``box`` (left, top, right, bottom) hiding the
    fewest data pixels; ties go to top-right, top-left, bottom-right, bottom-left."""
    if not names:
        return
    left, top, right, bottom = box
    row = GLYPH_H + 6
    bw = 30 + max(map(text_width, names)) + 8
    bh = row * len(names) + 6
    ink = set(PALETTE)
    corners = [(right - bw - 6, top + 6), (left + 6, top + 6),
               (right - bw - 6, bottom - bh - 6), (left + 6, bottom - bh - 6)]

    def covered(corner: tuple[int, int]) -> int:
        cx, cy = corner
        return sum(1 for y in range(max(0, cy), min(cv.height, cy + bh + 1))
                   for x in range(max(0, cx), min(cv.width, cx + bw + 1)) if cv.get(x, y) in ink)

    x0, y0 = min(corners, key=covered)  # min keeps the first of equal counts
    cv.fill(x0, y0, x0 + bw, y0 + bh, WHITE)
    for x, y, x2, y2 in ((x0, y0, x0 + bw, y0), (x0, y0 + bh, x0 + bw, y0 + bh),
                         (x0, y0, x0, y0 + bh), (x0 + bw, y0, x0 + bw, y0 + bh)):
        cv.line(x, y, x2, y2, (160, 160, 160))
    for k, name in enumerate(names):
        color = PALETTE[k % len(PALETTE)]
        cy = y0 + 4 + k * row + GLYPH_H // 2
        cv.line(x0 + 5, cy, x0 + 23, cy, color, width=2)
        if markers:
            cv.marker(x0 + 14, cy, MARKERS[k % len(MARKERS)], color)
        cv.text(x0 + 30, cy - GLYPH_H // 2 + 1, name, BLACK)


def render(panels: Sequence[Panel], width: int = 640, panel_height: int = 360) -> bytes:
    """PNG bytes of ``panels`` stacked top to bottom."""
    if not panels:
        raise ValueError("nothing to plot: no panels")
    cv = Canvas(width, panel_height * len(panels))
    for k, panel in enumerate(panels):
        _draw_panel(cv, panel, 0, k * panel_height, width, panel_height)
    return cv.to_png()


def chart(path: Path | str, panels: Sequence[Panel], width: int = 640, panel_height: int = 360) -> Path:
    path = Path(path)
    path.write_bytes(render(panels, width, panel_height))
    return path


def line_chart(path: Path | str, series: Mapping[str, Sequence[Point]], title: str = "",
               xlabel: str = "", ylabel: str = "", logx: bool = False, width: int = 640,
               height: int = 400, markers: bool | None = None) -> Path:
    """One panel: ``series`` maps a legend name to its (x, y) points."""
    return chart(path, [Panel(series, title, xlabel, ylabel, logx, markers)], width, height)


def bar_chart(path: Path | str, bars: Sequence[tuple[str, float]], title: str = "", xlabel: str = "",
              width: int = 640, bar_height: int = 18) -> Path:
    """Horizontal bars, one per (label, value), top to bottom, each with its value printed;
    for funnels and counts by reason, where a line has no meaning."""
    if not bars:
        raise ValueError("nothing to plot: no bars")
    label_w = max(text_width(label) for label, _ in bars) + 16
    top = 16 + (GLYPH_H + 12 if title else 0)
    height = top + len(bars) * (bar_height + 6) + (GLYPH_H + 24 if xlabel else 16)
    cv = Canvas(width, height)
    if title:
        cv.text((width - text_width(title)) // 2, 10, title, BLACK)
    vmax = max((abs(float(v)) for _, v in bars), default=0.0) or 1.0
    room = width - label_w - 90
    for k, (label, value) in enumerate(bars):
        y = top + k * (bar_height + 6)
        cv.text(label_w - 8 - text_width(label), y + (bar_height - GLYPH_H) // 2, label, BLACK)
        length = int(round(room * abs(float(value)) / vmax))
        if length:
            cv.fill(label_w, y, label_w + length - 1, y + bar_height - 1, PALETTE[k % len(PALETTE)])
        shown = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"
        cv.text(label_w + length + 6, y + (bar_height - GLYPH_H) // 2, shown, BLACK)
    cv.line(label_w, top - 4, label_w, top + len(bars) * (bar_height + 6), BLACK)
    if xlabel:
        cv.text(label_w + (room - text_width(xlabel)) // 2, height - GLYPH_H - 10, xlabel, BLACK)
    path = Path(path)
    path.write_bytes(cv.to_png())
    return path
