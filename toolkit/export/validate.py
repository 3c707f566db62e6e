"""Load a freshly converted artifact in its runtime, run it once, and read its tensors and ops."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from ai_edge_litert.interpreter import Interpreter

from toolkit.common.native_logs import captured_native_stderr
from toolkit.export.conversion_error import ExportError
from toolkit.export.oplist import Op, forbidden_ops, onnx_ops, ort_format_ops, tflite_ops
from toolkit.export.signature import INPUT_NAME, OUTPUT_NAME, PROBABILITIES, SIGNATURE_KEY

ORT_DTYPES = {"tensor(float)": "float32", "tensor(int8)": "int8", "tensor(uint8)": "uint8"}


@dataclass(frozen=True)
class ArtifactInfo:
    """What an app developer codes against, and the ops the runtime must provide."""

    inputs: list[dict]
    outputs: list[dict]
    ops: list[Op]


def probe_images(input_shape: tuple[int, int, int], batch: int) -> np.ndarray:
    """Deterministic float32 0-255 images to run an artifact once."""
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(batch, *input_shape)).astype(np.float32)


def quantize(x: np.ndarray, scale: float, zero_point: int, dtype=np.int8) -> np.ndarray:
    """float32 -> int8 or uint8 with a TFLite tensor's (scale, zero_point)."""
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale + zero_point), info.min, info.max).astype(dtype)


def _check_ops(ops: list[Op], fmt: str) -> None:
    bad = forbidden_ops(ops)
    if bad:
        raise ExportError(f"{fmt}: the graph needs ops not every runtime has: {', '.join(bad)}")


def _check_output(
    y: np.ndarray, batch: int, num_classes: int, fmt: str, what: str = OUTPUT_NAME
) -> None:
    if y.shape != (batch, num_classes) or not np.all(np.isfinite(y)):
        raise ExportError(
            f"{fmt}: a test run gave {what} of shape {y.shape} (finite: "
            f"{bool(np.all(np.isfinite(y)))}), expected ({batch}, {num_classes}) finite values"
        )
    # an int8 softmax's probabilities (search candidates) are multiples of 1/256: each
    # rounds by up to half a step
    atol = 0.01 + num_classes / 512
    if what == PROBABILITIES and not np.allclose(y.sum(axis=-1), 1.0, atol=atol):
        raise ExportError(f"{fmt}: a test run gave probabilities summing to {y.sum(axis=-1)}")


def _ort_tensor(arg: ort.NodeArg) -> dict:
    shape = [d if isinstance(d, int) else None for d in arg.shape]
    dtype = ORT_DTYPES.get(arg.type, arg.type)
    return {"name": arg.name, "shape": shape, "dtype": dtype, "scale": None, "zero_point": None}


def _inspect_in_ort(path: Path, fmt: str, input_shape: tuple[int, int, int], classes: int, ops):
    """Check `ops`, open `path` in onnxruntime (CPU), run a batch of 2 (1 where the file fixes
    the batch at 1), read tensors."""
    _check_ops(ops, fmt)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inputs, outputs = session.get_inputs(), session.get_outputs()
    names = ([a.name for a in inputs], [a.name for a in outputs])
    if names != ([INPUT_NAME], [OUTPUT_NAME]):
        raise ExportError(f"{fmt}: graph inputs/outputs are {names}, expected image -> logits")
    fixed = inputs[0].shape[0]
    batch = fixed if isinstance(fixed, int) and fixed > 0 else 2
    (y,) = session.run(None, {INPUT_NAME: probe_images(input_shape, batch)})
    _check_output(y, batch, classes, fmt)
    return ArtifactInfo([_ort_tensor(a) for a in inputs], [_ort_tensor(a) for a in outputs], ops)


def inspect_onnx(path: Path, fmt: str, input_shape: tuple[int, int, int], classes: int):
    """A .onnx file: its graph's ops, then a run in onnxruntime (CPU)."""
    return _inspect_in_ort(path, fmt, input_shape, classes, onnx_ops(onnx.load(str(path))))


def inspect_ort_format(path: Path, fmt: str, input_shape: tuple[int, int, int], classes: int):
    """An ONNX Runtime format (.ort) file: its ops, then a run in onnxruntime (CPU)."""
    return _inspect_in_ort(path, fmt, input_shape, classes, ort_format_ops(path))


def _litert_tensor(name: str, details: dict) -> dict:
    scale, zero_point = details["quantization"]
    quantized = scale != 0.0
    return {
        "name": name,
        "tensor": details["name"],
        "shape": [None if d < 0 else int(d) for d in details["shape_signature"]],
        "dtype": np.dtype(details["dtype"]).name,
        "scale": float(scale) if quantized else None,
        "zero_point": int(zero_point) if quantized else None,
    }


def inspect_tflite(path: Path, fmt: str, input_shape: tuple[int, int, int], classes: int):
    """Check ops and the signature (image -> probabilities), run one image in the LiteRT
    interpreter, read tensors."""
    ops = tflite_ops(path.read_bytes())
    _check_ops(ops, fmt)
    with captured_native_stderr():  # "INFO: Created TensorFlow Lite XNNPACK delegate"
        interpreter = Interpreter(model_path=str(path))
    expected = {SIGNATURE_KEY: {"inputs": [INPUT_NAME], "outputs": [PROBABILITIES]}}
    if interpreter.get_signature_list() != expected:
        raise ExportError(
            f"{fmt}: signatures are {interpreter.get_signature_list()}, expected {expected}"
        )
    runner = interpreter.get_signature_runner(SIGNATURE_KEY)
    inp = runner.get_input_details()[INPUT_NAME]
    out = runner.get_output_details()[PROBABILITIES]
    x = probe_images(input_shape, 1)
    if np.issubdtype(inp["dtype"], np.integer):
        x = quantize(x, *inp["quantization"], dtype=inp["dtype"])
    with captured_native_stderr():
        y = np.asarray(runner(**{INPUT_NAME: x})[PROBABILITIES], dtype=np.float32)
    if np.issubdtype(out["dtype"], np.integer):
        scale, zero_point = out["quantization"]
        y = (y - zero_point) * scale
    _check_output(y, 1, classes, fmt, PROBABILITIES)
    inputs, outputs = [_litert_tensor(INPUT_NAME, inp)], [_litert_tensor(PROBABILITIES, out)]
    return ArtifactInfo(inputs, outputs, ops)


Inspector = Callable[[Path, str, tuple[int, int, int], int], ArtifactInfo]

# file suffix (of FORMATS[...].filename) -> how to load and check an artifact of that kind
INSPECTORS: dict[str, Inspector] = {
    ".onnx": inspect_onnx,
    ".ort": inspect_ort_format,
    ".tflite": inspect_tflite,
}
