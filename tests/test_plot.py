"""The PNG chart writer: a valid file (checked by an independent decoder), ink where expected."""

import math
import struct
import zlib

import pytest

from kolectra.core.plot import (FONT, PALETTE, Canvas, Panel, chart, format_tick, line_chart, nice_ticks,
                           render, text_width)


def decode_png(data: bytes) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """Minimal PNG reader for 8-bit RGB, written from the PNG spec (all five row filters)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        pos += 12 + n
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    w, h, depth, ctype, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, ctype, comp, filt, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    stride = 3 * w
    assert len(raw) == h * (stride + 1)
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b, c = prev[i], (prev[i - 3] if i >= 3 else 0)
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            else:
                assert f == 0, f
        rows.append([tuple(line[3 * x:3 * x + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def where(rows, color):
    return [(x, y) for y, row in enumerate(rows) for x, px in enumerate(row) if px == color]


def test_png_is_valid_and_series_land_where_their_values_say(tmp_path):
    high = [(x, 10.0) for x in range(11)]
    low = [(x, 0.0) for x in range(11)]
    path = line_chart(tmp_path / "c.png", {"high": high, "low": low}, title="Two lines",
                      xlabel="step", ylabel="value", width=320, height=240)
    w, h, rows = decode_png(path.read_bytes())
    assert (w, h) == (320, 240)
    blue, orange = where(rows, PALETTE[0]), where(rows, PALETTE[1])
    assert len(blue) > 200 and len(orange) > 200  # a line across the plot, plus its legend sample
    # both lines are horizontal and span most of the width; "high" sits above "low"
    blue_y = sorted(y for _, y in blue)
    orange_y = sorted(y for _, y in orange)
    assert statistics_median(blue_y) < statistics_median(orange_y)
    assert max(x for x, _ in blue) - min(x for x, _ in blue) > 0.7 * w
    # title, tick labels and axis labels leave black ink outside the plot lines
    assert len(where(rows, (0, 0, 0))) > 500
    assert render([Panel({"high": high, "low": low}, "Two lines", "step", "value")], 320, 240) == path.read_bytes()


def statistics_median(xs):
    return xs[len(xs) // 2]


def test_log_x_places_decades_evenly_and_rejects_non_positive(tmp_path):
    pts = [(1e16, 1.0), (1e17, 1.0), (1e18, 1.0)]
    # markers only: the three points should be equally spaced on a log axis
    png = render([Panel({"s": pts}, logx=True, lines=False, markers=True)], 400, 300)
    _, _, rows = decode_png(png)
    blue = where(rows, PALETTE[0])
    ys = [y for _, y in blue]
    row = max(set(ys), key=ys.count)  # the marker centre row (legend sample excluded: shorter)
    xs = sorted(x for x, y in blue if y == row)
    clusters = []
    for x in xs:
        if clusters and x - clusters[-1][-1] <= 1:
            clusters[-1].append(x)
        else:
            clusters.append([x])
    plot_centres = [sum(c) / len(c) for c in clusters]
    assert len(plot_centres) == 3
    assert abs((plot_centres[1] - plot_centres[0]) - (plot_centres[2] - plot_centres[1])) <= 2
    with pytest.raises(ValueError, match="positive"):
        render([Panel({"s": [(0.0, 1.0)]}, logx=True)])


def test_font_covers_printable_ascii_with_distinct_glyphs():
    printable = [chr(c) for c in range(32, 127)]
    assert all(ch in FONT for ch in printable)
    shapes = [FONT[ch] for ch in printable if ch != " "]
    assert len(set(shapes)) == len(shapes)  # no two characters look the same
    assert all(0 <= c < 5 and 0 <= r < 8 for g in shapes for c, r in g)


def test_text_draws_the_glyph_pixels_upright_and_vertical():
    cv = Canvas(20, 20)
    cv.text(2, 3, "L")
    ink = {(x, y) for y in range(20) for x in range(20) if cv.get(x, y) != (255, 255, 255)}
    assert ink == {(2 + c, 3 + r) for c, r in FONT["L"]}
    cv = Canvas(20, 20)
    cv.text(3, 15, "L", vertical=True)  # reads bottom to top: columns become rows upwards
    ink = {(x, y) for y in range(20) for x in range(20) if cv.get(x, y) != (255, 255, 255)}
    assert ink == {(3 + r, 15 - c) for c, r in FONT["L"]}
    assert text_width("ab") == 11 and text_width("ab", 2) == 22


def test_ticks_and_labels():
    assert nice_ticks(0.0, 1.0, 6) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    t = nice_ticks(0.813, 0.874, 6)
    assert t[0] <= 0.813 and t[-1] >= 0.874 and len(t) <= 7
    assert format_tick(0.25, 0.05) == "0.25" and format_tick(3.0, 1.0) == "3"
    assert format_tick(2.5e18, 1e18) == "2.5e18" and format_tick(1e-4, 1e-4) == "1e-4"


def test_multi_panel_and_degenerate_inputs(tmp_path):
    panels = [Panel({"loss": [(1, 0.7)]}, "one point"),
              Panel({"nan skipped": [(1, math.nan), (2, 1.0), (3, 2.0)]}, "b"),
              Panel({}, "empty")]
    w, h, rows = decode_png(chart(tmp_path / "p.png", panels, width=300, panel_height=200).read_bytes())
    assert (w, h) == (300, 600)
    assert where(rows, PALETTE[0])  # the single point still gets a marker
    with pytest.raises(ValueError, match="no panels"):
        render([])
    with pytest.raises(ValueError, match="too small"):
        render([Panel({"a": [(1, 1)]}, "t", "x", "y")], 40, 40)
