"""The roofline: each runtime's measured peak GMAC/s on one large matrix multiply, fp32 and int8,
and on the CPU runtimes the rate at which a batch-1 call reads as many weights as the model.

ONNX Runtime gets a one-node model built with onnx.helper (MatMul in fp32, MatMulInteger
u8 x s8 in int8); LiteRT a FullyConnected layer converted by TensorFlow (float32, and full
int8 with a representative dataset). The files are built once into a cache folder. A row's
achieved GMAC/s over the peak of its runtime and precision is its roofline fraction.

The memory roof: a batch-1 call reads each layer's weights once, so a layer cannot beat the
rate at which the runtime reads that many bytes times its MACs per weight byte. The rate is
read off the fastest call of the runtime's own 1 x K x N matmul at the row's precision over as
many bytes as the model's weights, net of the fixed cost of a call (a 1 x K x 1 matmul's): the
same working set, served by whichever cache level or memory serves the model's. It is always
measured: a server CPU's last-level cache can hold the weights and still feed one core's
batch-1 calls at memory speed (an Intel Xeon VM that reports a 480 MiB L3 read 11 MiB of
weights at 47-58 GB/s).

A row's attainable GMAC/s applies the roofline (Williams et al., 2009) layer by layer: each
layer takes the longer of its compute and its weight reads, and the layers' times add up,
since one layer's weights are not read while another computes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toolkit.formats import FORMATS
from toolkit.runtimes import RUNTIMES

M = K = N = 1024  # rows, depth, columns: 1.07 GMAC per call, far from cache-bound
MACS = M * K * N
STREAM_K = 4096  # depth of the memory-roof matmul; its columns give it the model's weight bytes
# bytes a weight takes in memory at each peak's precision (fp16 files are widened at load)
WEIGHT_BYTES = {"fp32": 4, "int8": 1}
KERAS_FORMAT = "keras"  # the run's model.keras, benched beside the exported formats


def precision_of(fmt: str) -> str | None:
    """Which peak a row of format `fmt` is held against: the `roofline` of its row in
    toolkit/formats.py (fp32 for the Keras model); None for a format this toolkit does not know."""
    if fmt == KERAS_FORMAT:
        return "fp32"
    return FORMATS[fmt].roofline if fmt in FORMATS else None


Shape = tuple[int, int, int]  # rows (the batch), depth, columns


@dataclass(frozen=True)
class Kernel:
    """A matmul model of one runtime and precision, its shape, and how to build its file."""

    runtime: str
    precision: str
    filename: str
    build: Callable[[Path, Shape], None]
    shape: Shape = (M, K, N)

    @property
    def weight_bytes(self) -> int:
        return self.shape[1] * self.shape[2] * WEIGHT_BYTES[self.precision]


def onnx_matmul(integer: bool, shape: Shape):
    """The one-node ONNX matmul of `shape`: MatMul in fp32, MatMulInteger u8 x s8 in int8."""
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = shape
    rng = np.random.default_rng(0)
    if integer:
        a = helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])
        y = helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])
        # 7-bit weights, like ORT's reduce_range: AVX2 u8 x s8 sums pairs in int16 (saturating)
        w = numpy_helper.from_array(rng.integers(-63, 64, (k, n)).astype(np.int8), "w")
        node = helper.make_node("MatMulInteger", ["a", "w"], ["y"])
    else:
        a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
        w = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "w")
        node = helper.make_node("MatMul", ["a", "w"], ["y"])
    graph = helper.make_graph([node], "matmul", [a], [y], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def build_onnx(integer: bool) -> Callable[[Path, Shape], None]:
    """Writer of the one-node ONNX matmul, fp32 or u8 x s8."""

    def build(path: Path, shape: Shape) -> None:
        path.write_bytes(onnx_matmul(integer, shape).SerializeToString())

    return build


def build_tflite(integer: bool) -> Callable[[Path, Shape], None]:
    """Writer of a LiteRT FullyConnected (keras Dense, no bias), fp32 or full int8."""

    def build(path: Path, shape: Shape) -> None:
        import keras
        import tensorflow as tf

        from toolkit.common.native_logs import captured_native_stderr

        m, k, n = shape
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [keras.Input((k,), batch_size=m), keras.layers.Dense(n, use_bias=False)]
        )
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        if integer:
            rng = np.random.default_rng(0)

            def representative():
                for _ in range(4):
                    yield [rng.uniform(0, 255, (m, k)).astype(np.float32)]

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


# a runtime row's `kernel` -> precision -> (file, writer): the matmul its peaks are measured with
KERNEL_KINDS: dict[str, dict[str, tuple[str, Callable[[Path, Shape], None]]]] = {
    "matmul": {  # ONNX MatMul, and MatMulInteger at int8
        "fp32": ("matmul_fp32.onnx", build_onnx(False)),
        "int8": ("matmul_u8s8.onnx", build_onnx(True)),
    },
    "fully-connected": {  # LiteRT FullyConnected
        "fp32": ("fc_fp32.tflite", build_tflite(False)),
        "int8": ("fc_int8.tflite", build_tflite(True)),
    },
}
# (runtime, precision) -> its kernel, for every runtime row that names a kernel family
KERNELS: dict[tuple[str, str], Kernel] = {
    (name, precision): Kernel(name, precision, filename, build)
    for name, runtime in RUNTIMES.items()
    if runtime.kernel is not None
    for precision, (filename, build) in KERNEL_KINDS[runtime.kernel].items()
}


def stream_kernel(runtime: str, precision: str, weight_bytes: int) -> Kernel:
    """The runtime's batch-1 matmul at `precision` over `weight_bytes` of weights (rounded up to a
    whole column): the working set of a batch-1 call of the model."""
    columns = math.ceil(weight_bytes / (STREAM_K * WEIGHT_BYTES[precision]))
    return dataclasses.replace(KERNELS[runtime, precision], shape=(1, STREAM_K, columns))


def model_weight_bytes(layers: Sequence, precision: str) -> int:
    """Bytes of the model's weights (LayerCost parameters) at a peak's precision."""
    return sum(layer.parameters for layer in layers) * WEIGHT_BYTES[precision]


def cache_dir() -> Path:
    """Where the matmul models are kept: $XDG_CACHE_HOME/toolkit/roofline (~/.cache default)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "toolkit" / "roofline"


def kernel_file(kernel: Kernel, folder: Path) -> Path:
    """The kernel's model file in `folder`, built (atomically) the first time."""
    from toolkit.common import atomic

    m, k, n = kernel.shape
    path = folder / f"{m}x{k}x{n}_v2_{kernel.filename}"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        atomic.write_with(path, lambda tmp: kernel.build(tmp, kernel.shape))
    return path


def peak_gmacs(ms: float) -> float:
    """GMAC/s of one matmul call that took `ms` milliseconds."""
    return MACS / (ms * 1e6)


def bandwidth_gbs(kernel: Kernel, ms: float, base: Kernel, base_ms: float) -> float | None:
    """GB/s of the weight reads of the memory-roof `kernel` (a call of `ms`), net of the fixed
    cost of a call: the slope from the one-column `base` (`base_ms`). None when the call was
    no slower than the base, i.e. its reads cost nothing measurable."""
    if ms <= base_ms:
        return None
    return (kernel.weight_bytes - base.weight_bytes) / ((ms - base_ms) * 1e6)


ATTAINABLE_KEYS = (
    "weight_bytes",
    "attainable_gmacs",
    "memory_bound_share",
    "bound",
    "attainable_fraction",
)


def attainable(
    row: dict,
    peaks: dict[tuple[str, str], float],
    bandwidths: dict[tuple[str, str], float],
    layers: Sequence,
) -> dict:
    """The row's ATTAINABLE_KEYS under a per-layer roofline: each layer (a LayerCost) takes at
    least the longer of its MACs at the peak and its weights' bytes at the bandwidth of its
    runtime and precision; the layers' times add up. Also the weights' bytes, the share of
    that time in memory-bound layers, the `bound` (memory when that share is at least half)
    and the achieved fraction. Empty when the peak, the MACs or the layers are unknown."""
    precision = precision_of(row["format"])
    peak = peaks.get((row["runtime"], precision))
    if peak is None or row.get("gmacs") is None or not layers:
        return {}
    gbs = bandwidths.get((row["runtime"], precision))
    compute_s, memory_s = 0.0, 0.0  # the roofline's time in compute- and memory-bound layers
    for layer in layers:
        compute = layer.macs * row["batch"] / (peak * 1e9)
        memory = 0.0 if gbs is None else layer.parameters * WEIGHT_BYTES[precision] / (gbs * 1e9)
        if memory > compute:
            memory_s += memory
        else:
            compute_s += compute
    macs = sum(layer.macs for layer in layers) * row["batch"]
    gmacs = macs / ((compute_s + memory_s) * 1e9)
    share = memory_s / (compute_s + memory_s)
    return {
        "weight_bytes": model_weight_bytes(layers, precision),
        "attainable_gmacs": gmacs,
        "memory_bound_share": share,
        "bound": "memory" if share >= 0.5 else "compute",
        "attainable_fraction": row["gmacs"] / gmacs,
    }


def fraction(row: dict, peaks: dict[tuple[str, str], float]) -> float | None:
    """A row's achieved GMAC/s over its runtime's peak at its precision (None when unknown)."""
    peak = peaks.get((row["runtime"], precision_of(row["format"])))
    if peak is None or row.get("gmacs") is None:
        return None
    return row["gmacs"] / peak
