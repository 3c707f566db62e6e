"""OP_ARTIFACTS: a one-op Keras model written as .keras, ONNX, ONNX int8, TFLite fp32 and int8.

The ONNX and TFLite files come from the converters of `toolkit export` (tf2onnx with the same
serving function, the same TFLiteConverter recipes), so a verified op is exported as it is
inside an exported model. ONNX int8 is onnxruntime's static QDQ of every op it quantizes, with
7-bit weights, so one bound holds on CPUs with and without VNNI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import keras
import numpy as np
import onnx

from toolkit.export.onnx import keras_to_onnx
from toolkit.export.onnx_int8 import OnnxRecipe, quantize_int8
from toolkit.export.source import ExportSource
from toolkit.export.tflite import FP32, INT8, convert_tflite
from toolkit.formats import DEFAULT_OPSET


@dataclass
class OpExport:
    """A one-op model, its input shape and calibration samples, and a scratch folder."""

    model: keras.Model
    input_shape: tuple[int, ...]
    calibration: np.ndarray
    folder: Path
    opset: int = DEFAULT_OPSET
    _onnx: onnx.ModelProto | None = field(default=None, repr=False)
    _source: ExportSource | None = field(default=None, repr=False)

    def onnx_graph(self) -> onnx.ModelProto:
        """The float32 tf2onnx graph, converted once."""
        if self._onnx is None:
            self._onnx = keras_to_onnx(
                self.model, self.input_shape, self.opset, samples=self.calibration
            )
        return self._onnx

    def source(self) -> ExportSource:
        """An ExportSource for the TFLite converter: no run, calibration set directly."""
        if self._source is None:
            scratch = self.folder / "scratch"
            scratch.mkdir(parents=True, exist_ok=True)
            self._source = ExportSource(
                run=None,  # the TFLite converter only reads model, scratch and calibration
                model=self.model,
                opset=self.opset,
                calib_data=None,
                calib_samples=len(self.calibration),
                scratch=scratch,
                probabilities=False,  # the op's output as it is, no softmax
            )
            self._source.calibration = self.calibration  # overrides the cached property
        return self._source


OP_QDQ = OnnxRecipe(reduce_range=True)


def _keras(op: OpExport, path: Path) -> None:
    op.model.save(path)


def _onnx(op: OpExport, path: Path) -> None:
    onnx.save(op.onnx_graph(), str(path))


def _onnx_int8(op: OpExport, path: Path) -> None:
    """Static QDQ int8 of every op ORT quantizes, with 7-bit weights: the int16 pair sums of
    x86 CPUs without VNNI saturate on 8-bit weights (27-30 output steps off on AVX2-only
    CPUs), which would be the CPU's error, not the op's."""
    work = op.folder / "onnx-int8"
    work.mkdir(exist_ok=True)
    quantize_int8(op.onnx_graph(), op.calibration, work, path, OP_QDQ)


def _tflite(op: OpExport, path: Path) -> None:
    convert_tflite(op.source(), path, FP32)


# the converter's full int8, with the shift spelled as the int8 files ship it (one depthwise
# convolution whose output keeps its input's scale)
OP_INT8 = replace(INT8, depthwise_shift=True)


def _tflite_int8(op: OpExport, path: Path) -> None:
    convert_tflite(op.source(), path, OP_INT8)


@dataclass(frozen=True)
class OpArtifact:
    """One artifact kind of an op model: file, precision and the runtimes that load it."""

    name: str
    filename: str
    precision: str  # "fp32" or "int8"
    runtimes: tuple[str, ...]
    write: Callable[[OpExport, Path], None]


OP_ARTIFACTS: dict[str, OpArtifact] = {
    a.name: a
    for a in (
        OpArtifact("keras", "op.keras", "fp32", ("keras",), _keras),
        OpArtifact("onnx", "op.onnx", "fp32", ("ort-cpu", "ort-cuda"), _onnx),
        OpArtifact("onnx-int8", "op_int8.onnx", "int8", ("ort-cpu", "ort-cuda"), _onnx_int8),
        OpArtifact("tflite", "op_fp32.tflite", "fp32", ("litert",), _tflite),
        OpArtifact("tflite-int8", "op_int8.tflite", "int8", ("litert",), _tflite_int8),
    )
}
PRECISIONS = ("fp32", "int8")


def artifact_for(runtime: str, precision: str) -> OpArtifact | None:
    """The artifact kind of `precision` that `runtime` runs, or None."""
    for artifact in OP_ARTIFACTS.values():
        if artifact.precision == precision and runtime in artifact.runtimes:
            return artifact
    return None
