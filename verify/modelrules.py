"""Model-level pass/fail rules per export format: the artifact's logits vs the Keras model's.

- float32 (onnx, tflite): max abs logit error <= MODEL_FACTOR (100) x atol_fp32 x
  max(1, max |Keras logit|), i.e. 1e-3 relative at the default 1e-5: a model chains tens of
  the ops whose float32 error is <= 4e-6 each (tiny runs measure 2-6e-6). Top-1 agreement is
  reported, not required: a near tie may flip on rounding alone.
- float16 weights (tflite-fp16): cosine >= 0.999 (weights keep 11 significant bits; tiny runs
  measure cosine > 0.99999).
- int8 (tflite-dynamic, tflite-int8, tflite-int8-float-io, onnx-int8): cosine >= 0.98 and top-1
  accuracy at most 5 points below Keras'. Tiny runs measure cosine 0.9988-0.9999 for ShiftViT;
  a model with an int8-hostile op falls to the bound (vit-lsa with the -1e4 LSA mask fill:
  0.979-0.982). One image moves accuracy by 1/N: the default N is the whole test split
  (10,000 on CIFAR; 30 on the synthetic shapes:300 of the tests).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.errors import UsageError
from toolkit.formats import FORMATS
from verify.tolerance import Tolerances

MODEL_FACTOR = 100.0


@dataclass(frozen=True)
class ModelRule:
    """Checks on an artifact's logits against the Keras logits; None: not checked."""

    precision: str
    max_abs_factor: float | None = None  # max abs <= factor * atol_fp32 * max(1, peak logit)
    min_cosine: float | None = None
    max_top1_drop: float | None = None  # accuracy(Keras) - accuracy(artifact), fraction

    def describe(self, tolerances: Tolerances) -> dict:
        """The thresholds as numbers for the report."""
        out: dict = {"precision": self.precision}
        if self.max_abs_factor is not None:
            out["max_abs_rtol"] = self.max_abs_factor * tolerances.atol_fp32
        if self.min_cosine is not None:
            out["min_cosine"] = self.min_cosine
        if self.max_top1_drop is not None:
            out["max_top1_drop"] = self.max_top1_drop
        return out


FP32 = ModelRule("fp32", max_abs_factor=MODEL_FACTOR)
FP16 = ModelRule("fp16", min_cosine=0.999)
INT8 = ModelRule("int8", min_cosine=0.98, max_top1_drop=0.05)

# rule name (the `rule` of a format's row in export/formats.py) -> rule
RULES: dict[str, ModelRule] = {r.precision: r for r in (FP32, FP16, INT8)}


def rule_for(fmt: str) -> ModelRule:
    """The model-level rule of export format `fmt`, from its row in export/formats.py.

    UsageError for a format this toolkit does not know (a model.json of another version):
    an artifact must never pass without a rule."""
    if fmt not in FORMATS:
        raise UsageError(
            f"model.json lists format '{fmt}', which this toolkit has no rule for: export the "
            f"run again with this version (formats: {', '.join(FORMATS)})"
        )
    return RULES[FORMATS[fmt].rule]


def format_rules() -> dict[str, ModelRule]:
    """Every registered format's rule, in FORMATS order."""
    return {name: RULES[f.rule] for name, f in FORMATS.items()}


def rationale() -> str:
    """This module's docstring: the model-level rules and why (README-ready)."""
    return (__doc__ or "").strip()


def judge_model(rule: ModelRule, metrics: dict, tolerances: Tolerances) -> list[str]:
    """The checks that failed, one phrase each; [] when the artifact passes."""
    failed = []
    if not metrics["finite"]:
        failed.append("non-finite logits")
    if rule.max_abs_factor is not None:
        atol = rule.max_abs_factor * tolerances.atol_fp32 * max(1.0, metrics["reference_peak"])
        if metrics["max_abs"] is None or metrics["max_abs"] > atol:
            failed.append(f"max abs {metrics['max_abs']:.3g} > {atol:.3g}")
    if rule.min_cosine is not None and (metrics["cosine"] or 0.0) < rule.min_cosine:
        failed.append(f"cosine {metrics['cosine']:.5f} < {rule.min_cosine}")
    if rule.max_top1_drop is not None and -metrics["top1_delta"] > rule.max_top1_drop + 1e-12:
        failed.append(
            f"top-1 {metrics['top1_accuracy']:.1%} is {-metrics['top1_delta']:.1%} below "
            f"Keras' {metrics['reference_top1_accuracy']:.1%} (max drop {rule.max_top1_drop:.0%})"
        )
    return failed
