"""Small inline-SVG plots for the what-if report: grouped bars, lines over time, a timeline.

Our own few lines rather than matplotlib: the report needs three plain charts, and they stay
text (diffable, no fonts, no backend). Every function returns one `<svg>` element as a string.
"""

from __future__ import annotations

import math
from html import escape

WIDTH, HEIGHT, LEFT, BOTTOM, TOP, RIGHT = 760, 300, 60, 50, 30, 20
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")
FONT = 'font-family="sans-serif" font-size="11"'
CHAR_W = 7.0  # about the widest a character of FONT takes on average (sans-serif at 11 px: 6 to 7)
LEGEND_ROW = 16


def _frame(title: str, body: list[str], height: int = HEIGHT) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">'
            f'<rect width="{WIDTH}" height="{height}" fill="white"/>'
            f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-family="sans-serif" font-size="14">'
            f'{escape(title)}</text>' + "".join(body) + "</svg>")


def _legend(names: list[str]) -> tuple[list[str], int]:
    """The legend's items, in rows as wide as the plot (a name too long for a row is cut, in full in its
    tooltip); and how far below one row the plot must start."""
    out, x, y, room = [], LEFT + 10, TOP, WIDTH - RIGHT - LEFT - 10
    for i, name in enumerate(names):
        shown = name if 14 + CHAR_W * len(name) <= room else name[:int((room - 14) / CHAR_W) - 1] + "…"
        width = 14 + CHAR_W * len(shown)
        if x > LEFT + 10 and x + width > WIDTH - RIGHT:
            x, y = LEFT + 10, y + LEGEND_ROW
        out.append(f'<g class="legend"><title>{escape(name)}</title>'
                   f'<rect x="{x}" y="{y}" width="10" height="10" fill="{COLOURS[i % len(COLOURS)]}"/>'
                   f'<text x="{x + 14}" y="{y + 9}" {FONT}>{escape(shown)}</text></g>')
        x += width + 16
    return out, y - TOP


def _axis_top(largest: float, log: bool) -> float:
    """Where the y axis ends: the largest value on a log axis; on a linear one, the first whole tick at or
    above it (see `_step`)."""
    if log:
        return largest
    step = _step(largest)
    return step * math.ceil(largest / step)


def _step(largest: float) -> float:
    """A linear axis's tick step: 1, 2, 2.5 or 5 times a power of ten, a whole number (the values are
    counts), giving at most six steps up to `largest`."""
    magnitude = 10 ** math.floor(math.log10(max(1.0, largest / 6)))
    return next(step for step in (magnitude, 2 * magnitude, 2.5 * magnitude, 5 * magnitude, 10 * magnitude)
                if step == int(step) and step * 6 >= largest)


def _y_axis(top_value: float, plot_h: float, log: bool = False, below: int = 0) -> list[str]:
    """`top_value`: the axis's end, from `_axis_top`."""
    top = TOP + 15 + below  # the plot's top line: under the legend
    out = [f'<line x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{top + plot_h}" stroke="black"/>']
    step = _step(top_value)
    ticks = [(10 ** k, _scaled(10 ** k, top_value, True)) for k in range(int(math.log10(max(1.0, top_value))) + 1)] \
        if log else [(step * k, step * k / top_value) for k in range(round(top_value / step) + 1)]
    for value, fraction in ticks:
        y = top + plot_h - plot_h * fraction
        out.append(f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{value:,.0f}</text>'
                   f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
    return out


def _scaled(value: float, top_value: float, log: bool) -> float:
    """`value` as a fraction of the axis up to `top_value`; a log axis starts at 1 below 1."""
    if log:
        return math.log10(1 + value) / math.log10(1 + top_value)
    return value / top_value


def grouped_bars(title: str, categories: list[str], series: dict[str, list[float]], y_label: str = "",
                 log: bool = False) -> str:
    """One group of bars per category, one bar per series (side by side); `log`: a log10 axis, so
    that a tail of a few among thousands still shows."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM - 15
    top_value = _axis_top(max([1.0, *(v for values in series.values() for v in values)]), log)
    group_w = plot_w / max(1, len(categories))
    bar_w = group_w * 0.8 / max(1, len(series))
    legend, below = _legend(list(series))
    base = TOP + 15 + below + plot_h  # the plot's bottom line
    body = _y_axis(top_value, plot_h, log, below) + legend
    for s, (name, values) in enumerate(series.items()):
        for c, value in enumerate(values):
            h = plot_h * _scaled(value, top_value, log)
            x = LEFT + c * group_w + group_w * 0.1 + s * bar_w
            body.append(f'<rect class="bar" x="{x:.1f}" y="{base - h:.1f}" width="{bar_w:.1f}"'
                        f' height="{h:.1f}" fill="{COLOURS[s % len(COLOURS)]}"><title>{escape(name)}:'
                        f' {escape(categories[c])}: {value:,.0f}</title></rect>')
    for c, category in enumerate(categories):
        body.append(f'<text x="{LEFT + c * group_w + group_w / 2:.1f}" y="{base + 18}"'
                    f' text-anchor="middle" {FONT}>{escape(category)}</text>')
    body.append(f'<text x="{WIDTH / 2}" y="{HEIGHT + below - 8}" text-anchor="middle" {FONT}>{escape(y_label)}</text>')
    return _frame(title, body, HEIGHT + below)


def lines_over_time(title: str, times: list[str], series: dict[str, list[float]]) -> str:
    """One polyline per series over the same time buckets; `times` label the buckets."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM - 15
    top_value = _axis_top(max([1.0, *(v for values in series.values() for v in values)]), False)
    step = plot_w / max(1, len(times) - 1)
    legend, below = _legend(list(series))
    base = TOP + 15 + below + plot_h  # the plot's bottom line
    body = _y_axis(top_value, plot_h, below=below) + legend
    for s, (name, values) in enumerate(series.items()):
        points = " ".join(f"{LEFT + i * step:.1f},{base - plot_h * v / top_value:.1f}" for i, v in enumerate(values))
        body.append(f'<polyline class="line" fill="none" stroke="{COLOURS[s % len(COLOURS)]}" stroke-width="2"'
                    f' points="{points}"><title>{escape(name)}</title></polyline>')
    every = max(1, len(times) // 8)
    for i in range(0, len(times), every):
        body.append(f'<text x="{LEFT + i * step:.1f}" y="{base + 18}" text-anchor="middle" {FONT}>'
                    f'{escape(times[i])}</text>')
    return _frame(title, body, HEIGHT + below)


def timeline(title: str, rows: dict[str, list[tuple[float, float, str]]], start: float, end: float,
             ticks: list[tuple[float, str]]) -> str:
    """One row per name, a bar per (from, to, label) interval between `start` and `end`."""
    row_h = 22
    height = TOP + 30 + row_h * max(1, len(rows)) + 30
    left = 110
    plot_w = WIDTH - left - RIGHT
    span = max(1.0, end - start)
    body = []
    for r, (name, intervals) in enumerate(rows.items()):
        y = TOP + 20 + r * row_h
        body.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end" {FONT}>{escape(name)}</text>'
                    f'<line x1="{left}" y1="{y + 10}" x2="{WIDTH - RIGHT}" y2="{y + 10}" stroke="#ccc"/>')
        for a, b, label in intervals:
            x = left + plot_w * (a - start) / span
            w = max(2.0, plot_w * (b - a) / span)
            body.append(f'<rect class="outage" x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="14" fill="#d62728">'
                        f'<title>{escape(name)}: {escape(label)}</title></rect>')
    axis_y = TOP + 20 + row_h * max(1, len(rows)) + 14
    for at, label in ticks:
        body.append(f'<text x="{left + plot_w * (at - start) / span:.1f}" y="{axis_y}" text-anchor="middle"'
                    f' {FONT}>{escape(label)}</text>')
    return _frame(title, body, height)
