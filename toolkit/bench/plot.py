"""bench.png: p50 latency against top-1, one point per artifact x runtime.

Colour is the runtime and marker shape the format, both named in a legend beside the axes
(with each format's file size), so no text sits next to the points to overlap.
"""

from __future__ import annotations

from pathlib import Path

MB = 1 << 20
MARKERS = "osD^vP*Xph<>"  # one shape per format, in the order the formats appear


def plot(result: dict, path: Path) -> None:
    """Write `figure(result)` to `path` as PNG."""
    import matplotlib.pyplot as plt

    fig = figure(result)
    fig.savefig(path, format="png")
    plt.close(fig)


def figure(result: dict):
    """Scatter of the ok rows at the smallest batch benched (matplotlib Figure, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    batch = min(result["protocol"]["batches"])
    ok = [r for r in result["rows"] if r["status"] == "ok" and r["batch"] == batch]
    rows = [r for r in ok if r.get("top1") is not None]
    runtimes = sorted({r["runtime"] for r in rows})
    formats = list(dict.fromkeys(r["format"] for r in rows))
    colors = dict(zip(runtimes, plt.get_cmap("tab10").colors, strict=False))
    markers = {f: MARKERS[i % len(MARKERS)] for i, f in enumerate(formats)}
    sizes = {r["format"]: r["size_bytes"] for r in rows}
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=120)
    for row in rows:
        ax.scatter(
            row["p50_ms"],
            100 * row["top1"],
            s=60,
            marker=markers[row["format"]],
            color=colors[row["runtime"]],
            alpha=0.75,
            edgecolors="black",
            linewidths=0.5,
        )
    handles = [Patch(color=colors[r], label=r) for r in runtimes]  # a swatch, not a marker
    handles += [
        Line2D(
            [],
            [],
            linestyle="",
            marker=markers[f],
            color="grey",
            markeredgecolor="black",
            label=f"{f} ({sizes[f] / MB:.1f} MB)",
        )  # fmt: skip
        for f in formats
    ]
    if rows:
        ax.set_xscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")  # 4 and 6, not 4x10^0
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(plain)
        ax.tick_params(axis="x", which="minor", labelsize=7)
        ax.legend(
            handles=handles,
            title="colour: runtime; shape: format",
            fontsize=8,
            title_fontsize=8,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0.0,
        )
    missing = len(ok) - len(rows)
    note = f"\n{missing} timed rows without top-1 (no test data) not shown" if missing else ""
    ax.set_ylim(0, 100)
    ax.set_xlabel(f"p50 latency per call, batch {batch} (ms, log scale){note}")
    ax.set_ylabel("top-1 on the test split (%)")
    ax.set_title(f"{result['model']} {result['preset']}: latency vs accuracy")
    ax.grid(True, alpha=0.3, which="both")
    fig.tight_layout()
    return fig
