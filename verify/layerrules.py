"""Per-boundary tolerance of `toolkit verify --layers`: each boundary tensor is held to the
bound its format's logits are held to at the model level (verify/modelrules.py), since
the logits are the last boundary and an error that leaves the bound upstream is where the
model's error comes from. One rule per precision, from the format's row in export/formats.py:

- float32 (onnx, tflite): max abs error <= MODEL_FACTOR (100) x atol_fp32 x max(1, peak |Keras
  tensor|), 1e-3 of the tensor's own range. Tiny runs measure SQNR 120-150 dB at every boundary
  (max abs 1e-7 to 1e-5); a wrong op is far outside (a shift that moves nothing, or one block's
  weights off by 1%, fail at that block's boundary).
- float16 weights (tflite-fp16): cosine >= 0.999.
- int8 (tflite-dynamic, tflite-int8, tflite-int8-float-io, onnx-int8): cosine >= 0.98 (about
  14 dB SQNR). Reported beside it: the max and RMS error in steps of the tensor's own int8
  scale (rounding alone: 0.5 max, 0.29 RMS), and the SQNR lost since the previous boundary,
  whose largest drop points at the op that loses the most.
The first boundary outside its rule is the "first divergence"; boundaries the converter fused
away ("not found") are skipped, never guessed.
"""

from __future__ import annotations

from toolkit.formats import FORMATS
from verify.modelrules import RULES, ModelRule
from verify.tolerance import Tolerances


def layer_rule(fmt: str) -> ModelRule:
    """The rule of format `fmt`'s boundaries: its model-level rule (a KeyError for an unknown
    format; the caller checks formats first)."""
    return RULES[FORMATS[fmt].rule]


def describe(rule: ModelRule, tolerances: Tolerances) -> dict:
    """The per-boundary thresholds as numbers for the report (no top-1 bound: that is the
    logits' alone)."""
    out = rule.describe(tolerances)
    out.pop("max_top1_drop", None)
    if "max_abs_rtol" in out:
        out["max_abs_rtol_of"] = "max(1, peak |Keras tensor|)"
    return out


def judge_boundary(rule: ModelRule, metrics: dict, tolerances: Tolerances) -> list[str]:
    """The checks one boundary fails, one phrase each; [] when it is within its rule."""
    failed = []
    if not metrics["finite"]:
        failed.append("non-finite values")
    if rule.max_abs_factor is not None:
        atol = rule.max_abs_factor * tolerances.atol_fp32 * max(1.0, metrics["reference_peak"])
        if metrics["max_abs"] is None or metrics["max_abs"] > atol:
            failed.append(f"max abs {metrics['max_abs']:.3g} > {atol:.3g}")
    if rule.min_cosine is not None and (metrics["cosine"] or 0.0) < rule.min_cosine:
        failed.append(f"cosine {metrics['cosine']:.5f} < {rule.min_cosine}")
    return failed


def rationale() -> str:
    """This module's docstring: the per-boundary rules and why (README-ready)."""
    return (__doc__ or "").strip()
