"""Error metrics of an output against its reference, and of logits against reference logits."""

from __future__ import annotations

import numpy as np

from toolkit.accuracy import top1_vs_reference

REL_FLOOR = 1e-3  # relative error divides by max(|expected|, REL_FLOOR * max|expected|)


def _number(value: float) -> float | None:
    """A JSON-safe float: None for NaN or infinity."""
    value = float(value)
    return value if np.isfinite(value) else None


def compare(actual: np.ndarray, expected: np.ndarray) -> dict:
    """max/mean abs error, max relative error, cosine similarity and the atol that would pass.

    Relative error divides by |expected| floored at REL_FLOOR of the largest |expected|, so
    exact zeros of the reference do not turn rounding noise into infinities.
    """
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    if a.shape != e.shape:
        raise ValueError(f"output shape {a.shape} differs from the reference's {e.shape}")
    finite = bool(np.all(np.isfinite(a)))
    diff = np.abs(a - e)
    peak = float(np.max(np.abs(e))) if e.size else 0.0
    floor = max(REL_FLOOR * peak, np.finfo(np.float64).tiny)
    norms = float(np.linalg.norm(a) * np.linalg.norm(e))
    cosine = float(np.sum(a * e) / norms) if norms > 0 else float(np.array_equal(a, e))
    max_abs = float(diff.max()) if diff.size else 0.0
    return {
        "max_abs": _number(max_abs),
        "mean_abs": _number(diff.mean() if diff.size else 0.0),
        "max_rel": _number(np.max(diff / np.maximum(np.abs(e), floor)) if diff.size else 0.0),
        "cosine": _number(cosine),
        "min_atol": _number(max_abs),
        "reference_peak": peak,
        "finite": finite,
    }


def compare_logits(logits: np.ndarray, reference: np.ndarray, labels: np.ndarray) -> dict:
    """`compare` plus top-1 agreement with the reference, top-1 accuracy and its delta."""
    return {**compare(logits, reference), **top1_vs_reference(logits, reference, labels)}
