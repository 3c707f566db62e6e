"""int8 ONNX: onnxruntime static QDQ quantization (per-channel weights) on calibration images,
or dynamic quantization (int8 weights, activations quantized per call) for the search."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process

from toolkit.common.native_logs import captured_native_stderr
from toolkit.export.onnx import fp32_onnx, save_onnx
from toolkit.export.onnx_rewrite import FLOAT_NODE_SUFFIX
from toolkit.export.signature import INPUT_NAME
from toolkit.export.source import ExportSource

CALIB_BATCH = 32
CALIBRATION_METHODS = {
    "minmax": CalibrationMethod.MinMax,
    "entropy": CalibrationMethod.Entropy,
    "percentile": CalibrationMethod.Percentile,
}


@dataclass(frozen=True)
class OnnxRecipe:
    """Settings of one quantization of the fp32 graph: static QDQ (calibrated), or dynamic."""

    dynamic: bool = False  # int8 MatMulInteger on activations quantized per call; no calibration
    method: str = "minmax"  # a key of CALIBRATION_METHODS (static only)
    per_channel: bool = True
    op_types: tuple[str, ...] | None = None  # ONNX op types to quantize; None: every one ORT can
    exclude_op_types: tuple[str, ...] = ()  # nodes of these op types stay float
    optimize_first: bool = True  # ORT graph fusions before quantizing (fuses MatMul+Add to Gemm)
    # 7-bit weights: x86 CPUs without VNNI multiply u8 x s8 pairs into int16 sums that saturate
    reduce_range: bool = False


QDQ = OnnxRecipe()  # static QDQ with every op ORT quantizes


def even_batch(count: int, cap: int = CALIB_BATCH) -> int:
    """The largest batch <= cap that divides `count`: the histogram calibrators (entropy,
    percentile) stack per-batch outputs and fail on a short last batch."""
    return max(b for b in range(1, min(cap, count) + 1) if count % b == 0)


class ImageReader(CalibrationDataReader):
    """Feeds float32 0-255 image batches of one size to onnxruntime's calibrator."""

    def __init__(self, images: np.ndarray, batch: int | None = None) -> None:
        batch = batch or even_batch(len(images))
        self._batches = iter([images[i : i + batch] for i in range(0, len(images), batch)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self._batches, None)
        return None if batch is None else {INPUT_NAME: batch}


def quantize_int8(
    graph: onnx.ModelProto,
    calibration: np.ndarray,
    work: Path,
    quantized: Path,
    recipe: OnnxRecipe = QDQ,
) -> None:
    """int8 of `graph` by `recipe`: shape inference, then static QDQ calibrated on the images,
    or dynamic quantization."""
    fp32 = work / "fp32.onnx"
    prepared = work / ("prepared.onnx" if recipe.optimize_first else "prepared-unfused.onnx")
    if not prepared.exists():
        onnx.save(graph, str(fp32))
        with captured_native_stderr():
            # symbolic shape inference needs sympy; ONNX shape inference covers these graphs
            quant_pre_process(
                str(fp32),
                str(prepared),
                skip_optimization=not recipe.optimize_first,
                skip_symbolic_shape=True,
            )
    excluded = [  # the recipe's float op types, and nodes the rewrite marked to stay float
        n.name
        for n in onnx.load(str(prepared)).graph.node
        if n.op_type in recipe.exclude_op_types or n.name.endswith(FLOAT_NODE_SUFFIX)
    ]
    op_types = list(recipe.op_types) if recipe.op_types else None
    if recipe.dynamic:  # DynamicQuantizeLinear + MatMulInteger: standard ONNX ops
        with captured_native_stderr():
            quantize_dynamic(
                str(prepared),
                str(quantized),
                op_types_to_quantize=op_types,
                per_channel=recipe.per_channel,
                reduce_range=recipe.reduce_range,
                weight_type=QuantType.QInt8,
                nodes_to_exclude=excluded or None,
            )
        return
    extra = {"CalibMaxIntermediateOutputs": 64} if recipe.method != "minmax" else {}
    # the histogram calibrators print progress on stdout: keep the command's output clean
    with captured_native_stderr(), contextlib.redirect_stdout(io.StringIO()):
        quantize_static(
            str(prepared),
            str(quantized),
            ImageReader(calibration),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=op_types,
            per_channel=recipe.per_channel,
            reduce_range=recipe.reduce_range,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=excluded or None,
            calibrate_method=CALIBRATION_METHODS[recipe.method],
            extra_options=extra,
        )


def onnx_int8_bytes(src: ExportSource, recipe: OnnxRecipe, name: str = "onnx-int8") -> bytes:
    """The quantized graph of `recipe` with the artifact metadata, as bytes."""
    work = Path(src.scratch) / "onnx-int8"
    work.mkdir(exist_ok=True)
    quantized = work / f"{name}.onnx"
    quantize_int8(fp32_onnx(src), src.calibration, work, quantized, recipe)
    out = work / f"{name}.final.onnx"
    save_onnx(onnx.load(str(quantized)), src, "onnx-int8", out)
    return out.read_bytes()


def onnx_int8_converter(recipe: OnnxRecipe, name: str) -> Callable[[ExportSource, Path], None]:
    """The FORMATS converter of `onnx-int8` by `recipe`: quantize the fp32 graph, metadata, save."""

    def convert(src: ExportSource, path: Path) -> None:
        path.write_bytes(onnx_int8_bytes(src, recipe, name))

    return convert
