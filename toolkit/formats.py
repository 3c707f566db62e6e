"""The format registry: one row per `--format` name holding the facts every stage reads.

A row says which file and runtime the artifact has, what precision it computes in, which
options it takes, how `toolkit verify` judges it (a rule name of verify/rules.py), which
roofline peak `toolkit bench` holds it against, whether the int8 attribution applies, and how
the README describes it, and which converter writes it (by name: the converter itself, its
recipe and its `--max-accuracy-drop` search space, lives in toolkit/export/converters.py, which
imports TensorFlow). These facts import nothing heavy, so `bench` and `predict` read them on a
device without TensorFlow. A new format is one row here (and a converter, if no existing one
fits).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from toolkit.common.argtypes import choose_names
from toolkit.common.errors import UsageError

PRECISIONS = ("fp32", "fp16", "int8")  # what an artifact computes in
ROOFLINE_PRECISIONS = ("fp32", "int8")  # the peaks bench/roofline.py measures per runtime
# option name (export_run keyword) -> command-line flag
OPTION_FLAGS = {
    "opset": "--opset",
    "calib_data": "--calib-data",
    "calib_samples": "--calib-samples",
    "max_accuracy_drop": "--max-accuracy-drop",
}
ONNX_OPTIONS = ("opset",)
CALIB_OPTIONS = ("calib_data", "calib_samples")
DEFAULT_CALIB_SAMPLES = 500  # calibration images when none are asked (export/calibration.py)
SEARCH_OPTIONS = ("max_accuracy_drop",)  # taken by exactly the formats with a search space
# the `opset` option's range (export/onnx.py converts at it, export/onnx_rewrite.py fuses)
MIN_OPSET = 17
ATTENTION_OPSET = 23  # the first opset with a standard Attention op (fuse_attention)
MAX_OPSET = ATTENTION_OPSET  # above tf2onnx's newest, onnx's version converter lifts the graph
DEFAULT_OPSET = MAX_OPSET  # opset 23: each attention core one standard Attention node


@dataclass(frozen=True)
class Format:
    """One export format's facts: file, runtime, precision, options and how it is judged."""

    name: str
    filename: str
    runtime: str  # ort-cpu or litert: the runtime that loads and validates the artifact
    precision: str  # one of PRECISIONS: the numbers the artifact computes in
    options: tuple[str, ...]
    rule: str  # `toolkit verify`'s rule: a key of toolkit/verify/rules MODEL_RULES, LAYER_RULES
    roofline: str  # one of ROOFLINE_PRECISIONS: the peak `toolkit bench` holds it against
    description: str
    converter: str  # the Converter constant of toolkit/export/converters.py that writes it
    int8_attribution: bool = False  # `toolkit verify` runs the TFLite int8 debugger for it
    batch: int | None = None  # the one batch size the file takes (None: any; bench times only it)
    companions: tuple[str, ...] = ()  # files export writes beside it, for the app build
    no_layer_level: str | None = None  # why `toolkit verify --layers` cannot read its tensors
    # what the file costs on a CPU and why, said wherever it is timed or shipped (bench, card)
    cpu_note: str | None = None


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            name="onnx",
            filename="model.onnx",
            runtime="ort-cpu",
            precision="fp32",
            options=ONNX_OPTIONS,
            rule="fp32",
            converter="ONNX_FP32",
            roofline="fp32",
            description="float32, dynamic batch",
        ),
        Format(
            name="onnx-int8",
            filename="model_int8.onnx",
            runtime="ort-cpu",
            precision="int8",
            options=ONNX_OPTIONS + CALIB_OPTIONS + SEARCH_OPTIONS,
            rule="int8",
            converter="ONNX_INT8",
            roofline="int8",
            description="int8 MatMuls, activations quantized per call (7-bit weights), "
            "float32 in/out, dynamic batch",
        ),
        Format(
            name="tflite",
            filename="model_fp32.tflite",
            runtime="litert",
            precision="fp32",
            options=(),
            rule="fp32",
            converter="TFLITE_FP32",
            roofline="fp32",
            description="float32, batch 1",
        ),
        Format(
            name="tflite-fp16",
            filename="model_fp16.tflite",
            runtime="litert",
            precision="fp16",
            options=(),
            rule="fp16",
            converter="TFLITE_FP16",
            roofline="fp32",  # fp16 weights are widened to fp32 at load on CPU
            description="float16 weights, float32 in/out, batch 1",
        ),
        Format(
            name="tflite-dynamic",
            filename="model_dynamic.tflite",
            runtime="litert",
            precision="int8",
            options=(),
            rule="int8",
            converter="TFLITE_DYNAMIC",
            roofline="int8",
            description="int8 weights, float activations and in/out, batch 1; fastest for ViT-LSA",
        ),
        Format(
            name="tflite-int8",
            filename="model_int8.tflite",
            runtime="litert",
            precision="int8",
            options=CALIB_OPTIONS + SEARCH_OPTIONS,
            rule="int8",
            converter="TFLITE_INT8",
            roofline="int8",
            description="uint8 pixels in, float32 probabilities out, batch 1; LayerNorm, GELU, "
            "attention core and logits float",
            int8_attribution=True,
        ),
        Format(
            name="tflite-int8-float-io",
            filename="model_int8_float_io.tflite",
            runtime="litert",
            precision="int8",
            options=CALIB_OPTIONS,
            rule="int8",
            converter="TFLITE_INT8_FLOAT_IO",
            roofline="int8",
            description="tflite-int8 with float32 pixels in",
            int8_attribution=True,
        ),
        Format(
            name="onnx-mobile",
            filename="model.ort",
            runtime="ort-cpu",
            precision="fp32",
            options=(),
            rule="fp32",
            converter="ONNX_MOBILE",
            roofline="fp32",
            description="ORT Mobile, float32, batch 1, NNAPI/CoreML ops",
            batch=1,
            companions=("model.required_operators.config",),
            no_layer_level="an .ort file's tensors cannot be made graph outputs: verify --layers "
            "reads the .onnx files; the .ort is verified at the model level",
            cpu_note="built for NNAPI and CoreML, not for ORT's CPU provider: LayerNorm, GELU "
            "and Pad are spelled in ops those providers take, and it is saved at ORT's basic "
            "optimisation level (the extended one fuses into com.microsoft ops no mobile "
            "provider takes), so on a CPU it runs several times slower than model.onnx "
            "(`python -m studies.ort_mobile_cost RUN` measures by how much); an app runs on the "
            "CPU whatever NNAPI or CoreML does not take",
        ),
    )
}


def parse_formats(spec: str | Iterable[str]) -> list[str]:
    """`onnx,tflite`, `all` or a list of names -> registered names in the order given (a list's
    duplicates dropped; a name typed twice refused); a UsageError with a did-you-mean
    otherwise."""
    return choose_names(spec, FORMATS, "format", keep_order=True)


def check_options(names: list[str], given: dict[str, object]) -> None:
    """UsageError when an option that was given (not None) is taken by none of `names`."""
    for option, value in given.items():
        if value is None or any(option in FORMATS[n].options for n in names):
            continue
        takers = [f.name for f in FORMATS.values() if option in f.options]
        raise UsageError(
            f"{OPTION_FLAGS[option]} does not apply to {', '.join(names)}: only "
            f"{', '.join(takers)} take it; drop it or add one of those formats"
        )


def format_table_markdown() -> str:
    """The README table of formats, generated from FORMATS."""
    rows = [
        "| format | file | runtime | options | what |",
        "|---|---|---|---|---|",
    ]
    for f in FORMATS.values():
        options = ", ".join(f"`{OPTION_FLAGS[o]}`" for o in f.options) or "-"
        rows.append(f"| `{f.name}` | `{f.filename}` | {f.runtime} | {options} | {f.description} |")
    return "\n".join(rows) + "\n"
