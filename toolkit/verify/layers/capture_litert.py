"""Boundary tensors of a .tflite file in LiteRT, read with `experimental_preserve_all_tensors`.

The interpreter keeps every intermediate tensor instead of reusing its memory; with the default
op resolver XNNPACK still runs the ops (one delegate partition per op, so that each tensor is
written). int8 tensors are dequantized with their own scale and zero point.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from toolkit.common.native_logs import captured_native_stderr
from toolkit.runtimes import DEFAULT_OPTIONS
from toolkit.runtimes.base import to_input
from toolkit.runtimes.litert import delegated_ops, tensor_spec
from toolkit.verify.layers.boundaries import (
    Boundary,
    Found,
    Graph,
    Op,
    ScopeNames,
    Tap,
    Tensor,
    locate,
)


def _interpreter(path: Path, threads: int | None):
    from ai_edge_litert.interpreter import Interpreter

    with captured_native_stderr(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*experimental_preserve_all_tensors")
        interpreter = Interpreter(
            model_path=str(path), num_threads=threads, experimental_preserve_all_tensors=True
        )
        interpreter.allocate_tensors()
    return interpreter


def _quantization(details: dict) -> tuple[float | None, int | None]:
    params = details["quantization_parameters"]
    scales, zero_points = params["scales"], params["zero_points"]
    if len(scales) == 1 and scales[0] > 0:
        return float(scales[0]), int(zero_points[0])
    return None, None


def _graph(interpreter, details: dict[int, dict]) -> Graph:
    """Ops in execution order (delegate nodes left out) and tensors with their shapes; a
    tensor is called INDEX:NAME, since TFLite names need not be unique."""

    def name(index: int) -> str:
        return f"{index}:{details[index]['name']}" if index in details else str(index)

    tensors = {}
    for index, t in details.items():
        dtype = np.dtype(t["dtype"])
        scale, _ = _quantization(t)
        shape = tuple(int(d) for d in t["shape_signature"]) or tuple(int(d) for d in t["shape"])
        real = bool(np.issubdtype(dtype, np.floating) or scale is not None)
        tensors[name(index)] = Tensor(
            name(index), tuple(None if d < 0 else d for d in shape), real, real
        )
    ops = []
    for op in interpreter._get_ops_details():  # private, but the only op list of the API
        if op["op_name"] == "DELEGATE" or not len(op["outputs"]):
            continue
        outputs = tuple(name(i) for i in op["outputs"] if i >= 0)
        ops.append(
            Op(
                len(ops),
                op["op_name"],
                details[op["outputs"][0]]["name"],
                tuple(name(i) for i in op["inputs"] if i >= 0),
                outputs,
            )
        )
    output = name(interpreter.get_output_details()[0]["index"])
    return Graph(ops, tensors, output)


class LiteRTCapture:
    """A .tflite file opened to read its boundary tensors on a batch of images."""

    def __init__(
        self,
        path: Path,
        model_name: str,
        boundaries: Sequence[Boundary],
        output_layer: str,
        runtime: str = "litert",
    ):
        self.runtime = runtime
        self.interpreter = _interpreter(path, DEFAULT_OPTIONS.threads)
        details = {t["index"]: t for t in self.interpreter.get_tensor_details()}
        self.graph = _graph(self.interpreter, details)
        scopes = ScopeNames(model_name, [b.name for b in boundaries])
        found, self.missing = locate(self.graph, scopes, boundaries, output_layer)
        self.taps = {name: _tap(f, details) for name, f in found.items()}
        entry = self.interpreter.get_input_details()[0]
        self._input = entry["index"]
        self.input_spec = tensor_spec(entry["name"], entry)
        self._batch = int(entry["shape"][0])
        self.providers = delegated_ops(self.interpreter)

    def run(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """Each found boundary's tensor on `images`, float32 in the Keras layout.

        The interpreter runs at the batch it was allocated with (1 for a dynamic batch), as an
        app on a device does: resizing a graph that keeps every tensor makes XNNPACK fail to
        reshape some int8 partitions, and a big batch would keep all its tensors in memory."""
        x = to_input(images, self.input_spec)
        parts: dict[str, list[np.ndarray]] = {name: [] for name in self.taps}
        for start in range(0, len(x), self._batch):
            chunk = x[start : start + self._batch]
            pad = self._batch - len(chunk)
            if pad:
                chunk = np.concatenate([chunk, np.zeros((pad, *chunk.shape[1:]), chunk.dtype)])
            self.interpreter.set_tensor(self._input, chunk)
            self.interpreter.invoke()
            for name, tap in self.taps.items():
                value = self.interpreter.get_tensor(_index(tap.tensor))
                parts[name].append(tap.dequantize(value)[: self._batch - pad])
        return {name: np.concatenate(p) for name, p in parts.items()}


def _index(tensor: str) -> int:
    return int(tensor.split(":", 1)[0])


def _tap(found: Found, details: dict[int, dict]) -> Tap:
    """Read the found tensor itself, with its own int8 scale and zero point if it has them."""
    scale, zero_point = _quantization(details[_index(found.tensor)])
    return Tap(found.tensor, found.op, scale, zero_point, found.layout)
