"""The format registry: one row per `--format` name holding every fact about that format.

A row says which file and runtime the artifact has, what precision it computes in, which named
recipe converts it without a search (recorded in model.json), which options it takes, how
`toolkit verify` judges it (a rule name of export/verify/modelrules.py), which roofline peak
`toolkit bench` holds it against, whether the int8 attribution applies, and its
`--max-accuracy-drop` search space. Verify, bench and the int8 search read these rows; no other
table is keyed by format name.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from export.int8_search import ONNX_RECIPES, ONNX_SEARCH, TFLITE_RECIPES, TFLITE_SEARCH, SearchSpace
from export.onnx import convert_onnx
from export.onnx_int8 import OnnxRecipe, onnx_int8_converter
from export.source import ExportSource
from export.tflite import DYNAMIC_B1, FP16, FP32, Recipe, tflite_converter
from toolkit.errors import UsageError

ALL = "all"
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
SEARCH_OPTIONS = ("max_accuracy_drop",)  # taken by exactly the formats with a search space

# The recipes the int8 formats use without --max-accuracy-drop, measured on both seed
# architectures (bench/results/fast_by_default.md): the tflite-int8 search's winner on both;
# with float in/out, also the logits layer float (int8 logits tie on low-margin images); for
# ONNX Runtime, int8 MatMuls on activations quantized per call with 7-bit weights, which do
# not saturate the int16 pair sums of AVX2 CPUs without VNNI and cost nothing with VNNI.
TFLITE_INT8_RECIPE = "int8-b1-float-norm-gelu-attention"
TFLITE_INT8_FLOAT_IO = replace(TFLITE_RECIPES[TFLITE_INT8_RECIPE], int8_io=False, float_logits=True)
ONNX_INT8_RECIPE = "dynamic-matmul-reduce-range"


@dataclass(frozen=True)
class Format:
    """One export format, every fact about it: `convert(source, path)` writes the artifact."""

    name: str
    filename: str
    runtime: str  # ort-cpu or litert: the runtime that loads and validates the artifact
    precision: str  # one of PRECISIONS: the numbers the artifact computes in
    convert: Callable[[ExportSource, Path], None]
    recipe: str  # the name of what `convert` does, as model.json records it
    settings: Recipe | OnnxRecipe | None  # its converter settings (None: plain float ONNX)
    options: tuple[str, ...]
    rule: str  # `toolkit verify`'s model-level rule: a key of export/verify/modelrules.RULES
    roofline: str  # one of ROOFLINE_PRECISIONS: the peak `toolkit bench` holds it against
    description: str
    int8_attribution: bool = False  # `toolkit verify` runs the TFLite int8 debugger for it
    search: SearchSpace | None = None  # the recipes `--max-accuracy-drop` searches


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            name="onnx",
            filename="model.onnx",
            runtime="ort-cpu",
            precision="fp32",
            convert=convert_onnx,
            recipe="fp32",
            settings=None,
            options=ONNX_OPTIONS,
            rule="fp32",
            roofline="fp32",
            description="float32, dynamic batch",
        ),
        Format(
            name="onnx-int8",
            filename="model_int8.onnx",
            runtime="ort-cpu",
            precision="int8",
            convert=onnx_int8_converter(ONNX_RECIPES[ONNX_INT8_RECIPE], ONNX_INT8_RECIPE),
            recipe=ONNX_INT8_RECIPE,
            settings=ONNX_RECIPES[ONNX_INT8_RECIPE],
            options=ONNX_OPTIONS + CALIB_OPTIONS + SEARCH_OPTIONS,
            rule="int8",
            roofline="int8",
            description="int8 MatMuls, activations quantized per call (7-bit weights), "
            "float32 in/out, dynamic batch",
            search=ONNX_SEARCH,
        ),
        Format(
            name="tflite",
            filename="model_fp32.tflite",
            runtime="litert",
            precision="fp32",
            convert=tflite_converter(FP32),
            recipe="fp32",
            settings=FP32,
            options=(),
            rule="fp32",
            roofline="fp32",
            description="float32, batch 1",
        ),
        Format(
            name="tflite-fp16",
            filename="model_fp16.tflite",
            runtime="litert",
            precision="fp16",
            convert=tflite_converter(FP16),
            recipe="fp16",
            settings=FP16,
            options=(),
            rule="fp16",
            roofline="fp32",  # fp16 weights are widened to fp32 at load on CPU
            description="float16 weights, float32 in/out, batch 1",
        ),
        Format(
            name="tflite-dynamic",
            filename="model_dynamic.tflite",
            runtime="litert",
            precision="int8",
            convert=tflite_converter(DYNAMIC_B1),
            recipe="dynamic-range-b1",
            settings=DYNAMIC_B1,
            options=(),
            rule="int8",
            roofline="int8",
            description="int8 weights, float activations and in/out, batch 1; fastest for ViT-LSA",
        ),
        Format(
            name="tflite-int8",
            filename="model_int8.tflite",
            runtime="litert",
            precision="int8",
            convert=tflite_converter(TFLITE_RECIPES[TFLITE_INT8_RECIPE]),
            recipe=TFLITE_INT8_RECIPE,
            settings=TFLITE_RECIPES[TFLITE_INT8_RECIPE],
            options=CALIB_OPTIONS + SEARCH_OPTIONS,
            rule="int8",
            roofline="int8",
            description="int8 in/out, batch 1; LayerNorm, GELU and attention core float",
            int8_attribution=True,
            search=TFLITE_SEARCH,
        ),
        Format(
            name="tflite-int8-float-io",
            filename="model_int8_float_io.tflite",
            runtime="litert",
            precision="int8",
            convert=tflite_converter(TFLITE_INT8_FLOAT_IO),
            recipe=f"{TFLITE_INT8_RECIPE}-logits-float-io",
            settings=TFLITE_INT8_FLOAT_IO,
            options=CALIB_OPTIONS,
            rule="int8",
            roofline="int8",
            description="tflite-int8 with float32 in/out and a float logits layer",
            int8_attribution=True,
        ),
    )
}


def parse_formats(spec: str | Iterable[str]) -> list[str]:
    """`onnx,tflite`, `all` or a list of names -> registered names in order, duplicates dropped."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for item in (str(i).strip().lower() for i in items):
        chosen = list(FORMATS) if item == ALL else [item]
        if item not in FORMATS and item != ALL:
            raise UsageError(_unknown(item))
        names.extend(n for n in chosen if n not in names)
    if not names:
        raise UsageError(f"--format is empty: choose from {', '.join(FORMATS)}, or {ALL}")
    return names


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name, [*FORMATS, ALL], n=2, cutoff=0.5)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"unknown format '{name}': {hint}choose from {', '.join(FORMATS)}, or {ALL}"


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
