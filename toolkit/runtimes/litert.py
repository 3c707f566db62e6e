"""The `litert` runtime: a `.tflite` file in the LiteRT interpreter (XNNPACK by default)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np

from toolkit.common.native_logs import captured_native_stderr
from toolkit.runtimes.base import PreparedRun, RuntimeOptions, TensorSpec, only, run_images

SIGNATURE = "serving_default"


def tensor_spec(name: str, details: dict) -> TensorSpec:
    """TensorSpec from LiteRT tensor details (-1 in shape_signature is a dynamic dimension)."""
    shape = tuple(None if d < 0 else int(d) for d in details["shape_signature"])
    scales = details["quantization_parameters"]["scales"]
    zero_points = details["quantization_parameters"]["zero_points"]
    quantized = len(scales) == 1 and scales[0] > 0
    return TensorSpec(
        name,
        shape,
        np.dtype(details["dtype"]).name,
        float(scales[0]) if quantized else None,
        int(zero_points[0]) if quantized else None,
    )


def delegated_ops(interpreter) -> list[str]:
    """What executes the graph: XNNPACK for delegated nodes, LiteRT's CPU kernels for the rest."""
    ops = getattr(interpreter, "_get_ops_details", None)  # private, but the only way to see it
    if ops is None:
        return ["LiteRT CPU"]
    names = {op["op_name"] for op in ops()}
    return (["XNNPACK"] if "DELEGATE" in names else []) + (
        ["LiteRT CPU"] if names - {"DELEGATE"} else []
    )


def _signature_call(runner, in_name: str, out_name: str) -> Callable[[np.ndarray], np.ndarray]:
    """Run through a signature runner; it resizes the input and allocates tensors itself."""

    def call(x: np.ndarray) -> np.ndarray:
        return runner(**{in_name: x})[out_name]

    return call


class LiteRTSession:
    """A LiteRT interpreter; runs through the signature runner, or through tensor indices."""

    runtime = "litert"

    def __init__(self, interpreter, path: Path, signature: str | None):
        self.interpreter = interpreter
        if signature is not None:
            runner = interpreter.get_signature_runner(signature)
            in_name, in_details = only(list(runner.get_input_details().items()), "input", path)
            out_name, out_details = only(list(runner.get_output_details().items()), "output", path)
            self._call = _signature_call(runner, in_name, out_name)
        else:
            in_details = only(interpreter.get_input_details(), "input", path)
            out_details = only(interpreter.get_output_details(), "output", path)
            in_name, out_name = in_details["name"], out_details["name"]
            self._index = in_details["index"], out_details["index"]
            self._shape = tuple(int(d) for d in in_details["shape"])
            self._call = self._invoke
        self.input = tensor_spec(in_name, in_details)
        self.output = tensor_spec(out_name, out_details)
        self.providers = delegated_ops(interpreter)

    def _invoke(self, x: np.ndarray) -> np.ndarray:
        """set_tensor/invoke/get_tensor, resizing the input first when the batch changes."""
        if x.shape != self._shape:
            with captured_native_stderr():
                self.interpreter.resize_tensor_input(self._index[0], x.shape)
                self.interpreter.allocate_tensors()
            self._shape = x.shape
        self.interpreter.set_tensor(self._index[0], x)
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self._index[1])

    def run(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) float32 0-255 -> (N, classes) float32 logits."""
        return run_images(self._call, images, self.input, self.output)

    def bind(self, images: np.ndarray) -> PreparedRun:
        """`images` in the input's dtype (int8 files: quantized) once, cut into the file's
        batch; `run()` is the interpreter's calls alone, as LiteRT's benchmark_model times."""
        return PreparedRun(self._call, images, self.input, self.output)


def load_interpreter(path: Path, options: RuntimeOptions):
    """ai_edge_litert Interpreter with `options.threads`, tensors allocated (delegate applied)."""
    from ai_edge_litert.interpreter import Interpreter

    with captured_native_stderr():  # "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."
        interpreter = Interpreter(model_path=str(path), num_threads=options.threads)
        interpreter.allocate_tensors()
    return interpreter


def open_litert(path: Path, options: RuntimeOptions) -> LiteRTSession:
    """The `serving_default` signature when the model has one, else its input/output details."""
    interpreter = load_interpreter(path, options)
    signature = SIGNATURE if SIGNATURE in interpreter.get_signature_list() else None
    return LiteRTSession(interpreter, path, signature)


def litert_unavailable() -> str | None:
    """Why LiteRT cannot run here, or None."""
    if importlib.util.find_spec("ai_edge_litert") is None:
        return "litert needs the ai-edge-litert package: pip install ai-edge-litert"
    return None
