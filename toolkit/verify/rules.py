"""Every pass/fail rule of `toolkit verify` (op, model and layer levels), the one `judge` they
share, and why each bound is what it is (RATIONALES, copied into the JSON report)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfiles import MANIFEST_FILE

OP_RATIONALE = """
Pass/fail rules of the op level of `toolkit verify`, and why they are what they are.

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

MODEL_RATIONALE = """
Model-level pass/fail rules per export format: the artifact's logits vs the Keras model's.

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
- The browser runtimes (web-litert, web-ort: LiteRT.js and onnxruntime-web on WebAssembly,
  whose SIMD kernels are not x86's) are held to the same rule per format, as the model level is
  where they run (toolkit/runtimes/web/runtimes.py). Measured on the tiny shiftvit and vit-lsa
  runs (30 images): fp32 max abs 5.7e-7-8.3e-7 (web-litert; litert 6.6e-7-1.1e-6) and
  3.3e-6-7.0e-6 (web-ort; ort-cpu 2.9e-6-3.9e-6), 100x under the fp32 bound; fp16 and int8
  through wasm within 1e-5 of the native figures (int8 cosine 0.99954-0.99999 both ways, the
  same top-1 agreement): wasm's int8 kernels round as XNNPACK's and MLAS's do on these files.
  web-mediapipe is not verified, as the mediapipe adapter is not: the task resizes and
  normalizes frames itself, so its scores are not the file's on Keras' input (it is held to the
  mediapipe adapter instead, tests/test_web_runtimes.py).
"""

LAYER_RATIONALE = """
Per-boundary tolerance of `toolkit verify --layers`: each boundary tensor is held to the
bound its format's logits are held to at the model level (the model rules), since the logits
are the last boundary and an error that leaves the bound upstream is where the model's error
comes from. One rule per precision, from the format's row in toolkit/formats.py:

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

# level -> (its rules' rationale, the report's key for it under "tolerances")
RATIONALES: dict[str, tuple[str, str]] = {
    "ops": (OP_RATIONALE, "rationale"),
    "models": (MODEL_RATIONALE, "model_rules"),
    "layers": (LAYER_RATIONALE, "layer_rules"),
}

ATOL_FP32 = 1e-5
BLOCK_FACTOR = 10.0
INT8_STEPS = 16.0
MOVEMENT_INT8_STEPS = 1.0
MODEL_FACTOR = 100.0
NO_SCALE = "the int8 artifact has no quantized output to measure steps of"


def rationale(level: str = "ops") -> str:
    """The rules of `level` (ops, models, layers) and why, README-ready."""
    return RATIONALES[level][0].strip()


@dataclass(frozen=True)
class Tolerances:
    """The thresholds of one verify call (`--atol-fp32`, `--int8-steps`)."""

    atol_fp32: float = ATOL_FP32
    int8_steps: float = INT8_STEPS
    block_factor: float = BLOCK_FACTOR
    movement_int8_steps: float = MOVEMENT_INT8_STEPS

    def to_dict(self, level: str = "ops") -> dict:
        """The thresholds plus the op rationale and `level`'s, for the JSON report."""
        text, key = RATIONALES[level]
        return {**asdict(self), "rationale": rationale(), key: text.strip()}


DEFAULT_TOLERANCES = Tolerances()


@dataclass(frozen=True)
class Bound:
    """Max abs error <= limit(tolerances), absolute (the op level's float32 rules)."""

    limit: Callable[[Tolerances], float]

    def atol(self, metrics: Mapping, tolerances: Tolerances) -> float:
        """The max abs error allowed on an output with these metrics."""
        return self.limit(tolerances)

    def describe(self, tolerances: Tolerances, metrics: Mapping) -> dict | None:
        """The bound as numbers for the report; None when it cannot be measured."""
        return {"atol": self.atol(metrics, tolerances)}

    def check(self, metrics: Mapping, tolerances: Tolerances) -> str | None:
        """Why the output's max abs error breaks the bound, or None."""
        atol = self.atol(metrics, tolerances)
        max_abs = metrics["max_abs"]
        return None if max_abs <= atol else f"max abs {max_abs:.3g} > {atol:.3g}"


@dataclass(frozen=True)
class Steps(Bound):
    """Max abs error <= limit(tolerances) steps of the output's int8 scale (op level, int8)."""

    def atol(self, metrics: Mapping, tolerances: Tolerances) -> float:
        """limit steps of the output's quantization scale."""
        return self.limit(tolerances) * metrics["output_scale"]

    def describe(self, tolerances: Tolerances, metrics: Mapping) -> dict | None:
        """Steps, scale and the atol they make; None without a quantized output."""
        if metrics.get("output_scale") is None:
            return None
        steps = self.limit(tolerances)
        scale = metrics["output_scale"]
        return {"steps": steps, "output_scale": scale, "atol": self.atol(metrics, tolerances)}

    def check(self, metrics: Mapping, tolerances: Tolerances) -> str | None:
        """The plain max abs phrase plus the error in steps; NO_SCALE without a scale."""
        scale = metrics.get("output_scale")
        if scale is None:
            return NO_SCALE
        why = super().check(metrics, tolerances)
        steps = f" ({metrics['max_abs'] / scale:.1f} > {self.limit(tolerances):g} steps)"
        return None if why is None else why + steps


@dataclass(frozen=True)
class Peak(Bound):
    """Max abs error <= limit(tolerances) x max(1, peak |reference|) (model and layer levels)."""

    of: str | None = None  # what the peak is taken of, said in the report

    def atol(self, metrics: Mapping, tolerances: Tolerances) -> float:
        """The relative bound scaled by the reference's peak (at least 1)."""
        return self.limit(tolerances) * max(1.0, metrics["reference_peak"])

    def describe(self, tolerances: Tolerances, metrics: Mapping) -> dict | None:
        """The relative bound, and what its peak is of when said."""
        out = {"max_abs_rtol": self.limit(tolerances)}
        return out if self.of is None else {**out, "max_abs_rtol_of": self.of}


@dataclass(frozen=True)
class Rule:
    """Bounds on an output's error against its reference (None: not checked), and its name."""

    name: str  # op rule name, or the precision of a model or layer rule
    key: str  # the report key `name` goes under: "rule" (op level) or "precision"
    subject: str  # what is judged, in "non-finite ...": output, logits, values
    max_abs: Bound | None = None
    min_cosine: float | None = None
    max_top1_drop: float | None = None  # accuracy(reference) - accuracy(artifact), fraction

    def describe(self, tolerances: Tolerances, metrics: Mapping | None = None) -> dict:
        """The thresholds as numbers for the report ({} when the bound cannot be measured)."""
        bound = {} if self.max_abs is None else self.max_abs.describe(tolerances, metrics or {})
        if bound is None:
            return {}
        optional = {"min_cosine": self.min_cosine, "max_top1_drop": self.max_top1_drop}
        given = {k: v for k, v in optional.items() if v is not None}
        return {self.key: self.name, **bound, **given}


def _max_abs(rule: Rule, metrics: Mapping, tolerances: Tolerances) -> str | None:
    return None if rule.max_abs is None else rule.max_abs.check(metrics, tolerances)


def _cosine(rule: Rule, metrics: Mapping, tolerances: Tolerances) -> str | None:
    cosine = metrics["cosine"] or 0.0
    if rule.min_cosine is None or cosine >= rule.min_cosine:
        return None
    return f"cosine {cosine:.5f} < {rule.min_cosine}"


def _top1(rule: Rule, metrics: Mapping, tolerances: Tolerances) -> str | None:
    if rule.max_top1_drop is None:
        return None
    drop = -metrics["top1_delta"]
    if drop <= rule.max_top1_drop + 1e-12:
        return None
    return (
        f"top-1 {metrics['top1_accuracy']:.1%} is {drop:.1%} below "
        f"Keras' {metrics['reference_top1_accuracy']:.1%} (max drop {rule.max_top1_drop:.0%})"
    )


# each check: why the metrics break one bound of the rule, or None (also when it has none)
CHECKS: tuple[Callable[[Rule, Mapping, Tolerances], str | None], ...] = (_max_abs, _cosine, _top1)


def judge(rule: Rule, metrics: Mapping, tolerances: Tolerances) -> list[str]:
    """The checks `metrics` fail under `rule`, one phrase each; [] when within it."""
    if not metrics["finite"] or metrics["max_abs"] is None:
        return [f"non-finite {rule.subject}"]
    return [why for check in CHECKS if (why := check(rule, metrics, tolerances))]


def _op_rule(name: str, bound: Bound) -> Rule:
    return Rule(name, "rule", "output", max_abs=bound)


# op rule name (an OpCase's fp32_rule or int8_rule) -> rule
OP_RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        _op_rule("exact", Bound(lambda t: 0.0)),
        _op_rule("atol", Bound(lambda t: t.atol_fp32)),
        _op_rule("block", Bound(lambda t: t.block_factor * t.atol_fp32)),
        _op_rule("movement", Steps(lambda t: t.movement_int8_steps)),
        _op_rule("arithmetic", Steps(lambda t: t.int8_steps)),
    )
}
# rule name (the `rule` of a format's row in toolkit/formats.py) -> the rule of its logits, in
# every runtime the model level checks: web-litert and web-ort (wasm) measure within the native
# runtimes' figures on the tiny runs (MODEL_RATIONALE), so no browser rule is looser or tighter
MODEL_RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule("fp32", "precision", "logits", max_abs=Peak(lambda t: MODEL_FACTOR * t.atol_fp32)),
        Rule("fp16", "precision", "logits", min_cosine=0.999),
        Rule("int8", "precision", "logits", min_cosine=0.98, max_top1_drop=0.05),
    )
}


def _boundary_rule(rule: Rule) -> Rule:
    """A model rule held at each boundary tensor: its own peak, no top-1 (the logits' alone)."""
    bound = rule.max_abs
    if isinstance(bound, Peak):
        bound = replace(bound, of="max(1, peak |Keras tensor|)")
    return replace(rule, subject="values", max_abs=bound, max_top1_drop=None)


# the same names -> the rule of every boundary tensor of `toolkit verify --layers`
LAYER_RULES: dict[str, Rule] = {name: _boundary_rule(r) for name, r in MODEL_RULES.items()}


def rule_for(fmt: str, rules: Mapping[str, Rule] = MODEL_RULES) -> Rule:
    """Export format `fmt`'s rule in `rules`, from its row in toolkit/formats.py.

    UsageError for a format this toolkit does not know (a model.json of another version):
    an artifact must never pass without a rule."""
    if fmt not in FORMATS:
        raise UsageError(
            f"{MANIFEST_FILE} lists format '{fmt}', which this toolkit has no rule for: export "
            f"the run again with this version (formats: {', '.join(FORMATS)})"
        )
    return rules[FORMATS[fmt].rule]


def format_rules(rules: Mapping[str, Rule] = MODEL_RULES) -> dict[str, Rule]:
    """Every registered format's rule in `rules`, in FORMATS order."""
    return {name: rules[f.rule] for name, f in FORMATS.items()}
