"""One report cell: an artifact run in one runtime, compared with its reference, and judged."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from toolkit.common.errors import first_line
from toolkit.runtimes import VERIFIED_RUNTIMES, RuntimeUnavailable, Session, open_artifact
from toolkit.verify.error_metrics import compare
from toolkit.verify.quantscale import output_scale
from toolkit.verify.rules import Rule, Tolerances, judge

PASS, FAIL, UNAVAILABLE, NOT_APPLICABLE, ERROR = "pass", "fail", "unavailable", "n/a", "error"
FAILING = (FAIL, ERROR)


def cell(
    base: dict,
    runtime: str,
    precision: str,
    artifact: str | None,
    status: str,
    reason: str | None = None,
    **extra: object,
) -> dict:
    """A report cell: the identifying fields of `base`, then runtime, precision and status."""
    out = {**base, "runtime": runtime, "precision": precision, "artifact": artifact}
    out["status"] = status
    if reason is not None:
        out["reason"] = reason
    return {**out, **extra}


def open_session(path: Path, runtime: str) -> Session | str:
    """An open session, or why the runtime cannot run here (never a fallback runtime)."""
    reason = VERIFIED_RUNTIMES[runtime].unavailable()
    if reason is not None:
        return reason
    try:
        return open_artifact(path, runtime)
    except RuntimeUnavailable as exc:  # e.g. ORT fell back to CPU: not a CUDA result
        return exc.reason


def run_cell(
    base: dict,
    runtime: str,
    precision: str,
    artifact: str,
    path: Path | str,
    x: np.ndarray,
    expected: np.ndarray,
    rule: Rule,
    tolerances: Tolerances,
) -> dict:
    """Run `path` on `x` in `runtime`, compare with `expected`, judge with the op's `rule`."""
    if isinstance(path, str):  # the conversion failed
        return cell(base, runtime, precision, artifact, ERROR, reason=path)
    try:
        session = open_session(path, runtime)
        if isinstance(session, str):
            return cell(base, runtime, precision, artifact, UNAVAILABLE, reason=session)
        y = session.run(x)
        metrics = compare(y, expected)
        metrics["output_scale"] = output_scale(path, session)
    except Exception as exc:  # noqa: BLE001  (a runtime failure is that cell's error)
        first = first_line(exc)
        return cell(base, runtime, precision, artifact, ERROR, reason=first)
    scale = metrics["output_scale"]
    if scale and metrics["max_abs"] is not None:
        metrics["min_steps"] = metrics["max_abs"] / scale
    status, reason = verdict(judge(rule, metrics, tolerances))
    return cell(
        base,
        runtime,
        precision,
        artifact,
        status,
        reason=reason,
        providers=list(session.providers),
        metrics=metrics,
        tolerance=rule.describe(tolerances, metrics),
    )


def verdict(failed: list[str]) -> tuple[str, str | None]:
    """(status, reason) of a cell or boundary from the checks `judge` found failed."""
    return (FAIL, "; ".join(failed)) if failed else (PASS, None)


def summarize(cells: list[dict]) -> dict:
    """Counts per status, and the failing cells as 'op shape runtime precision' lines."""
    counts = Counter(c["status"] for c in cells)
    failing = [c for c in cells if c["status"] in FAILING]
    return {
        "counts": dict(counts),
        "passed": not failing,
        "failures": [describe(c) for c in failing],
    }


def describe(c: dict) -> str:
    """One line naming a cell (op and shape, or format), runtime, precision, status, why."""
    what = c.get("op") or c.get("format") or "?"
    where = f"{what} [{c['shape']}]" if c.get("shape") else what
    text = f"{where} on {c['runtime']} ({c['precision']}): {c['status']}"
    return text + (f": {c['reason']}" if c.get("reason") else "")
