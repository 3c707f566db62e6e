"""The format registry: each `--format` name with its converter, file, runtime and options."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from export.onnx import convert_onnx
from export.onnx_int8 import convert_onnx_int8
from export.source import ExportSource
from export.tflite import DYNAMIC, FP16, FP32, INT8, INT8_FLOAT_IO, tflite_converter
from toolkit.errors import UsageError

ALL = "all"
# option name (export_run keyword) -> command-line flag
OPTION_FLAGS = {
    "opset": "--opset",
    "calib_data": "--calib-data",
    "calib_samples": "--calib-samples",
    "max_accuracy_drop": "--max-accuracy-drop",
}
ONNX_OPTIONS = ("opset",)
CALIB_OPTIONS = ("calib_data", "calib_samples")
SEARCH_OPTIONS = ("max_accuracy_drop",)  # formats with a recipe table in export/int8_search.py


@dataclass(frozen=True)
class Format:
    """One export format: `convert(source, path)` writes the artifact file at `path`."""

    name: str
    filename: str
    runtime: str  # ort-cpu or litert: the runtime that loads and validates the artifact
    convert: Callable[[ExportSource, Path], None]
    options: tuple[str, ...]
    description: str


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "onnx", "model.onnx", "ort-cpu", convert_onnx, ONNX_OPTIONS, "float32, dynamic batch"
        ),
        Format(
            "onnx-int8",
            "model_int8.onnx",
            "ort-cpu",
            convert_onnx_int8,
            ONNX_OPTIONS + CALIB_OPTIONS + SEARCH_OPTIONS,
            "static int8 QDQ, per-channel weights, float32 in/out",
        ),
        Format(
            "tflite",
            "model_fp32.tflite",
            "litert",
            tflite_converter(FP32),
            (),
            "float32, dynamic batch",
        ),
        Format(
            "tflite-fp16",
            "model_fp16.tflite",
            "litert",
            tflite_converter(FP16),
            (),
            "float16 weights, float32 in/out",
        ),
        Format(
            "tflite-dynamic",
            "model_dynamic.tflite",
            "litert",
            tflite_converter(DYNAMIC),
            (),
            "int8 weights (dynamic range), float32 in/out",
        ),
        Format(
            "tflite-int8",
            "model_int8.tflite",
            "litert",
            tflite_converter(INT8),
            CALIB_OPTIONS + SEARCH_OPTIONS,
            "full int8, int8 in/out",
        ),
        Format(
            "tflite-int8-float-io",
            "model_int8_float_io.tflite",
            "litert",
            tflite_converter(INT8_FLOAT_IO),
            CALIB_OPTIONS,
            "full int8 inside, float32 in/out",
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
