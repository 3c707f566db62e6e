"""int8 ONNX: onnxruntime static QDQ quantization (per-channel weights) on calibration images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process

from export.onnx import fp32_onnx, save_onnx
from export.signature import INPUT_NAME
from export.source import ExportSource
from toolkit.native_logs import captured_native_stderr

CALIB_BATCH = 32


class ImageReader(CalibrationDataReader):
    """Feeds float32 0-255 image batches to onnxruntime's calibrator."""

    def __init__(self, images: np.ndarray, batch: int = CALIB_BATCH) -> None:
        self._batches = iter([images[i : i + batch] for i in range(0, len(images), batch)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self._batches, None)
        return None if batch is None else {INPUT_NAME: batch}


def quantize_qdq(
    graph: onnx.ModelProto, calibration: np.ndarray, work: Path, quantized: Path
) -> None:
    """The `onnx-int8` recipe: shape inference, then static QDQ int8 calibrated on images."""
    fp32, prepared = work / "fp32.onnx", work / "prepared.onnx"
    onnx.save(graph, str(fp32))
    with captured_native_stderr():
        # symbolic shape inference needs sympy; ONNX shape inference covers these static graphs
        quant_pre_process(str(fp32), str(prepared), skip_symbolic_shape=True)
        quantize_static(
            str(prepared),
            str(quantized),
            ImageReader(calibration),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )


def convert_onnx_int8(src: ExportSource, path: Path) -> None:
    """Converter of `onnx-int8`: `quantize_qdq` of the fp32 graph, then metadata and save."""
    work = Path(src.scratch) / "onnx-int8"
    work.mkdir(exist_ok=True)
    quantized = work / "int8.onnx"
    quantize_qdq(fp32_onnx(src), src.calibration, work, quantized)
    save_onnx(onnx.load(str(quantized)), src, "onnx-int8", path)
