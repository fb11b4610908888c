"""The what-if report's plots: a linear axis's labels say the value at their height."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from shadowtwin.svg_plots import grouped_bars, lines_over_time

SVG = "{http://www.w3.org/2000/svg}"


def y_labels(svg: str) -> list[tuple[float, float]]:
    """(label's value, label's y) of each tick, from the bottom up."""
    plot = ET.fromstring(svg)
    return [(float(t.text.replace(",", "")), float(t.get("y")) - 4) for t in plot.iter(f"{SVG}text")
            if t.get("text-anchor") == "end"]


@pytest.mark.parametrize("largest", [1, 3, 7, 11, 23, 101, 1234])
def test_ticks_are_round_evenly_spaced_and_where_their_value_is(largest):
    """Before: five ticks at quarters of the largest value, labelled rounded: 0, 2, 4, 5, 7 for 7, the 2 drawn
    at 1.75 and the gaps uneven."""
    svg = lines_over_time("t", ["00", "01", "02"], {"promoted": [0, largest, largest / 2]})
    ticks = y_labels(svg)
    values = [v for v, _ in ticks]
    steps = {b - a for a, b in zip(values, values[1:])}
    assert values[0] == 0 and len(steps) == 1 and values[-1] >= largest > values[-2], values
    [step] = steps
    assert step == int(step) and str(int(step)).rstrip("0") in ("1", "2", "25", "5"), step
    (zero, zero_y), (top, top_y) = ticks[0], ticks[-1]
    line = ET.fromstring(svg).find(f"{SVG}polyline")
    peak_y = float(line.get("points").split()[1].split(",")[1])
    assert peak_y == pytest.approx(zero_y + (top_y - zero_y) * largest / top, abs=0.06), "the line's peak at its value"


def test_a_bar_reaches_the_tick_of_its_value():
    svg = grouped_bars("t", ["a", "b"], {"baseline": [7, 4]})
    ticks = dict(y_labels(svg))
    assert sorted(ticks) == [0, 2, 4, 6, 8]
    bars = [r for r in ET.fromstring(svg).iter(f"{SVG}rect") if r.get("class") == "bar"]
    assert float(bars[1].get("y")) == pytest.approx(ticks[4], abs=0.06)
