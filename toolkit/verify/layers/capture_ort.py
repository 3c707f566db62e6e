"""Boundary tensors of a .onnx file in ONNX Runtime, read by exposing them as graph outputs.

The boundary tensors are added to the graph's outputs and the copy is opened by the runtime's
own adapter (same providers and session options). In a QDQ int8 graph a boundary is read
before its DequantizeLinear, at the QuantizeLinear output: the int8 tensor itself, dequantized
here with that node's scale and zero point, and a QDQ node group ORT fuses into an int8 kernel
stays fused (a DequantizeLinear output that is a graph output would stop the fusion).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

from toolkit.runtimes import DEFAULT_OPTIONS, RuntimeUnavailable
from toolkit.runtimes.base import TensorSpec, to_input
from toolkit.runtimes.onnxruntime import CPU, CUDA, open_session, tensor_spec
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

FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE}
INTEGER_VALUE_TYPES = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT32}
# how ONNX writes int8 (static QDQ pairs, dynamic per-call quantization): not ops of a layer
QUANTIZATION = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
PROVIDERS = {"ort-cpu": [CPU], "ort-cuda": [CUDA, CPU]}  # runtime -> providers, in order


def _shape(value: onnx.ValueInfoProto) -> tuple[int | None, ...] | None:
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)


def _graph(model: onnx.ModelProto) -> Graph:
    """Nodes in graph order (named by node name, else first output) and inferred tensor types.

    Value tensors: float ones, and the 8- and 32-bit integers computed from values (quantized
    tensors, integer matmul sums); int64 shape arithmetic is not one."""
    inferred = shape_inference.infer_shapes(model)
    values = [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]
    kinds = {v.name: v.type.tensor_type.elem_type for v in values}
    valued = {name for name, kind in kinds.items() if kind in FLOAT_TYPES}
    for node in model.graph.node:
        if any(t in valued for t in node.input):
            valued.update(t for t in node.output if kinds.get(t) in INTEGER_VALUE_TYPES)
    tensors = {
        v.name: Tensor(v.name, _shape(v), v.name in valued, kinds[v.name] in FLOAT_TYPES)
        for v in values
    }
    ops = [
        Op(i, n.op_type, n.name or n.output[0], tuple(n.input), tuple(n.output))
        for i, n in enumerate(model.graph.node)
    ]
    return Graph(ops, tensors, model.graph.output[0].name, QUANTIZATION)


def _constant(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    for init in model.graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    return None


class OrtCapture:
    """A .onnx file opened with its boundary tensors as extra outputs."""

    def __init__(
        self,
        path: Path,
        model_name: str,
        boundaries: Sequence[Boundary],
        output_layer: str,
        runtime: str = "ort-cpu",
    ):
        self.runtime = runtime
        model = onnx.load(str(path))
        self.graph = _graph(model)
        scopes = ScopeNames(model_name, [b.name for b in boundaries])
        found, self.missing = locate(self.graph, scopes, boundaries, output_layer)
        self.taps = {name: _tap(model, self.graph, f) for name, f in found.items()}
        present = {o.name for o in model.graph.output}
        for tensor in dict.fromkeys(tap.tensor for tap in self.taps.values()):
            if tensor not in present:
                model.graph.output.append(onnx.ValueInfoProto(name=tensor))
        # the adapter's session options; its OrtSession takes one output, so not the adapter
        self.session, _ = open_session(
            model.SerializeToString(), DEFAULT_OPTIONS, PROVIDERS[runtime]
        )
        self.providers = list(self.session.get_providers())
        if self.providers[0] != PROVIDERS[runtime][0]:
            raise RuntimeUnavailable(f"{runtime}: ONNX Runtime fell back to {self.providers}")
        self.input_spec: TensorSpec = tensor_spec(self.session.get_inputs()[0])

    def run(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """Each found boundary's tensor on `images`, float32 in the Keras layout."""
        names = list(dict.fromkeys(tap.tensor for tap in self.taps.values()))
        feed = {self.input_spec.name: to_input(images, self.input_spec)}
        values = dict(zip(names, self.session.run(names, feed), strict=True))
        return {name: tap.dequantize(values[tap.tensor]) for name, tap in self.taps.items()}


def _tap(model: onnx.ModelProto, graph: Graph, found: Found) -> Tap:
    """Read a DequantizeLinear(QuantizeLinear(x)) pair with constant parameters at the
    QuantizeLinear output, with its scale and zero point; any other tensor as it is."""
    op = found.op
    source = graph.producer.get(op.inputs[0]) if op.type == "DequantizeLinear" else None
    if source is not None and source.type == "QuantizeLinear" and len(source.inputs) > 1:
        scale = _constant(model, source.inputs[1])
        zero = _constant(model, source.inputs[2]) if len(source.inputs) > 2 else None
        if scale is not None and scale.size == 1:
            zero_point = 0 if zero is None else int(zero.reshape(-1)[0])
            return Tap(
                source.outputs[0], source, float(scale.reshape(-1)[0]), zero_point, found.layout
            )
    return Tap(found.tensor, op, layout=found.layout)
