"""The roofline: each runtime's measured peak GMAC/s on one large matrix multiply, fp32 and int8.

ONNX Runtime gets a one-node model built with onnx.helper (MatMul in fp32, MatMulInteger
u8 x s8 in int8); LiteRT a FullyConnected layer converted by TensorFlow (float32, and full
int8 with a representative dataset). The files are built once into a cache folder. A row's
achieved GMAC/s over the peak of its runtime and precision is its roofline fraction.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

M = K = N = 1024  # rows, depth, columns: 1.07 GMAC per call, far from cache-bound
MACS = M * K * N
KERAS_FORMAT = "keras"  # the run's model.keras, benched beside the exported formats


def precision_of(fmt: str) -> str | None:
    """Which peak a row of format `fmt` is held against: the `roofline` of its row in
    export/formats.py (fp32 for the Keras model); None for a format this toolkit does not know."""
    if fmt == KERAS_FORMAT:
        return "fp32"
    from export.formats import FORMATS  # TensorFlow and the converters: only when asked

    return FORMATS[fmt].roofline if fmt in FORMATS else None


@dataclass(frozen=True)
class Kernel:
    """A matmul model of one runtime and precision, and how to build its file."""

    runtime: str
    precision: str
    filename: str
    build: Callable[[Path], None]


def _onnx_model(integer: bool):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if integer:
        a = helper.make_tensor_value_info("a", TensorProto.UINT8, [M, K])
        y = helper.make_tensor_value_info("y", TensorProto.INT32, [M, N])
        # 7-bit weights, like ORT's reduce_range: AVX2 u8 x s8 sums pairs in int16 (saturating)
        w = numpy_helper.from_array(rng.integers(-63, 64, (K, N)).astype(np.int8), "w")
        node = helper.make_node("MatMulInteger", ["a", "w"], ["y"])
    else:
        a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])
        w = numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32), "w")
        node = helper.make_node("MatMul", ["a", "w"], ["y"])
    graph = helper.make_graph([node], "matmul", [a], [y], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def build_onnx(integer: bool) -> Callable[[Path], None]:
    """Writer of the one-node ONNX matmul, fp32 or u8 x s8."""

    def build(path: Path) -> None:
        path.write_bytes(_onnx_model(integer).SerializeToString())

    return build


def build_tflite(integer: bool) -> Callable[[Path], None]:
    """Writer of a LiteRT FullyConnected (keras Dense, no bias), fp32 or full int8."""

    def build(path: Path) -> None:
        import keras
        import tensorflow as tf

        from toolkit.native_logs import captured_native_stderr

        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [keras.Input((K,), batch_size=M), keras.layers.Dense(N, use_bias=False)]
        )
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        if integer:
            rng = np.random.default_rng(0)

            def representative():
                for _ in range(4):
                    yield [rng.uniform(0, 255, (M, K)).astype(np.float32)]

            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = representative
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
        with (
            captured_native_stderr(),
            contextlib.redirect_stdout(io.StringIO()),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")  # "Statistics for quantized inputs were expected"
            path.write_bytes(converter.convert())  # keras export prints "Saved artifact at"

    return build


KERNELS: dict[tuple[str, str], Kernel] = {
    (k.runtime, k.precision): k
    for k in (
        Kernel("ort-cpu", "fp32", "matmul_fp32.onnx", build_onnx(False)),
        Kernel("ort-cpu", "int8", "matmul_u8s8.onnx", build_onnx(True)),
        Kernel("ort-cuda", "fp32", "matmul_fp32.onnx", build_onnx(False)),
        Kernel("ort-cuda", "int8", "matmul_u8s8.onnx", build_onnx(True)),
        Kernel("litert", "fp32", "fc_fp32.tflite", build_tflite(False)),
        Kernel("litert", "int8", "fc_int8.tflite", build_tflite(True)),
    )
}


def cache_dir() -> Path:
    """Where the matmul models are kept: $XDG_CACHE_HOME/toolkit/roofline (~/.cache default)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "toolkit" / "roofline"


def kernel_file(kernel: Kernel, folder: Path) -> Path:
    """The kernel's model file in `folder`, built (atomically) the first time."""
    from toolkit import atomic

    path = folder / f"{M}x{K}x{N}_v2_{kernel.filename}"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        atomic.write_with(path, kernel.build)
    return path


def peak_gmacs(ms: float) -> float:
    """GMAC/s of one matmul call that took `ms` milliseconds."""
    return MACS / (ms * 1e6)


def fraction(row: dict, peaks: dict[tuple[str, str], float]) -> float | None:
    """A row's achieved GMAC/s over its runtime's peak at its precision (None when unknown)."""
    peak = peaks.get((row["runtime"], precision_of(row["format"])))
    if peak is None or row.get("gmacs") is None:
        return None
    return row["gmacs"] / peak
