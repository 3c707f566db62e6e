"""How a format is written: the converters that `toolkit.formats.FORMATS` rows name.

A converter holds the function that writes the file, the named recipe it applies without a
search (recorded in model.json), that recipe's settings, and the `--max-accuracy-drop` search
space of the formats that take one. Each format's row names its converter (`Format.converter`,
a constant of this module): the row is the format's one home, and `CONVERTERS` is derived from
it, never a second table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from toolkit.export.entries import Extras
from toolkit.export.int8_search import (
    ONNX_RECIPES,
    ONNX_SEARCH,
    TFLITE_RECIPES,
    TFLITE_SEARCH,
    SearchSpace,
)
from toolkit.export.onnx import convert_onnx
from toolkit.export.onnx_int8 import OnnxRecipe, onnx_int8_converter
from toolkit.export.onnx_mobile import (
    MOBILE_SETTINGS,
    MobileRecipe,
    convert_onnx_mobile,
    describe_mobile,
)
from toolkit.export.source import ExportSource
from toolkit.export.tflite import DYNAMIC_B1, FP16, FP32, Recipe, tflite_converter
from toolkit.formats import FORMATS, Format

# The recipes the int8 formats use without --max-accuracy-drop, measured on both seed
# architectures (records/notes/int8.md): the tflite-int8 search's winner on both, with the
# logits layer float (int8 logits tie on low-margin images) and float32 probabilities out;
# the same with float32 pixels in; for
# ONNX Runtime, int8 MatMuls on activations quantized per call with 7-bit weights, which do
# not saturate the int16 pair sums of AVX2 CPUs without VNNI and cost nothing with VNNI.
TFLITE_INT8_RECIPE = "int8-b1-float-norm-gelu-attention-logits"
FLOAT_IO_RECIPE = replace(TFLITE_RECIPES[TFLITE_INT8_RECIPE], int8_io=False)
ONNX_INT8_RECIPE = "dynamic-matmul-reduce-range"


@dataclass(frozen=True)
class Converter:
    """How one format is written: `convert(source, path)` writes the artifact."""

    convert: Callable[[ExportSource, Path], None]
    recipe: str  # the name of what `convert` does, as model.json records it
    settings: Recipe | OnnxRecipe | MobileRecipe | None  # its settings (None: plain float ONNX)
    search: SearchSpace | None = None  # the recipes `--max-accuracy-drop` searches
    # the written (and validated) file's model.json fields and companion files
    describe: Callable[[ExportSource, Path, Format], Extras] | None = None


ONNX_FP32 = Converter(convert_onnx, "fp32", None)
ONNX_INT8 = Converter(
    onnx_int8_converter(ONNX_RECIPES[ONNX_INT8_RECIPE], ONNX_INT8_RECIPE),
    ONNX_INT8_RECIPE,
    ONNX_RECIPES[ONNX_INT8_RECIPE],
    search=ONNX_SEARCH,
)
TFLITE_FP32 = Converter(tflite_converter(FP32), "fp32", FP32)
TFLITE_FP16 = Converter(tflite_converter(FP16), "fp16", FP16)
TFLITE_DYNAMIC = Converter(tflite_converter(DYNAMIC_B1), "dynamic-range-b1", DYNAMIC_B1)
TFLITE_INT8 = Converter(
    tflite_converter(TFLITE_RECIPES[TFLITE_INT8_RECIPE]),
    TFLITE_INT8_RECIPE,
    TFLITE_RECIPES[TFLITE_INT8_RECIPE],
    search=TFLITE_SEARCH,
)
TFLITE_INT8_FLOAT_IO = Converter(
    tflite_converter(FLOAT_IO_RECIPE),
    f"{TFLITE_INT8_RECIPE}-float-io",
    FLOAT_IO_RECIPE,
)
ONNX_MOBILE = Converter(
    convert_onnx_mobile, "fp32-mobile-b1", MOBILE_SETTINGS, describe=describe_mobile
)


def converter_named(name: str) -> Converter:
    """The converter constant `name` of this module (what a format row's `converter` says)."""
    found = globals().get(name)
    if not isinstance(found, Converter):
        raise KeyError(f"toolkit.export.converters has no converter {name!r}")
    return found


# format name -> its converter, derived from the rows (patchable in tests)
CONVERTERS: dict[str, Converter] = {n: converter_named(f.converter) for n, f in FORMATS.items()}
