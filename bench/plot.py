"""bench.png: p50 latency against top-1, one point per artifact x runtime, size as marker area."""

from __future__ import annotations

from pathlib import Path

MB = 1 << 20


def plot(result: dict, path: Path) -> None:
    """Scatter of the ok rows at the smallest batch benched (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batch = min(result["protocol"]["batches"])
    rows = [r for r in result["rows"] if r["status"] == "ok" and r["batch"] == batch]
    runtimes = sorted({r["runtime"] for r in rows})
    colors = dict(zip(runtimes, plt.get_cmap("tab10").colors, strict=False))
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    for row in rows:
        top1 = row.get("top1")
        y = 100 * top1 if top1 is not None else 0.0
        ax.scatter(
            row["p50_ms"],
            y,
            s=20 + 400 * row["size_bytes"] / max(r["size_bytes"] for r in rows),
            color=colors[row["runtime"]],
            alpha=0.6,
            edgecolors="black",
            linewidths=0.5,
        )
        ax.annotate(
            f"{row['format']}\n{row['size_bytes'] / MB:.1f} MB",
            (row["p50_ms"], y),
            fontsize=7,
            xytext=(5, 3),
            textcoords="offset points",
        )
    for runtime in runtimes:
        ax.scatter([], [], color=colors[runtime], label=runtime)
    if rows:
        ax.set_xscale("log")
        ax.legend(title="runtime (marker area ~ file size)", fontsize=8)
    ax.set_xlabel(f"p50 latency per call, batch {batch} (ms, log scale)")
    ax.set_ylabel("top-1 on the test split (%)")
    ax.set_title(f"{result['model']} {result['preset']}: latency vs accuracy")
    ax.grid(True, alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
