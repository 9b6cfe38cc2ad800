"""Charts drawn on the server as inline SVG (no script, no external asset: the strict CSP holds, and a page without
JavaScript shows them too). Every chart sits beside the table of its numbers, which stays the accessible form.

Axes are laid out from their labels: the margins are measured from the longest tick label (a conservative width per
character), so a label such as "12,000" is never cut to "2,000"; categorical buckets are categories on a band axis,
never points on a continuous one; long category names wrap onto lines under their band.
The browser tests check each text's box against the viewBox (tests/ui)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH, HEIGHT = 720, 280
FONT = 12  # px, in viewBox units
CHAR = 7.6  # a generous width of one character at FONT (digits and most letters are narrower)
LINE = 15  # px between wrapped label lines
COLORS = ("#1f5fbf", "#c0392b", "#19733a", "#8e44ad", "#d35400", "#7f8c8d")
MAX_POINTS = 2000  # points drawn per chart (a bounded loop; the table has them all)


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]


def number(x: float, percent: bool = False) -> str:
    """A tick label: 12,000 / 2.5 / 0.004 / 40%."""
    if percent:
        return f"{100 * x:.0f}%" if abs(100 * x - round(100 * x)) < 1e-9 else f"{100 * x:.1f}%"
    if x == 0:
        return "0"
    if abs(x) >= 1000 or float(x).is_integer():
        return f"{x:,.0f}"
    digits = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:,.{digits}f}".rstrip("0").rstrip(".")


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 × 10^k steps) covering [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high):
        return [0.0, 1.0]
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    start = math.floor(low / step) * step
    ticks, value = [], start
    while value < high + step * 0.5 and len(ticks) < 50:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def _width(text: str) -> float:
    return len(text) * CHAR


def _wrap(text: str, room: float) -> list[str]:
    """Words on lines of at most ``room`` px; a single word longer than that stays whole (the band widens it)."""
    lines: list[str] = []
    for word in text.split():
        if lines and _width(lines[-1] + " " + word) <= room:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _text(x: float, y: float, label: str, anchor: str = "middle", cls: str = "", rotate: bool = False) -> str:
    transform = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    klass = f' class="{cls}"' if cls else ""
    where = f'x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{FONT}"'
    return f"<text {where}{transform}{klass}>{escape(label)}</text>"


class _Frame:
    """The plot area inside margins sized from the y tick labels, the axis titles and the x labels' lines."""

    def __init__(self, y_labels: list[str], y_title: str, x_lines: int, legend: list[str], x_title: str) -> None:
        self.left = 12 + (LINE + 6 if y_title else 0) + max(_width(t) for t in y_labels) + 8
        self.right = WIDTH - 16
        self.legend_rows = self._legend_rows(legend)
        self.top = 10 + self.legend_rows * LINE + (6 if legend else 0) + FONT // 2  # room for the top label
        self.bottom = HEIGHT - (8 + x_lines * LINE + (LINE + 4 if x_title else 0))

    def _legend_rows(self, names: list[str]) -> int:
        rows, x = (1 if names else 0), 0.0
        for name in names:
            need = 18 + _width(name) + 14
            if x and x + need > WIDTH - 24:
                rows, x = rows + 1, 0.0
            x += need
        return rows

    def legend(self, names: list[str]) -> list[str]:
        out, x, row = [], 12.0, 0
        for k, name in enumerate(names):
            need = 18 + _width(name) + 14
            if x > 12 and x + need > WIDTH - 12:
                row, x = row + 1, 12.0
            y = 10 + row * LINE + FONT
            out.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="10" fill="{COLORS[k % len(COLORS)]}"/>')
            out.append(_text(x + 16, y, name, anchor="start", cls="legend"))
            x += need
        return out


def _svg(body: list[str], label: str) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">' + "".join(body) + "</svg>"
    )


def _y_axis(frame: _Frame, ticks: list[float], labels: list[str], scale, title: str) -> list[str]:
    out = []
    for value, text in zip(ticks, labels, strict=True):
        y = scale(value)
        out.append(f'<line x1="{frame.left:.1f}" x2="{frame.right:.1f}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(_text(frame.left - 6, y + 4, text, anchor="end", cls="tick y"))
    if title:
        mid = (frame.top + frame.bottom) / 2
        out.append(_text(12 + FONT, mid, title, cls="axis-title y", rotate=True))
    out.append(
        f'<line x1="{frame.left:.1f}" x2="{frame.left:.1f}" y1="{frame.top:.1f}" y2="{frame.bottom:.1f}" class="axis"/>'
    )
    return out


def _x_axis(frame: _Frame) -> str:
    y = f"{frame.bottom:.1f}"
    return f'<line x1="{frame.left:.1f}" x2="{frame.right:.1f}" y1="{y}" y2="{y}" class="axis"/>'


def _x_title(frame: _Frame, title: str) -> list[str]:
    if not title:
        return []
    return [_text((frame.left + frame.right) / 2, HEIGHT - 8, title, cls="axis-title x")]


def bars(
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    x_title: str = "",
    y_title: str = "",
    percent: bool = False,
    label: str = "",
) -> Markup:
    """Grouped bars: one band per category (a category axis), one bar per series, y from 0."""
    categories = [str(c) for c in categories][:MAX_POINTS]
    values = [v for s in series for v in s.values[: len(categories)] if v is not None and math.isfinite(v)]
    top = max([*values, 0.0])
    ticks = nice_ticks(0.0, top if top > 0 else 1.0, 5)
    y_labels = [number(t, percent) for t in ticks]
    names = [s.name for s in series] if len(series) > 1 else []
    probe_band = (WIDTH - 100) / max(1, len(categories))
    lines = max((len(_wrap(c, probe_band - 6)) for c in categories), default=1)
    frame = _Frame(y_labels, y_title, lines, names, x_title)
    band = (frame.right - frame.left) / max(1, len(categories))
    wrapped = [_wrap(c, band - 6) for c in categories]
    y_max = ticks[-1] or 1.0

    def y_of(v: float) -> float:
        return frame.bottom - (frame.bottom - frame.top) * v / y_max

    body = _y_axis(frame, ticks, y_labels, y_of, y_title)
    per = max(1, len(series))
    bar_w = min(48.0, band * 0.7 / per)
    for i, lines_i in enumerate(wrapped):
        x0 = frame.left + band * i + (band - bar_w * per) / 2
        for k, s in enumerate(series):
            v = s.values[i] if i < len(s.values) else None
            if v is None or not math.isfinite(v):
                continue
            y = y_of(max(0.0, v))
            body.append(
                f'<rect x="{x0 + k * bar_w:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" height="{frame.bottom - y:.1f}"'
                f' fill="{COLORS[k % len(COLORS)]}"><title>{escape(s.name)}, {escape(categories[i])}: '
                f"{escape(number(v, percent))}</title></rect>"
            )
        cx = frame.left + band * (i + 0.5)
        for j, text in enumerate(lines_i):
            body.append(_text(cx, frame.bottom + 6 + FONT + j * LINE, text, cls="tick x"))
    body.append(_x_axis(frame))
    body += _x_title(frame, x_title) + frame.legend(names)
    return _svg(body, label)


def _x_tick_labels(frame: _Frame, x_ticks: Sequence[float], x_of: Callable[[float], float]) -> list[str]:
    """The x ticks' labels, skipping one that would overlap the previous one."""
    out, last_right = [], -math.inf
    for x in x_ticks:
        text, cx = number(x), x_of(x)
        if cx - _width(text) / 2 > last_right + 6:
            out.append(_text(cx, frame.bottom + 6 + FONT, text, cls="tick x"))
            last_right = cx + _width(text) / 2
    return out


def _polyline(points: list[tuple[float, float]], color: str) -> list[str]:
    """A series: its line (two points or more) and its points."""
    out = []
    if len(points) > 1:
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
    return out + [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}"/>' for px, py in points]


def lines(
    xs: Sequence[float],
    series: Sequence[Series],
    *,
    x_title: str = "",
    y_title: str = "",
    percent: bool = False,
    log_x: bool = False,
    label: str = "",
) -> Markup:
    """Lines with points; x ticks at the data's own x values when there are few, else round values."""
    xs = [float(x) for x in xs][:MAX_POINTS]
    log_x = log_x and bool(xs) and min(xs) > 0
    values = [v for s in series for v in s.values[: len(xs)] if v is not None and math.isfinite(v)]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    ticks = nice_ticks(min(0.0, low), high if high > min(0.0, low) else min(0.0, low) + 1, 5)
    y_labels = [number(t, percent) for t in ticks]
    names = [s.name for s in series] if len(series) > 1 else []
    frame = _Frame(y_labels, y_title, 1, names, x_title)
    fx = (lambda x: math.log10(x)) if log_x else (lambda x: x)  # noqa: E731
    x_low, x_high = (fx(min(xs)), fx(max(xs))) if xs else (0.0, 1.0)
    x_ticks = sorted(set(xs)) if len(set(xs)) <= 12 else nice_ticks(min(xs), max(xs), 6)
    if x_high == x_low:
        x_low, x_high = x_low - 1, x_high + 1
    pad = max(_width(number(x_ticks[0])), _width(number(x_ticks[-1]))) / 2 + 4 if x_ticks else 0
    left, right = frame.left + pad, frame.right - pad

    def x_of(x: float) -> float:
        return left + (right - left) * (fx(x) - x_low) / (x_high - x_low)

    def y_of(v: float) -> float:
        return frame.bottom - (frame.bottom - frame.top) * (v - ticks[0]) / ((ticks[-1] - ticks[0]) or 1.0)

    body = _y_axis(frame, ticks, y_labels, y_of, y_title) + _x_tick_labels(frame, x_ticks, x_of)
    for k, s in enumerate(series):
        points = [(x_of(x), y_of(v)) for x, v in zip(xs, s.values, strict=False) if v is not None and math.isfinite(v)]
        body += _polyline(points, COLORS[k % len(COLORS)])
    body.append(_x_axis(frame))
    body += _x_title(frame, x_title + (" (log scale)" if log_x else "")) + frame.legend(names)
    return _svg(body, label)
