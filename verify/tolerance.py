"""Pass/fail rules of the op level of `toolkit verify`, and why they are what they are.

Every op runs on 2 samples of N(0, 1) clipped to +-4 with seeded random weights (biases and
LayerNorm offsets included) and is compared with a float64 NumPy reference of its definition.

float32 (keras, litert, ort-cpu, ort-cuda), max abs error against the reference:
- data movement (shift, shifted patches): bit-exact, max abs error == 0. Slices, pads,
  reshapes, transposes and concatenations copy float bits; any difference means an element
  went to the wrong place or was computed.
- arithmetic ops (SPT = patches, LayerNorm, Dense; LSA): <= ATOL_FP32 = 1e-5 (`--atol-fp32`).
  float32 rounding of dot products with up to K = 540 terms, rsqrt and softmax is measured at
  <= 4e-6 (SPT at the seed shape, outputs up to ~4) and <= 1e-6 for LSA; a semantic error is
  >= 0.1 (LSA without its diagonal mask: 0.12-0.55; a shift that moves nothing: ~5).
- whole blocks (ShiftViT block; ViT block with LSA): <= BLOCK_FACTOR x ATOL_FP32 = 1e-4. A
  block chains LayerNorm, two to four matmuls (K up to 2C = 1536), an erf GELU whose kernel
  differs per runtime and residual adds, so its error is the sum of its ops' and grows with
  the activations (measured <= 4e-6 on unit-scale inputs, larger in trained models); 1e-4
  still fails any wrong op inside a block by three orders of magnitude.

int8 (TFLite full-integer with int8 in/out; ONNX Runtime static QDQ), max abs error against
the same float64 reference, in steps of the output's quantization scale s (max abs <= k * s):
s is the resolution the int8 output can express, so the bound reads the same for every op,
shape and value range. The 2 verified samples are part of the calibration set, so the error
is rounding and requantization, not clipping of values calibration never saw.
- data movement: k = 1. Rounding the input costs 0.5 step, and the converter may requantize
  once more (ORT gives each Slice/Pad its own grid before Concat): 0.5 + 0.5. Measured: 0.50
  (LiteRT), 0.67-0.98 (ORT).
- arithmetic ops and blocks: k = INT8_STEPS = 16 (`--int8-steps`). Every int8 op requantizes
  its output, matmuls sum K rounding errors, softmax emits on a fixed 1/256 grid and
  LayerNorm runs as int8 mean/variance/rsqrt. Measured on LiteRT: SPT 2.2-2.9 steps, ShiftViT
  block 2.2-2.5, LSA with a range-preserving mask 2.4-9. 16 steps (6% of the 256-step range)
  passes those and fails an int8 graph that lost its resolution: LSA's additive -1e4 diagonal
  fill stretches the scores' range until real scores round to 0 (41-109 steps), ORT's
  decomposed int8 LayerNorm in SPT at 32x32 p4 (28 steps). The int8 cells judge quantization
  quality; the float32 cells judge correctness (an unmasked LSA at T=144 is 0.12 off in
  float32 but only 13 int8 steps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

ATOL_FP32 = 1e-5
BLOCK_FACTOR = 10.0
INT8_STEPS = 16.0
MOVEMENT_INT8_STEPS = 1.0


@dataclass(frozen=True)
class Tolerances:
    """The thresholds of one verify call (`--atol-fp32`, `--int8-steps`)."""

    atol_fp32: float = ATOL_FP32
    int8_steps: float = INT8_STEPS
    block_factor: float = BLOCK_FACTOR
    movement_int8_steps: float = MOVEMENT_INT8_STEPS

    def to_dict(self) -> dict:
        """The thresholds plus the rationale, for the JSON report."""
        return {**asdict(self), "rationale": rationale()}


DEFAULT_TOLERANCES = Tolerances()

# fp32 rule -> max abs error allowed
FP32_RULES: dict[str, Callable[[Tolerances], float]] = {
    "exact": lambda t: 0.0,
    "atol": lambda t: t.atol_fp32,
    "block": lambda t: t.block_factor * t.atol_fp32,
}
# int8 rule -> output quantization steps allowed
INT8_RULES: dict[str, Callable[[Tolerances], float]] = {
    "movement": lambda t: t.movement_int8_steps,
    "arithmetic": lambda t: t.int8_steps,
}


def rationale() -> str:
    """This module's docstring: the bounds and why (README-ready)."""
    return (__doc__ or "").strip()


def judge(
    precision: str, fp32_rule: str, int8_rule: str, metrics: dict, tolerances: Tolerances
) -> tuple[str | None, dict]:
    """(why the cell fails or None, the tolerance applied) for one op cell's metrics."""
    max_abs = metrics["max_abs"]
    if precision == "fp32":
        atol = FP32_RULES[fp32_rule](tolerances)
        tolerance = {"rule": fp32_rule, "atol": atol}
    else:
        steps = INT8_RULES[int8_rule](tolerances)
        scale = metrics.get("output_scale")
        if scale is None:
            return "the int8 artifact has no quantized output to measure steps of", {}
        atol = steps * scale
        tolerance = {"rule": int8_rule, "steps": steps, "output_scale": scale, "atol": atol}
    if not metrics["finite"] or max_abs is None:
        return "non-finite output", tolerance
    if max_abs <= atol:
        return None, tolerance
    why = f"max abs {max_abs:.3g} > {atol:.3g}"
    if precision != "fp32":
        why += f" ({max_abs / tolerance['output_scale']:.1f} > {tolerance['steps']:g} steps)"
    return why, tolerance
