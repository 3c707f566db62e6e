"""history.png: the training curves of a run (loss and top-1 per epoch, train and validation).

Read from the run's history.csv (Keras' CSVLogger), so a resumed run plots every epoch; the
best validation top-1 is marked, since that epoch's weights are what early stopping keeps.
"""

from __future__ import annotations

import csv
from pathlib import Path

from toolkit.common import atomic

CURVES = (  # (panel title, y label, [(history column, legend label), ...])
    ("loss", "cross-entropy", [("loss", "train"), ("val_loss", "validation")]),
    ("top-1 accuracy", "top-1 (%)", [("accuracy", "train"), ("val_accuracy", "validation")]),
)


def read_history(path: Path) -> dict[str, list[float]]:
    """Columns of history.csv as float lists keyed by their header (empty when absent)."""
    if not path.is_file():
        return {}
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    columns: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            try:
                columns.setdefault(key, []).append(float(value))
            except (TypeError, ValueError):
                columns.setdefault(key, []).append(float("nan"))
    return columns


def plot_history(history_csv: Path, out_png: Path, title: str) -> bool:
    """Write the curves of `history_csv` to `out_png` atomically; False when there is no epoch."""
    columns = read_history(history_csv)
    epochs = [int(e) + 1 for e in columns.get("epoch", [])]
    if not epochs:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    for ax, (panel, ylabel, series) in zip(axes, CURVES, strict=True):
        scale = 100.0 if "accuracy" in panel else 1.0
        for key, label in series:
            if key in columns:
                ax.plot(epochs, [v * scale for v in columns[key]], marker=".", label=label)
        ax.set_title(panel)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if scale == 100.0:
            ax.set_ylim(0, 100)
            val = columns.get("val_accuracy")
            if val:
                best = max(range(len(val)), key=lambda i: val[i])
                ax.annotate(
                    f"best {val[best] * 100:.1f}% (epoch {epochs[best]})",
                    (epochs[best], val[best] * 100),
                    xytext=(0.35, 0.08),
                    textcoords="axes fraction",
                    arrowprops={"arrowstyle": "->", "alpha": 0.6},
                )
        ax.legend(loc="best")
    fig.suptitle(title)
    try:
        atomic.write_with(out_png, lambda tmp: fig.savefig(tmp, format="png", dpi=100))
    finally:
        plt.close(fig)
    return True
