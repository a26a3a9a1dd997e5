"""Small, dependency-free SVG charts for the HTML report: a stacked bar, a line chart with a
marked point, a horizontal bar chart and a scatter plot.

Every chart is an accessible `<svg role="img">` with `<title>` and `<desc>`, axis labels that
carry units, the Okabe–Ito colour-blind-safe palette, and a viewBox so it scales with its box.
Output is deterministic: the same data gives the same bytes (fixed number formatting, no ids
drawn from counters or clocks). Pure functions of their arguments; nothing runs at import.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision
# deficiency. Order chosen so neighbouring stack segments contrast.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
             "#000000")
GREY = "#BBBBBB"
HALO = ' paint-order="stroke" stroke="#fff" stroke-width="3"'  # legible over lines
FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"


@dataclass(frozen=True)
class Segment:
    label: str
    value: float
    colour: str
    pattern: bool = False  # hatched (e.g. headroom), so it reads without colour too


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]
    colour: str = OKABE_ITO[0]
    dashed: bool = False


@dataclass(frozen=True)
class HLine:
    """A horizontal reference line (an SLO, one request) with its label."""

    y: float
    label: str
    colour: str = OKABE_ITO[5]


def _n(x: float) -> str:
    """Coordinates with at most one decimal, no trailing zeros: stable bytes."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _open(cid: str, width: int, height: int, title: str, desc: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
            f'viewBox="0 0 {width} {height}" aria-labelledby="{cid}-t {cid}-d" '
            f'style="{FONT}">',
            f'<title id="{cid}-t">{escape(title)}</title>',
            f'<desc id="{cid}-d">{escape(desc)}</desc>']


def _text(x: float, y: float, s: str, *, size: int = 12, anchor: str = "start",
          weight: str = "normal", fill: str = "#222", extra: str = "") -> str:
    w = f' font-weight="{weight}"' if weight != "normal" else ""
    return (f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{fill}"{w}{extra}>{escape(s)}</text>')


def _hatch(cid: str) -> str:
    return (f'<defs><pattern id="{cid}-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/>'
            f'<line x1="0" y1="0" x2="0" y2="6" stroke="#888" stroke-width="2"/></pattern></defs>')


def _axes(left: float, top: float, pw: float, ph: float, height: int, x_label: str,
          y_label: str) -> list[str]:
    """The x and y axis lines of a plot area and their labels (y rotated)."""
    return [f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#444"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#444"/>',
            _text(left + pw / 2, height - 8, x_label, size=12, anchor="middle"),
            _text(14, top + ph / 2, y_label, size=12, anchor="middle",
                  extra=f' transform="rotate(-90 14 {_n(top + ph / 2)})"')]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5, 5 × 10^k steps)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def stacked_bar(cid: str, segments: Sequence[Segment], *, title: str, desc: str,
                axis_label: str, fmt: Callable[[float], str],
                limit: tuple[float, str] | None = None, width: int = 720) -> str:
    """One horizontal bar split into segments (e.g. per-GPU memory), with a legend below that
    names each segment and its value, so no reader depends on colour or on hovering. `limit`
    (value, label) draws a line where the segments overflow a capacity (e.g. the device)."""
    used = sum(max(s.value, 0) for s in segments)
    over = limit is not None and used > limit[0] * (1 + 1e-9)
    total = (max(used, limit[0]) if limit else used) or 1
    left, right, top, bar_h = 16, 16, 12 + (18 if over else 0), 44
    plot_w = width - left - right
    cols = 3
    rows = math.ceil(len(segments) / cols)
    height = top + bar_h + 40 + rows * 22 + 8
    out = _open(cid, width, height, title, desc)
    if any(s.pattern for s in segments):
        out.append(_hatch(cid))
    x = float(left)
    for s in segments:
        w = plot_w * max(s.value, 0) / total
        if w <= 0:
            continue
        fill = f"url(#{cid}-hatch)" if s.pattern else s.colour
        out.append(f'<rect x="{_n(x)}" y="{top}" width="{_n(w)}" height="{bar_h}" fill="{fill}" '
                   f'stroke="#fff" stroke-width="1"><title>{escape(s.label)}: '
                   f'{escape(fmt(s.value))}</title></rect>')
        if w > 44:
            share = f"{100 * s.value / (limit[0] if limit else total):.0f}%"
            # WCAG AA contrast: white only on the dark blue and black, black on the rest
            ink = "#fff" if not s.pattern and s.colour in ("#0072B2", "#000000") else "#000"
            out.append(_text(x + w / 2, top + bar_h / 2 + 4, share, anchor="middle", fill=ink,
                             weight="bold"))
        x += w
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{bar_h}" fill="none" '
               f'stroke="#444" stroke-width="1"/>')
    if over and limit:
        lx = left + plot_w * limit[0] / total
        out.append(f'<line x1="{_n(lx)}" y1="{top - 16}" x2="{_n(lx)}" y2="{top + bar_h + 4}" '
                   f'stroke="#000" stroke-width="2.5" stroke-dasharray="5 3"/>')
        out.append(_text(lx - 4, top - 5, limit[1], size=12, anchor="end", weight="bold",
                         extra=HALO))
    out.append(_text(left, top + bar_h + 18, "0", size=11, fill="#555"))
    out.append(_text(left + plot_w, top + bar_h + 18, fmt(total), size=11, anchor="end",
                     fill="#555"))
    out.append(_text(left + plot_w / 2, top + bar_h + 18, axis_label, size=11, anchor="middle",
                     fill="#555"))
    col_w = plot_w / cols
    for i, s in enumerate(segments):
        lx = left + (i % cols) * col_w
        ly = top + bar_h + 40 + (i // cols) * 22
        fill = f"url(#{cid}-hatch)" if s.pattern else s.colour
        out.append(f'<rect x="{_n(lx)}" y="{_n(ly - 11)}" width="14" height="14" fill="{fill}" '
                   f'stroke="#444" stroke-width="0.5"/>')
        out.append(_text(lx + 20, ly, f"{s.label} {fmt(s.value)}", size=13))
    out.append("</svg>")
    return "\n".join(out)


def line_chart(cid: str, series: Sequence[Series], *, title: str, desc: str, x_label: str,
               y_label: str, x_fmt: Callable[[float], str], y_fmt: Callable[[float], str],
               log2_x: bool = False, log2_y: bool = False,
               marker: tuple[float, float, str] | None = None,
               hlines: Sequence[HLine] = (), width: int = 720, height: int = 340) -> str:
    """Lines over a shared x axis, an optional marked point (x, y, label) and horizontal
    reference lines; either axis may be log₂ (values must then be positive). Every point is
    also drawn as a dot with a tooltip."""
    left, right, top, bottom = 64, 24, 16 + 18 * len(series), 52
    pw, ph = width - left - right, height - top - bottom
    xs = [p[0] for s in series for p in s.points] + ([marker[0]] if marker else [])
    ys = [p[1] for s in series for p in s.points] + [h.y for h in hlines] + \
        ([marker[1]] if marker else [])
    tx: Callable[[float], float] = (lambda v: math.log2(max(v, 1e-9))) if log2_x else float
    x0, x1 = min(map(tx, xs)), max(map(tx, xs))
    if x1 <= x0:
        x1 = x0 + 1
    yticks, y_lo, y1 = _y_scale(ys, log2_y)

    def px(v: float) -> float:
        return left + pw * (tx(v) - x0) / (x1 - x0)

    def py(v: float) -> float:
        t = math.log2(max(v, 2.0 ** y_lo)) if log2_y else v
        return top + ph - ph * (t - y_lo) / ((y1 - y_lo) or 1)

    out = _open(cid, width, height, title, desc)
    for t in yticks:
        out.append(f'<line x1="{left}" y1="{_n(py(t))}" x2="{left + pw}" y2="{_n(py(t))}" '
                   f'stroke="#e3e3e3" stroke-width="1"/>')
        out.append(_text(left - 6, py(t) + 4, y_fmt(t), size=11, anchor="end", fill="#555"))
    for t in _x_ticks(x0, x1, log2_x):
        out.append(f'<line x1="{_n(px(t))}" y1="{top + ph}" x2="{_n(px(t))}" y2="{top + ph + 4}" '
                   f'stroke="#444"/>')
        out.append(_text(px(t), top + ph + 17, x_fmt(t), size=11, anchor="middle", fill="#555"))
    out += _axes(left, top, pw, ph, height, x_label, y_label)
    for h in hlines:
        out.append(f'<line x1="{left}" y1="{_n(py(h.y))}" x2="{left + pw}" y2="{_n(py(h.y))}" '
                   f'stroke="{h.colour}" stroke-width="1.5" stroke-dasharray="6 4"/>')
        out.append(_text(left + pw - 4, py(h.y) - 5, h.label, size=11, anchor="end", fill="#222",
                         extra=HALO))  # dark text: the light line colours fail contrast as text
    for i, s in enumerate(series):
        out += _series(s, i, px, py, left, x_fmt, y_fmt)
    if marker:
        mx, my, label = marker
        # Lines here mostly fall to the right: below-left or above-right of the point is clear.
        right_half = px(mx) > left + pw / 2
        anchor, dx, dy = ("end", -12, 20) if right_half else ("start", 12, -12)
        out.append(f'<circle cx="{_n(px(mx))}" cy="{_n(py(my))}" r="7" fill="none" '
                   f'stroke="#000" stroke-width="2"/>')
        out.append(_text(px(mx) + dx, py(my) + dy, label, size=12, anchor=anchor, weight="bold",
                         extra=HALO))
    out.append("</svg>")
    return "\n".join(out)


def _y_scale(ys: Sequence[float], log2_y: bool) -> tuple[list[float], float, float]:
    """line_chart's y ticks and the (transformed) bottom and top of its y axis."""
    if log2_y:
        lo = math.floor(math.log2(min(y for y in ys if y > 0))) if any(y > 0 for y in ys) else 0
        hi = max(math.ceil(math.log2(max(ys))), lo + 1) if ys and max(ys) > 0 else lo + 1
        step = math.ceil((hi - lo + 1) / 8)
        yticks = [2.0 ** k for k in range(lo, hi + step, step)]
        return yticks, math.log2(yticks[0]), math.log2(yticks[-1])
    yticks = nice_ticks(0, max(ys) if ys else 1)
    return yticks, 0.0, yticks[-1] or 1


def _x_ticks(x0: float, x1: float, log2_x: bool) -> list[float]:
    """line_chart's x ticks (x0, x1 already transformed), at most nine of them."""
    if log2_x:
        xticks = [2.0 ** k for k in range(math.ceil(x0), math.floor(x1) + 1)]
    else:
        xticks = nice_ticks(x0, x1)
    if len(xticks) > 9:
        xticks = xticks[::math.ceil(len(xticks) / 9)]
    return xticks


def _series(s: Series, i: int, px: Callable[[float], float], py: Callable[[float], float],
            left: int, x_fmt: Callable[[float], str], y_fmt: Callable[[float], str]) -> list[str]:
    """One line_chart series: its line, a dot with a tooltip per point, its legend entry."""
    pts = sorted(s.points)
    path = " ".join(f"{_n(px(x))},{_n(py(y))}" for x, y in pts)
    dash = ' stroke-dasharray="5 3"' if s.dashed else ""
    out = [f'<polyline points="{path}" fill="none" stroke="{s.colour}" stroke-width="2.5"'
           f'{dash}/>']
    for x, y in pts:
        out.append(f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="3" fill="{s.colour}">'
                   f'<title>{escape(s.label)}: {escape(x_fmt(x))} → {escape(y_fmt(y))}'
                   f'</title></circle>')
    ly = 14 + 18 * i
    out.append(f'<line x1="{left}" y1="{ly - 4}" x2="{left + 22}" y2="{ly - 4}" '
               f'stroke="{s.colour}" stroke-width="2.5"{dash}/>')
    out.append(_text(left + 28, ly, s.label, size=12))
    return out


def bar_chart(cid: str, bars: Sequence[tuple[str, float]], *, title: str, desc: str,
              axis_label: str, fmt: Callable[[float], str], width: int = 720) -> str:
    """Horizontal bars, one per labelled value (e.g. KV tokens per engine), value at the end."""
    left, right, top, row = 150, 90, 8, 30
    pw = width - left - right
    height = top + row * len(bars) + 34
    hi = max((v for _, v in bars), default=1) or 1
    out = _open(cid, width, height, title, desc)
    for i, (label, v) in enumerate(bars):
        y = top + i * row
        w = pw * max(v, 0) / hi
        out.append(_text(left - 8, y + row / 2 + 4, label, size=12, anchor="end"))
        out.append(f'<rect x="{left}" y="{_n(y + 5)}" width="{_n(w)}" height="{row - 10}" '
                   f'fill="{OKABE_ITO[i % len(OKABE_ITO)]}"><title>{escape(label)}: '
                   f'{escape(fmt(v))}</title></rect>')
        out.append(_text(left + w + 6, y + row / 2 + 4, fmt(v), size=12))
    base = top + row * len(bars)
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#444"/>')
    out.append(_text(left + pw / 2, base + 22, axis_label, size=12, anchor="middle"))
    out.append("</svg>")
    return "\n".join(out)


def scatter(cid: str, points: Sequence[tuple[float, float, str, bool]], *, title: str, desc: str,
            x_label: str, y_label: str, x_fmt: Callable[[float], str],
            y_fmt: Callable[[float], str], width: int = 720, height: int = 340) -> str:
    """Labelled points (x, y, label, highlighted), e.g. sweep options by cost and headroom."""
    left, right, top, bottom = 64, 24, 16, 52
    pw, ph = width - left - right, height - top - bottom
    xt = nice_ticks(0, max((p[0] for p in points), default=1))
    yt = nice_ticks(0, max((p[1] for p in points), default=1))

    def px(v: float) -> float:
        return left + pw * v / (xt[-1] or 1)

    def py(v: float) -> float:
        return top + ph - ph * v / (yt[-1] or 1)

    out = _open(cid, width, height, title, desc)
    for t in yt:
        out.append(f'<line x1="{left}" y1="{_n(py(t))}" x2="{left + pw}" y2="{_n(py(t))}" '
                   f'stroke="#e3e3e3"/>')
        out.append(_text(left - 6, py(t) + 4, y_fmt(t), size=11, anchor="end", fill="#555"))
    for t in xt:
        out.append(_text(px(t), top + ph + 17, x_fmt(t), size=11, anchor="middle", fill="#555"))
    out += _axes(left, top, pw, ph, height, x_label, y_label)
    placed: list[tuple[float, float, float, float]] = []  # label boxes drawn so far
    for x, y, label, hot in points:
        colour = OKABE_ITO[5] if hot else OKABE_ITO[0]
        shape = (f'<rect x="{_n(px(x) - 5)}" y="{_n(py(y) - 5)}" width="10" height="10" '
                 f'fill="{colour}">' if hot else
                 f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="5" fill="{colour}">')
        end = "</rect>" if hot else "</circle>"
        out.append(f"{shape}<title>{escape(label)}: {escape(x_fmt(x))}, {escape(y_fmt(y))}"
                   f"</title>{end}")
        lx, ly = _label_spot(px(x), py(y), label, placed, left + pw, top, top + ph)
        out.append(_text(lx, ly, label, size=11))
    out.append("</svg>")
    return "\n".join(out)


def _label_spot(x: float, y: float, label: str, placed: list[tuple[float, float, float, float]],
                right: float, top: float, bottom: float) -> tuple[float, float]:
    """Where a point's label goes: right of the point (left of it near the right edge), at the
    first height that overlaps no label already placed; the box is added to `placed`. Labels
    are 11 px text, about 6.2 px a character."""
    w, h = 6.2 * len(label), 12.0
    lx = x + 8 if x + 8 + w <= right else x - 8 - w
    for k in (0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7, 8, -8):
        dy = -6 + 14 * k
        ly = min(max(y + dy, top + h), bottom)
        box = (lx, ly - h, lx + w, ly + 2)
        if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3]
                   for b in placed):
            break
    placed.append(box)
    return lx, ly
