"""Inline SVG charts for report.html: numbers in, an `<svg>` string out, with no plotting
library (the report needs neither matplotlib nor a network) and a `<title>` on every mark, which
a browser shows on hover."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

# matplotlib's tab10, so colours read as in the project's other plots (bench.png)
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
FONT = 12


def color(i: int) -> str:
    """The i-th colour of the palette (cycled)."""
    return PALETTE[i % len(PALETTE)]


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(label)}" '
        f'font-size="{FONT}" font-family="system-ui, sans-serif">' + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", **attrs: object) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _nice_step(span: float, ticks: int = 5) -> float:
    """A 1-2-5 step giving about `ticks` ticks over `span`."""
    raw = span / max(ticks, 1)
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def linear_ticks(low: float, high: float, ticks: int = 5) -> list[float]:
    """Round tick values covering [low, high]."""
    step = _nice_step(high - low, ticks)
    first = math.ceil(low / step - 1e-9) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks per decade within [low, high] (low > 0)."""
    found = []
    for decade in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for m in (1, 2, 5):
            value = m * 10.0**decade
            if low <= value <= high:
                found.append(value)
    return found or [low, high]


def _number(value: float) -> str:
    return f"{value:g}" if abs(value) >= 0.01 or value == 0 else f"{value:.0e}"


@dataclass(frozen=True)
class Point:
    """One file in one runtime: latency, accuracy and size; `tags` names the targets it is
    the pick of (drawn ringed and labelled)."""

    x_ms: float
    top1: float  # 0-1
    size_bytes: int
    group: str  # the runtime: the point's colour
    title: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Frame:
    """A plot area at (left, top): a log x axis and a linear y axis over their ranges."""

    left: float
    top: float
    width: float
    height: float
    x_range: tuple[float, float]  # log axis
    y_range: tuple[float, float]

    def px(self, v: float) -> float:
        low, high = (math.log10(x) for x in self.x_range)
        return self.left + self.width * (math.log10(v) - low) / (high - low)

    def py(self, v: float) -> float:
        low, high = self.y_range
        return self.top + self.height * (1 - (v - low) / (high - low))


def _scatter_axes(f: _Frame, canvas_height: float) -> list[str]:
    """The plot area, its grid lines and tick labels, and both axis titles."""
    left, top, plot_w, plot_h = f.left, f.top, f.width, f.height
    body = [
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#999"/>'
    ]
    for t in log_ticks(*f.x_range):
        body.append(
            f'<line x1="{f.px(t):.1f}" x2="{f.px(t):.1f}" y1="{top}" y2="{top + plot_h}" '
            'stroke="#eee"/>'
        )
        body.append(_text(f.px(t), top + plot_h + 16, _number(t), "middle"))
    for t in linear_ticks(*f.y_range):
        body.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{f.py(t):.1f}" y2="{f.py(t):.1f}" '
            'stroke="#eee"/>'
        )
        body.append(_text(left - 6, f.py(t) + 4, f"{t:g}", "end"))
    body.append(
        _text(left + plot_w / 2, canvas_height - 8, "p50 latency per image, ms (log)", "middle")
    )
    body.append(
        _text(
            14,
            top + plot_h / 2,
            "test top-1, %",
            "middle",
            transform=f"rotate(-90 14 {top + plot_h / 2:.0f})",
        )
    )
    return body


def _scatter_marks(f: _Frame, points: Sequence[Point], groups: list[str]) -> list[str]:
    """A circle per point (area by size, colour by group), then a ring and label per pick."""
    body = []
    largest = max(p.size_bytes for p in points) or 1
    ordered = sorted(points, key=lambda p: -p.size_bytes)  # small circles drawn on top
    for p in ordered:
        r = 4 + 14 * math.sqrt(p.size_bytes / largest)
        body.append(
            f'<circle class="mark" cx="{f.px(p.x_ms):.1f}" cy="{f.py(100 * p.top1):.1f}" '
            f'r="{r:.1f}" fill="{color(groups.index(p.group))}" fill-opacity="0.7" '
            f'stroke="#222" stroke-width="0.6"><title>{escape(p.title)}</title></circle>'
        )
    for p in ordered:
        if not p.tags:
            continue
        r = 4 + 14 * math.sqrt(p.size_bytes / largest) + 4
        cx, cy = f.px(p.x_ms), f.py(100 * p.top1)
        body.append(
            f'<circle class="pick" cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill="none" '
            'stroke="#000" stroke-width="2"/>'
        )
        body.append(_text(cx + r + 3, cy - r + 2, ", ".join(p.tags), font_weight="bold"))
    return body


def _scatter_legend(lx: float, top: float, groups: list[str]) -> list[str]:
    """The runtimes' colours, the pick's ring and what a circle's area means."""
    body = [_text(lx, top + 12, "runtime", font_weight="bold")]
    for i, name in enumerate(groups):
        y = top + 30 + 18 * i
        body.append(
            f'<circle cx="{lx + 6}" cy="{y - 4}" r="6" fill="{color(i)}" '
            'fill-opacity="0.7" stroke="#222" stroke-width="0.6"/>'
        )
        body.append(_text(lx + 18, y, name))
    y = top + 30 + 18 * len(groups) + 14
    body.append(
        f'<circle cx="{lx + 6}" cy="{y - 4}" r="9" fill="none" stroke="#000" stroke-width="2"/>'
    )
    body.append(_text(lx + 20, y, "a pick (its targets)"))
    body.append(_text(lx, y + 22, "circle area: file size"))
    return body


def scatter(points: Sequence[Point], reference_top1: float | None = None) -> str:
    """Top-1 (%) against p50 latency (ms, log axis), circle area by file size, colour by
    runtime, the picks ringed and named; a dashed line at the float model's top-1."""
    width, height, left, right, top, bottom = 860, 430, 64, 190, 16, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [p.x_ms for p in points]
    ys = [100 * p.top1 for p in points] + (
        [100 * reference_top1] if reference_top1 is not None else []
    )
    y_pad = max(1.0, 0.1 * (max(ys) - min(ys)))
    frame = _Frame(
        left,
        top,
        plot_w,
        plot_h,
        (min(xs) / 1.4, max(xs) * 1.4),
        (min(ys) - y_pad, max(ys) + y_pad),
    )
    body = _scatter_axes(frame, height)
    if reference_top1 is not None:
        y = frame.py(100 * reference_top1)
        body.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#444" '
            'stroke-dasharray="5 4"/>'
        )
        body.append(_text(left + 4, y - 4, "float model", fill="#444"))
    groups = list(dict.fromkeys(p.group for p in points))
    body += _scatter_marks(frame, points, groups)
    body += _scatter_legend(left + plot_w + 18, top, groups)
    return _svg(width, height, body, "test top-1 against latency, circle area by file size")


def heatmap(matrix: Sequence[Sequence[int]], names: Sequence[str]) -> str:
    """A confusion matrix: row i the images of class i, column j those predicted j; a cell's
    shade is its share of the row, its number the count (shown up to 20 classes)."""
    n = len(names)
    cell = max(10, min(44, 440 // max(n, 1)))
    label_w = min(150, 8 + 7 * max((len(s) for s in names), default=4))
    left, top = label_w + 28, label_w + 24
    width, height = left + n * cell + 10, top + n * cell + 10
    body = []
    for i, row in enumerate(matrix):
        total = sum(row) or 1
        for j, count in enumerate(row):
            share = count / total
            fill = f"rgba({'44,160,44' if i == j else '214,39,40'},{0.08 + 0.92 * share:.3f})"
            x, y = left + j * cell, top + i * cell
            body.append(
                f'<rect class="mark" x="{x}" y="{y}" width="{cell}" height="{cell}" '
                f'fill="{fill if count else "#fafafa"}" stroke="#fff"><title>'
                f"{escape(f'true {names[i]}, predicted {names[j]}: {count} ({share:.0%})')}"
                "</title></rect>"
            )
            if n <= 20 and count:
                body.append(
                    _text(
                        x + cell / 2,
                        y + cell / 2 + 4,
                        str(count),
                        "middle",
                        fill="#fff" if share > 0.55 else "#111",
                    )
                )
    for i, name in enumerate(names):
        short = name if len(name) <= 20 else name[:19] + "…"
        body.append(_text(left - 6, top + i * cell + cell / 2 + 4, short, "end"))
        x = left + i * cell + cell / 2 + 4
        body.append(_text(x, top - 6, short, "start", transform=f"rotate(-60 {x:.1f} {top - 6})"))
    body.append(
        _text(
            12,
            top + n * cell / 2,
            "true class",
            "middle",
            transform=f"rotate(-90 12 {top + n * cell / 2:.0f})",
        )
    )
    body.append(_text(left + n * cell / 2, 14, "predicted class", "middle"))
    return _svg(width, height, body, "confusion matrix of the float model")


def grouped_bars(names: Sequence[str], series: dict[str, Sequence[float]]) -> str:
    """Per-class accuracy (%): one bar per series (a file) in each class's group."""
    label_w = min(150, 8 + 7 * max((len(s) for s in names), default=4))
    left, top, plot_w, bar = label_w + 10, 12 + 18 * len(series), 520, 9
    group_h = bar * len(series) + 8
    height = top + group_h * len(names) + 34
    width = left + plot_w + 60
    body = []
    for t in range(0, 101, 20):
        x = left + plot_w * t / 100
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" '
            f'y2="{top + group_h * len(names)}" stroke="#ddd"/>'
        )
        body.append(_text(x, top + group_h * len(names) + 16, f"{t}%", "middle"))
    for k, label in enumerate(series):  # the legend, one line per series
        y = 6 + 18 * k
        body.append(f'<rect x="{left}" y="{y}" width="12" height="12" fill="{color(k)}"/>')
        body.append(_text(left + 16, y + 10, label))
    for i, name in enumerate(names):
        y0 = top + i * group_h + 4
        body.append(_text(left - 6, y0 + bar * len(series) / 2 + 4, name, "end"))
        for k, (label, values) in enumerate(series.items()):
            value = values[i]
            w = plot_w * (0 if math.isnan(value) else value)
            body.append(
                f'<rect class="mark" x="{left}" y="{y0 + k * bar}" width="{max(w, 0.5):.1f}" '
                f'height="{bar - 1}" fill="{color(k)}"><title>'
                f"{escape(f'{name}: {value:.1%} ({label})')}</title></rect>"
            )
    body.append(_text(left + plot_w / 2, height - 2, "test accuracy of the class", "middle"))
    return _svg(width, height, body, "per-class accuracy")


def layer_errors(values: Sequence[float], titles: Sequence[str], rounding: float) -> str:
    """rmse/scale per layer in graph order; a dashed line where rounding alone would be."""
    width, height, left, top, bottom = 860, 300, 56, 14, 40
    plot_w, plot_h = width - left - 14, height - top - bottom
    high = max([*values, rounding * 2]) * 1.08
    n = max(len(values), 1)
    step = plot_w / n

    def py(v: float) -> float:
        return top + plot_h * (1 - v / high)

    body = [
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#999"/>'
    ]
    for t in linear_ticks(0, high):
        body.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
            'stroke="#eee"/>'
        )
        body.append(_text(left - 6, py(t) + 4, f"{t:g}", "end"))
    for i, (value, title) in enumerate(zip(values, titles, strict=True)):
        fill = "#d62728" if value > 3 * rounding else "#1f77b4"
        body.append(
            f'<rect class="mark" x="{left + i * step:.2f}" y="{py(value):.1f}" '
            f'width="{max(step * 0.8, 0.8):.2f}" height="{max(plot_h * value / high, 0.5):.1f}" '
            f'fill="{fill}"><title>{escape(f"{title}: {value:.2f}")}</title></rect>'
        )
    y = py(rounding)
    body.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
        'stroke="#444" stroke-dasharray="5 4"/>'
    )
    body.append(_text(left + plot_w - 4, y - 4, f"rounding alone ({rounding:.2f})", "end"))
    body.append(
        _text(
            left + plot_w / 2,
            height - 10,
            f"{len(values)} quantized tensors, in graph order (red: over 3x rounding)",
            "middle",
        )
    )
    body.append(
        _text(
            14,
            top + plot_h / 2,
            "rmse / scale",
            "middle",
            transform=f"rotate(-90 14 {top + plot_h / 2:.0f})",
        )
    )
    return _svg(width, height, body, "int8 error per layer")
