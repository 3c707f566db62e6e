"""The output quantization step (scale) of an int8 artifact, by file kind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolkit.runtimes import Session


def _tflite_scale(path: Path, session: Session) -> float | None:
    """The int8 output tensor's scale (the adapter dequantizes with it)."""
    return session.output.scale


def _onnx_scale(path: Path, session: Session) -> float | None:
    """Scale of the DequantizeLinear that produces the graph output (QDQ models), else None."""
    import onnx  # here, not at import: `toolkit verify --help` reads cells.py's names
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    output = graph.output[0].name
    initializers = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if output in node.output and node.op_type == "DequantizeLinear":
            scale = initializers.get(node.input[1])
            return None if scale is None else float(numpy_helper.to_array(scale).reshape(-1)[0])
    return None


OUTPUT_SCALE: dict[str, Callable[[Path, Session], float | None]] = {
    ".tflite": _tflite_scale,
    ".onnx": _onnx_scale,
}


def output_scale(path: Path, session: Session) -> float | None:
    """The real-valued step of one int8 output unit, or None for a float output."""
    reader = OUTPUT_SCALE.get(path.suffix)
    return None if reader is None else reader(path, session)
