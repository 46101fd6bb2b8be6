"""The few pieces the harness's charts share: axis ticks, linear scales and SVG text.

The charts (``attachments.memory_chart_svg``, ``harness.app.aggregate.to_svg``) are SVG
documents written here, without a plotting library: a report or browser renders them,
and a process that draws one pays microseconds instead of a plotting library's import.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

FONT = "DejaVu Sans, Arial, sans-serif"
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
"""One colour per model, in order of first appearance (the usual ten-colour categorical palette)."""
DASHES = ("", "6 3", "2 3", "6 3 2 3")
"""Line styles per implementation: solid, dashed, dotted, dash-dot."""


def text(value: object) -> str:
    """``value`` as SVG text content or attribute value."""
    return html.escape(str(value), quote=True)


def tick_step(span: float, about: int = 5) -> float:
    """1, 2, 2.5 or 5 times a power of ten, giving about ``about`` ticks over ``span``."""
    raw = max(span, 1e-12) / about
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))


def ticks(lo: float, hi: float, about: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (the first <= lo, the last >= hi)."""
    step = tick_step(hi - lo, about)
    first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    if last <= first:
        last = first + 1
    return [k * step for k in range(first, last + 1)]


@dataclass(frozen=True)
class Scale:
    """Data values [lo, hi] onto pixels [start, end] (``end`` < ``start`` for a y axis)."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        if self.hi == self.lo:
            return (self.start + self.end) / 2
        return self.start + (value - self.lo) / (self.hi - self.lo) * (self.end - self.start)


def label(value: float) -> str:
    """A tick label: thousands separated, no trailing zeros."""
    return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:,.0f}"
