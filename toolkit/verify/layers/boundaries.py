"""Block boundaries of a Keras model, and how an exported graph's tensor names map back to them.

A boundary is a top-level layer of the functional model (patch embedding, each shift, norm,
MLP and residual add of a ShiftViT block, each patch merge, each transformer block's attention
and MLP, the head), in graph order, with its output shape. Converters keep the Keras layer as
a name scope: TF->TFLite tensors are called `shiftvit_1/stage0_block0_add_1/Add` and tf2onnx
nodes `shiftvit_1/stage0_block0_add_1/Add` too (ONNX Runtime's quantizer adds
`..._QuantizeLinear`). So a tensor belongs to the layer named by the scope right below the
model's, and a layer's output in an artifact is the last tensor of its scope (graph order) that
is read outside the scope, with the Keras output's shape. Matching by name, never by position,
keeps a converter's reordering or fusion from pairing the wrong tensors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import keras
import numpy as np

from toolkit.ops import Dropout, DropPath

# Layers that are the identity at inference: no op of theirs survives conversion.
IDENTITY_LAYERS: tuple[type, ...] = (
    keras.layers.InputLayer,
    keras.layers.Dropout,
    Dropout,
    DropPath,
)
NCHW_TO_NHWC = (0, 2, 3, 1)  # tf2onnx runs convolutions channels-first


@dataclass(frozen=True)
class Boundary:
    """One top-level Keras layer whose output is compared: name, class, output shape."""

    name: str
    kind: str  # the layer's class name
    shape: tuple[int, ...]  # output shape without the batch dimension
    depth: int  # position in the boundary list (the plot's x axis)


def model_boundaries(model: keras.Model) -> list[Boundary]:
    """The model's top-level layers in graph order, identity-at-inference ones left out."""
    out: list[Boundary] = []
    for layer in model.layers:
        if isinstance(layer, IDENTITY_LAYERS) or isinstance(layer.output, (list, tuple)):
            continue
        shape = tuple(int(d) for d in layer.output.shape[1:])
        out.append(Boundary(layer.name, type(layer).__name__, shape, len(out)))
    return out


def output_boundary(model: keras.Model, boundaries: Sequence[Boundary]) -> str:
    """The boundary whose tensor is the model's output: the artifact's graph output."""
    name = model.outputs[0]._keras_history.operation.name
    if name not in {b.name for b in boundaries}:
        raise ValueError(f"the model's output layer '{name}' is not a boundary")
    return name


def keras_tensors(
    model: keras.Model, boundaries: Sequence[Boundary], images: np.ndarray, chunk: int
) -> dict[str, np.ndarray]:
    """Each boundary's Keras output on `images` (float32 0-255), float32, in chunks."""
    probe = keras.Model(model.inputs[0], [model.get_layer(b.name).output for b in boundaries])
    parts: list[list[np.ndarray]] = [[] for _ in boundaries]
    for start in range(0, len(images), chunk):
        outs = probe(images[start : start + chunk], training=False)
        for i, t in enumerate(outs):
            parts[i].append(np.asarray(keras.ops.convert_to_numpy(t), np.float32))
    return {b.name: np.concatenate(p) for b, p in zip(boundaries, parts, strict=True)}


# -- locating boundaries in an exported graph --


@dataclass(frozen=True)
class Tensor:
    """A tensor of an exported graph as the locator sees it."""

    name: str
    shape: tuple[int | None, ...] | None  # batch dimension included; None: unknown
    value: bool  # computed from the data (not shape arithmetic): its op is listed
    real: bool  # holds real numbers, as floats or as int8 with a scale: it can be a boundary


@dataclass(frozen=True)
class Op:
    """One op (node) of an exported graph, in graph order."""

    index: int
    type: str
    name: str  # what carries the Keras scope: the node name (ONNX) or output tensor (TFLite)
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class Graph:
    """An exported graph: ops in graph order, tensors by name, the model's output tensor."""

    ops: list[Op]
    tensors: dict[str, Tensor]
    output: str
    # op types that only re-express a tensor (ONNX's quantize/dequantize nodes, named after the
    # tensor they take): left out of op lists, and reading a tensor they do not use it
    notation: frozenset[str] = frozenset()
    producer: dict[str, Op] = field(init=False)
    consumers: dict[str, list[Op]] = field(init=False)

    def __post_init__(self) -> None:
        self.producer = {t: op for op in self.ops for t in op.outputs}
        self.consumers = {}
        for op in self.ops:
            for t in op.inputs:
                self.consumers.setdefault(t, []).append(op)


@dataclass(frozen=True)
class Found:
    """Where a boundary's tensor is read: the tensor and the op that makes it."""

    tensor: str
    op: Op
    layout: tuple[int, ...] | None = None  # permutation to the Keras layout (NCHW -> NHWC)


@dataclass(frozen=True)
class Tap:
    """How a capture reads one boundary: the tensor, its op, its int8 grid, its layout."""

    tensor: str  # the artifact's tensor name
    op: Op  # the op that writes it
    scale: float | None = None  # int8: real = scale * (q - zero_point); None: float
    zero_point: int | None = None
    layout: tuple[int, ...] | None = None

    def dequantize(self, value: np.ndarray) -> np.ndarray:
        """The tensor as float32 in the Keras layout."""
        if self.scale is not None:
            value = (np.asarray(value, np.float32) - (self.zero_point or 0)) * self.scale
        value = np.asarray(value, np.float32)
        return np.transpose(value, self.layout) if self.layout else value


class ScopeNames:
    """Maps a graph name to the top-level Keras layer whose scope it is in."""

    def __init__(self, model_name: str, layer_names: Sequence[str]):
        self._model = re.compile(rf"{re.escape(model_name)}(_\d+)?")
        # longest names first, so `block1_add` is not read as `block1` plus a suffix
        self._layers = [
            (n, re.compile(rf"{re.escape(n)}(_\d+)?")) for n in sorted(layer_names, key=len)[::-1]
        ]

    def layer(self, segment: str) -> str | None:
        return next((n for n, p in self._layers if p.fullmatch(segment)), None)

    def scopes(self, name: str) -> list[str]:
        """The layers named in `name`, first the owner's: TFLite joins the names of fused ops
        with ';', the op's own result first (`a/BiasAdd;a/convolution`)."""
        found: list[str] = []
        for part in name.split(";"):
            segments = part.split("/")
            if len(segments) >= 2 and self._model.fullmatch(segments[0]):
                layer = self.layer(segments[1])
                if layer is not None and layer not in found:
                    found.append(layer)
        return found

    def owner(self, name: str) -> str | None:
        """The layer whose scope an op is in (the first one its name gives), or None."""
        layers = self.scopes(name)
        return layers[0] if layers else None


def _fits(shape: tuple[int | None, ...] | None, wanted: tuple[int, ...]) -> bool:
    """`shape` (batch first) equals (batch, *wanted); unknown dimensions match anything."""
    if shape is None or len(shape) != len(wanted) + 1:
        return False
    return all(s is None or s == w for s, w in zip(shape[1:], wanted, strict=True))


def _layout(shape: tuple[int | None, ...] | None, wanted: tuple[int, ...]) -> tuple | None:
    """() when `shape` is the Keras shape, NCHW_TO_NHWC when it is its channels-first form."""
    if _fits(shape, wanted):
        return ()
    if shape is not None and len(wanted) == 3:
        h, w, c = wanted
        if _fits(shape, (c, h, w)):
            return NCHW_TO_NHWC
    return None


def locate(
    graph: Graph,
    scopes: ScopeNames,
    boundaries: Sequence[Boundary],
    output_layer: str,
    shape_of: Callable[[str], tuple[int | None, ...] | None] | None = None,
) -> tuple[dict[str, Found], dict[str, str]]:
    """(found, missing): each boundary's tensor in `graph`, or why it has none.

    A boundary's tensor is the last one (graph order) made by an op in the layer's scope alone,
    read by an op outside it (or the graph output), whose shape is the Keras output's (or its
    channels-first form). The model's output layer is the graph output. `shape_of` overrides the
    static shapes (e.g. measured ones)."""
    shape_of = shape_of or (lambda t: graph.tensors[t].shape if t in graph.tensors else None)
    owned: dict[str, list[Op]] = {}
    fused: dict[str, list[Op]] = {}  # layer -> ops of other layers that took in its ops
    for op in graph.ops:
        owner, *others = _layers_of(graph, scopes, op) or [None]
        if owner is not None:
            owned.setdefault(owner, []).append(op)
        for layer in others:
            fused.setdefault(layer, []).append(op)
    found: dict[str, Found] = {}
    missing: dict[str, str] = {}
    for b in boundaries:
        hit = None
        if b.name == output_layer and graph.output in graph.producer:
            layout = _layout(shape_of(graph.output), b.shape)
            if layout is not None:
                hit = Found(graph.output, graph.producer[graph.output], layout or None)
        for op in reversed(owned.get(b.name, []) if hit is None else []):
            hit = next((f for f in _outputs(graph, scopes, b, op, shape_of)), None)
            if hit is not None:
                break
        later = [op for op in fused.get(b.name, []) if hit is None or op.index > hit.op.index]
        if hit is not None and not later:
            found[b.name] = hit
        else:
            missing[b.name] = _why_missing(graph, b, owned.get(b.name, []), later, scopes)
    return found, missing


def _layers_of(graph: Graph, scopes: ScopeNames, op: Op) -> list[str]:
    """The layers `op`'s name gives, its owner first. TFLite names a fused op after its own
    result first; but when it folds a layer's constant scale and shift into the weights of the
    op that reads them (a LayerNormalization's gamma and beta into the next Dense), the folded
    layer comes first, and it also made the op's input: then the next layer named owns it."""
    layers = scopes.scopes(op.name)
    if len(layers) > 1 and layers[0] in _input_layers(graph, scopes, op):
        return [*layers[1:], layers[0]]
    return layers


def _input_layers(graph: Graph, scopes: ScopeNames, op: Op) -> set[str]:
    """Owners of the ops whose values `op` reads, through unnamed one-input ops (QUANTIZE)."""
    owners = set()
    for t in op.inputs:
        producer = graph.producer.get(t)
        while producer is not None and not scopes.scopes(producer.name):
            if len(producer.inputs) != 1:
                break
            producer = graph.producer.get(producer.inputs[0])
        if producer is not None and (owner := scopes.owner(producer.name)) is not None:
            owners.add(owner)
    return owners


def _outputs(graph: Graph, scopes: ScopeNames, b: Boundary, op: Op, shape_of) -> list[Found]:
    """The outputs of `op` that can be `b`'s tensor: values read outside the layer (or the
    graph output) with the Keras output's shape."""
    out = []
    for t in op.outputs:
        tensor = graph.tensors.get(t)
        if tensor is None or not tensor.real:
            continue
        readers = graph.consumers.get(t, [])
        if t != graph.output and all(
            scopes.owner(c.name) == b.name and c.type not in graph.notation for c in readers
        ):
            continue
        layout = _layout(shape_of(t), b.shape)
        if layout is not None:
            out.append(Found(t, op, layout or None))
    return out


def _why_missing(
    graph: Graph, b: Boundary, owned: list[Op], fused: list[Op], scopes: ScopeNames
) -> str:
    if fused:
        op = fused[-1]
        owner = _layers_of(graph, scopes, op)[0]
        return f"not found: fused by the converter into {op.type} of '{owner}'"
    if not owned:
        return "not found: no op keeps this layer's name (the converter fused or renamed it)"
    shape = "x".join(map(str, b.shape))
    return f"not found: no tensor of shape {shape} leaves the layer (fused by the converter)"


def ops_between(graph: Graph, after: Op | None, upto: Op) -> list[str]:
    """Types of the value ops after `after` up to `upto` in graph order (shape math and the
    graph's notation ops left out), repeats counted: ['MEAN', 'SQUARED_DIFFERENCE', 'MUL x2']."""
    start = -1 if after is None else after.index
    types = [
        op.type
        for op in graph.ops
        if start < op.index <= upto.index
        and op.type not in graph.notation
        and any(graph.tensors.get(t) is not None and graph.tensors[t].value for t in op.outputs)
    ]
    out: list[str] = []
    for kind in types:
        if out and out[-1].split(" x")[0] == kind:
            count = int(out[-1].split(" x")[1]) + 1 if " x" in out[-1] else 2
            out[-1] = f"{kind} x{count}"
        else:
            out.append(kind)
    return out
