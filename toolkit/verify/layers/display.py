"""The layer level on the terminal (boundaries x artifacts table, first divergences) and as
verify_layers.png: SQNR against depth, one line per artifact x runtime."""

from __future__ import annotations

from pathlib import Path

from toolkit.common import atomic
from toolkit.verify.cells import FAIL, PASS, UNAVAILABLE
from toolkit.verify.tables import table

EXACT_DB = 160.0  # where an exact boundary (no error at all) is drawn; fp32 noise is ~120-150


def _columns(report: dict) -> list[dict]:
    return [c for c in report["cells"] if c["status"] in (PASS, FAIL)]


def _value(row: dict, precision: str) -> str:
    """SQNR in dB (or exact), int8 max error in steps ('fp': a float tensor of an int8 model),
    FAIL mark; '-' when not found."""
    m = row.get("metrics")
    if m is None:
        return "-"
    text = "exact" if m["exact"] else "n/a" if m["sqnr_db"] is None else f"{m['sqnr_db']:.1f}"
    if m.get("max_steps") is not None:
        text += f" {m['max_steps']:.1f}st"
    elif precision == "int8":
        text += " fp"
    return text + (" FAIL" if row.get("status") == FAIL else "")


def layer_table(report: dict) -> str:
    """One row per boundary, one column per (artifact, runtime): SQNR dB vs Keras and, for int8
    tensors, the max error in steps of their scale."""
    columns = _columns(report)
    rows = [["#", "layer", "kind", *[f"{c['format']} {c['runtime']}" for c in columns]]]
    for b in report["boundaries"]:
        row = [str(b["depth"]), b["layer"], b["kind"]]
        for c in columns:
            row.append(_value(c["boundaries"][b["depth"]], c["precision"]))
        rows.append(row)
    return table(rows, [True, False, False, *[True] * len(columns)])


def _ops(span: dict) -> str:
    after = span["after"] or "the input"
    return f"ops since {after}: {', '.join(span['ops']) or 'none'}"


def _figures(m: dict) -> str:
    sqnr = "exact" if m["exact"] else f"SQNR {m['sqnr_db']:.1f} dB"
    text = f"{sqnr}, cosine {m['cosine']:.5f}, max abs {m['max_abs']:.3g}"
    if m.get("max_steps") is not None:
        text += f" = {m['max_steps']:.1f} steps (rms {m['rms_steps']:.2f})"
    return text


def divergence_lines(report: dict) -> list[str]:
    """Per artifact x runtime: its first divergence (or that there is none), the largest SQNR
    drop, and the boundaries the converter fused away."""
    lines = []
    for c in report["cells"]:
        head = f"{c['format']} on {c['runtime']} ({c['precision']})"
        if c["status"] == UNAVAILABLE:
            continue  # said once per runtime under the tables
        if c["status"] not in (PASS, FAIL):
            lines.append(f"{head}: {c['status']}: {c.get('reason', '')}")
            continue
        first = c["first_divergence"]
        if first is None:
            lines.append(f"{head}: every boundary within tolerance")
        else:
            lines.append(
                f"{head}: first divergence at #{first['depth']} {first['layer']} "
                f"({first['kind']}): {first['reason']}; {_figures(first['metrics'])}"
            )
            lines.append(f"    {_ops(first)}")
        drop = c.get("largest_drop")
        if drop is not None and (first is None or drop["layer"] != first["layer"]):
            lines.append(
                f"    largest loss at #{drop['depth']} {drop['layer']} ({drop['kind']}): "
                f"-{drop['sqnr_drop_db']:.1f} dB to {_figures(drop['metrics'])}; {_ops(drop)}"
            )
        absent = [r for r in c["boundaries"] if "metrics" not in r]
        for r in absent:
            lines.append(f"    {r['layer']}: {r['reason']}")
    return lines


def plot_layers(report: dict, out_png: Path, title: str) -> bool:
    """SQNR (dB) against boundary depth, one line per artifact x runtime, failing boundaries
    marked; written atomically. False when no cell has numbers."""
    columns = _columns(report)
    if not columns:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [b["layer"] for b in report["boundaries"]]
    fig, ax = plt.subplots(figsize=(max(8.0, 0.22 * len(names) + 3), 5), constrained_layout=True)
    for c in columns:
        points = [
            (r["depth"], EXACT_DB if r["metrics"]["exact"] else r["metrics"]["sqnr_db"])
            for r in c["boundaries"]
            if "metrics" in r and (r["metrics"]["exact"] or r["metrics"]["sqnr_db"] is not None)
        ]
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        (line,) = ax.plot(xs, ys, marker=".", label=f"{c['format']} / {c['runtime']}")
        bad = [(r["depth"], y) for r, y in _failing(c, dict(points))]
        if bad:
            bx, by = zip(*bad, strict=True)
            ax.plot(bx, by, "x", color=line.get_color(), markersize=9, markeredgewidth=2)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=90, fontsize=7)
    ax.set_ylabel("SQNR vs Keras (dB)")
    ax.set_title(f"{title}: boundary tensors vs Keras (x: outside tolerance; {EXACT_DB:g}: exact)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    with atomic.atomic_path(out_png) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return True


def _failing(c: dict, ys: dict[int, float]) -> list[tuple[dict, float]]:
    return [
        (r, ys[r["depth"]]) for r in c["boundaries"] if r["status"] == FAIL and r["depth"] in ys
    ]
