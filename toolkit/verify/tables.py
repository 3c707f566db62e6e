"""Terminal tables of a verify report: ops x runtimes, artifacts vs Keras, int8 layers."""

from __future__ import annotations

from collections.abc import Sequence

from toolkit.verify.cells import FAIL, FAILING, NOT_APPLICABLE, PASS, UNAVAILABLE

MARK = {FAIL: " FAIL", "error": " ERROR"}


def table(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """Rows of strings as aligned columns; `right[i]` right-aligns column i."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _op_value(c: dict) -> str:
    """fp32: max abs error; int8: max abs error in output quantization steps; or the status."""
    if c["status"] not in (PASS, FAIL):
        return {UNAVAILABLE: "unavailable", NOT_APPLICABLE: "-"}.get(c["status"], "ERROR")
    m = c["metrics"]
    if c["precision"] == "int8":
        steps = m.get("min_steps")
        text = "n/a" if steps is None else f"{steps:.2f} st"
    else:
        text = "0" if m["max_abs"] == 0 else f"{m['max_abs']:.1e}"
    return text + MARK.get(c["status"], "")


def op_table(report: dict) -> str:
    """One row per (op, shape), one column per (runtime, precision) that has an artifact."""
    cells = report["cells"]
    columns = [
        (r, p)
        for r in report["runtimes"]
        for p in report["precisions"]
        if any(
            c["runtime"] == r and c["precision"] == p and c["status"] != NOT_APPLICABLE
            for c in cells
        )
    ]
    keys = list(dict.fromkeys((c["op"], c["shape"]) for c in cells))
    index = {(c["op"], c["shape"], c["runtime"], c["precision"]): c for c in cells}
    rows = [["op", "shape", *[f"{r} {p}" for r, p in columns]]]
    for op, shape in keys:
        row = [op, shape]
        for r, p in columns:
            c = index.get((op, shape, r, p))
            row.append("missing" if c is None else _op_value(c))
        rows.append(row)
    return table(rows, [False, False, *[True] * len(columns)])


def model_table(report: dict) -> str:
    """One row per (artifact, runtime): logits error vs Keras, agreement, accuracy."""
    rows = [
        [
            "format",
            "runtime",
            "max abs",
            "mean abs",
            "cosine",
            "top-1 agree",
            "top-1",
            "delta",
            "status",
        ]
    ]
    for c in report["cells"]:
        m = c.get("metrics")
        if m is None:
            rows.append([c["format"], c["runtime"], *["-"] * 6, c["status"]])
            continue
        rows.append(
            [
                c["format"],
                c["runtime"],
                f"{m['max_abs']:.2e}",
                f"{m['mean_abs']:.2e}",
                f"{m['cosine']:.6f}",
                f"{m['top1_agreement']:.1%}",
                f"{m['top1_accuracy']:.1%}",
                f"{m['top1_delta']:+.1%}",
                c["status"],
            ]
        )
    return table(rows, [False, False, True, True, True, True, True, True, False])


def attribution_table(report: dict) -> str:
    """The layers with the largest int8 error in units of their quantization step."""
    rows = [["#", "op", "tensor", "rmse/scale", "max abs err", "scale"]]
    for i, layer in enumerate(report["top"], 1):
        rows.append(
            [
                str(i),
                layer["op_name"],
                _short(layer["tensor_name"]),
                _num(layer.get("rmse/scale"), ".2f"),
                _num(layer.get("max_abs_error"), ".3g"),
                _num(layer.get("scale"), ".3g"),
            ]
        )
    return table(rows, [True, False, False, True, True, True])


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3) :]


def _num(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def unavailable_reasons(cells: list[dict]) -> list[str]:
    """Each runtime's unavailability reason, once."""
    seen: dict[str, str] = {}
    for c in cells:
        if c["status"] == UNAVAILABLE:
            seen.setdefault(c["runtime"], c.get("reason", ""))
    return [f"{runtime}: {reason}" for runtime, reason in seen.items()]


def failing(cells: list[dict]) -> list[dict]:
    """The cells that failed or could not be computed."""
    return [c for c in cells if c["status"] in FAILING]
