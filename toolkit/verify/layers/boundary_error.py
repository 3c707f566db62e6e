"""Error of one boundary tensor against the Keras tensor: absolute, relative, angular, SQNR,
and for an int8 tensor the same in steps of its own quantization scale."""

from __future__ import annotations

import math

import numpy as np


def _number(value: float) -> float | None:
    """A JSON-safe float: None for NaN or infinity."""
    value = float(value)
    return value if math.isfinite(value) else None


def compare_tensor(actual: np.ndarray, expected: np.ndarray, scale: float | None = None) -> dict:
    """max/mean abs error, relative L2 error, cosine, SQNR in dB, peak |Keras|; with `scale`
    (an int8 tensor's step) the max and RMS error in steps.

    SQNR = 10 log10(sum expected^2 / sum (actual - expected)^2): None when the two are equal
    (exact), so the report says "exact" rather than an infinity.
    """
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    if a.shape != e.shape:
        raise ValueError(f"tensor shape {a.shape} differs from the Keras tensor's {e.shape}")
    diff = a - e
    noise = float(np.sum(diff * diff))
    signal = float(np.sum(e * e))
    norms = math.sqrt(float(np.sum(a * a)) * signal)
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    out = {
        "max_abs": _number(max_abs),
        "mean_abs": _number(np.mean(np.abs(diff)) if diff.size else 0.0),
        "rel_l2": _number(math.sqrt(noise / signal)) if signal > 0 else None,
        "cosine": _number(np.sum(a * e) / norms) if norms > 0 else float(noise == 0),
        "sqnr_db": _number(10 * math.log10(signal / noise)) if noise > 0 and signal > 0 else None,
        "exact": noise == 0,
        "reference_peak": float(np.max(np.abs(e))) if e.size else 0.0,
        "finite": bool(np.all(np.isfinite(a))),
    }
    if scale:
        rms = math.sqrt(noise / diff.size) if diff.size else 0.0
        out.update(scale=scale, max_steps=_number(max_abs / scale), rms_steps=_number(rms / scale))
    return out
