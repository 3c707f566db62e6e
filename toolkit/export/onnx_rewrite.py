"""Rewrites of the tf2onnx graph into what ONNX Runtime runs fastest, in standard ops only.

tf2onnx spells a Keras model op by op: LayerNormalization as 13 elementwise and reduce nodes,
GELU as Mul/Erf/Add/Mul/Mul with x/sqrt(2) written as a multiplication (which ONNX Runtime's
Gelu fusion does not recognise), and every Dense on tokens as TensorFlow's Tensordot:
Shape -> Gather -> Concat -> Cast -> Reshape around a 2-D MatMul, shape arithmetic that runs
on every call. The passes here, each checked against the shapes the graph really produces:

- `fuse_layer_norm`: the moments pattern over the last axis -> LayerNormalization (opset 17).
- `fuse_gelu`: the erf GELU -> the Div form that ORT fuses into one Gelu kernel when loading.
- `fuse_tensordot`: Reshape -> MatMul(2-D weight) -> Reshape back -> one N-D MatMul.
- `additive_diagonal_mask`: LSA's diagonal-masked softmax (fill the diagonal with the row
  minimum, softmax, zero the diagonal, renormalise: 8 nodes) -> Add(scores, the lowest float32
  on the diagonal) -> Softmax, the same weights; its two nodes stay float in static int8.
- `fuse_attention` (opset >= 23): each attention core, from the query, key and value
  projections' outputs to the merged heads (head split Reshapes and Transposes, the scaling
  Mul, QK^T, the LSA mask Add, Softmax, the product with V, the head merge) -> one standard
  Attention node on the 3-D projections: the seed ViT-LSA's 8 cores took ONNX Runtime 2.2 ms
  of node time in 96 nodes, and take 1.1 ms as 8 (records/notes/cpu_speed.md).
- `constant_reshapes`: a Reshape whose shape is computed at run time, and whose output has at
  most one dimension that depends on the batch, gets a constant shape (-1 for that dimension).
- `drop_identity_resizes`: a Resize to the size it already has (Resizing at the input size).
- `drop_dead_nodes`: nodes and initializers nothing reads any more (the shape arithmetic).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from toolkit.export.conversion_error import ExportError
from toolkit.export.oplist import STANDARD_ONNX_DOMAINS
from toolkit.formats import ATTENTION_OPSET
from toolkit.ops.attention import DIAGONAL_FILL  # exp(lowest - row max) is exactly 0

FLOAT_NODE_SUFFIX = "/keep_float"  # nodes a static int8 recipe must leave float (export.onnx_int8)
OBSERVED_BATCHES = (2, 3)  # two batch sizes: a dimension that differs between them is dynamic
REWRITE_TOLERANCE = 1e-4  # relative to the largest output: float reassociation, nothing more
SQRT_HALF = float(np.sqrt(0.5))


@dataclass
class GraphIndex:
    """Producers, consumers and constant values of one graph, rebuilt after every pass."""

    model: onnx.ModelProto
    producer: dict[str, onnx.NodeProto] = field(default_factory=dict)
    consumers: dict[str, list[onnx.NodeProto]] = field(default_factory=dict)
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        graph = self.model.graph
        consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for node in graph.node:
            for name in node.output:
                self.producer[name] = node
            for name in node.input:
                consumers[name].append(node)
            if node.op_type == "Constant" and len(node.attribute) == 1:
                attr = node.attribute[0]
                if attr.name == "value":
                    self.constants[node.output[0]] = numpy_helper.to_array(attr.t)
        for out in graph.output:
            consumers[out.name].append(None)  # a graph output counts as a reader
        self.consumers = dict(consumers)
        self.constants.update({i.name: numpy_helper.to_array(i) for i in graph.initializer})

    def node(self, name: str, op_type: str) -> onnx.NodeProto | None:
        """The node of `op_type` producing `name`, or None."""
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def readers(self, name: str) -> list[onnx.NodeProto | None]:
        return self.consumers.get(name, [])

    def only_reader(self, name: str, op_type: str) -> onnx.NodeProto | None:
        """The single node reading `name`, when it is of `op_type`."""
        readers = self.readers(name)
        if len(readers) == 1 and readers[0] is not None and readers[0].op_type == op_type:
            return readers[0]
        return None

    def scalar(self, name: str) -> float | None:
        """The value of a one-element constant, or None."""
        value = self.constants.get(name)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None

    def split_constant(self, node: onnx.NodeProto) -> tuple[str, np.ndarray] | None:
        """(other input, constant) of a binary node with exactly one constant input."""
        if len(node.input) != 2:
            return None
        a, b = node.input
        if b in self.constants and a not in self.constants:
            return a, self.constants[b]
        if a in self.constants and b not in self.constants:
            return b, self.constants[a]
        return None


Shapes = dict[str, tuple[tuple[int, ...], ...]]  # value name -> its shape at each observed batch


def _session(model: onnx.ModelProto):
    """A CPU session of `model` exactly as written (ORT's own optimisations off)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])


def probe_inputs(model: onnx.ModelProto, batches: tuple[int, ...] = OBSERVED_BATCHES) -> list:
    """Seeded 0-255 float inputs of the graph's one input, one per batch size."""
    dims = model.graph.input[0].type.tensor_type.shape.dim[1:]
    rng = np.random.default_rng(0)
    return [
        rng.uniform(0, 255, (b, *(d.dim_value for d in dims))).astype(np.float32) for b in batches
    ]


def observe_shapes(model: onnx.ModelProto, batches: tuple[int, ...] = OBSERVED_BATCHES) -> Shapes:
    """The shape of every tensor the graph computes, run by ONNX Runtime at each batch size.

    Shapes are read from a real run rather than inferred, so shape arithmetic is resolved;
    a dimension equal at every batch is static, one that differs depends on the batch.
    """
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    inferred = onnx.shape_inference.infer_shapes(probe)
    types = {v.name: v.type for v in [*inferred.graph.value_info, *inferred.graph.output]}
    known = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in known and name in types:
                probe.graph.output.append(onnx.ValueInfoProto(name=name, type=types[name]))
                known.add(name)
    session = _session(probe)
    names = [o.name for o in session.get_outputs()]
    inputs = probe_inputs(model, batches)
    runs = [session.run(names, {model.graph.input[0].name: x}) for x in inputs]
    shapes: Shapes = {model.graph.input[0].name: tuple(x.shape for x in inputs)}
    for i, name in enumerate(names):
        shapes[name] = tuple(tuple(int(d) for d in np.shape(run[i])) for run in runs)
    return shapes


def outputs(model: onnx.ModelProto, inputs: list) -> list:
    """The graph's first output for each of `inputs`."""
    session = _session(model)
    return [session.run(None, {model.graph.input[0].name: x})[0] for x in inputs]


def _dynamic_dims(shapes: tuple[tuple[int, ...], ...]) -> list[int]:
    """Dimensions that differ between the observed batches."""
    return [i for i, dims in enumerate(zip(*shapes, strict=True)) if len(set(dims)) > 1]


def replace_node(model: onnx.ModelProto, old: onnx.NodeProto, new: list[onnx.NodeProto]) -> None:
    """Put `new` where `old` was in the node list (the graph stays topologically sorted)."""
    nodes = model.graph.node
    index = next(i for i, n in enumerate(nodes) if n is old)
    del nodes[index]
    for offset, node in enumerate(new):
        nodes.insert(index + offset, node)


def _add_initializer(model: onnx.ModelProto, name: str, value: np.ndarray) -> str:
    model.graph.initializer.append(numpy_helper.from_array(value, name))
    return name


def _attrs(node: onnx.NodeProto) -> dict:
    """A node's attributes by name, as Python values."""
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _last_axis_reduce(
    g: GraphIndex, node: onnx.NodeProto | None, op_type: str, rank: int
) -> str | None:
    """The input of a keepdims `op_type` reduction (ReduceMean, ReduceMin, ...) over the last
    axis only of a rank-`rank` tensor, or None."""
    if node is None or node.op_type != op_type:
        return None
    attrs = _attrs(node)
    axes = attrs.get("axes")
    if axes is None and len(node.input) > 1:  # an input since opset 13 (ReduceSum) or 18
        value = g.constants.get(node.input[1])
        axes = None if value is None else value.reshape(-1).tolist()
    if attrs.get("keepdims", 1) != 1 or axes is None or [a % rank for a in axes] != [rank - 1]:
        return None
    return node.input[0]


def _last_axis_mean(g: GraphIndex, node: onnx.NodeProto | None, rank: int) -> str | None:
    """The input of a keepdims mean over the last axis (ReduceMean, or GlobalAveragePool on a
    rank-3 tensor, whose only spatial axis is the last), or None."""
    if node is not None and node.op_type == "GlobalAveragePool":
        return node.input[0] if rank == 3 else None
    return _last_axis_reduce(g, node, "ReduceMean", rank)


def _layer_norm_at(g: GraphIndex, sqrt: onnx.NodeProto, shapes: Shapes) -> tuple | None:
    """Match tf2onnx's LayerNormalization around one Sqrt:

        mean = mean(x); var = mean((x - mean)^2); r = 1 / sqrt(var + eps); m = r * gamma
        out = x * m + (beta + (-mean) * m)

    Returns (the final Add, x, gamma, beta, eps) or None.
    """
    add_eps = g.node(sqrt.input[0], "Add")
    split = add_eps and g.split_constant(add_eps)
    if not split or split[1].size != 1:
        return None
    var_name, eps = split[0], float(split[1].reshape(-1)[0])
    var_node = g.producer.get(var_name)
    if var_node is None or var_node.input[0] not in shapes:
        return None
    rank = len(shapes[var_node.input[0]][0])
    square = g.node(_last_axis_mean(g, var_node, rank) or "", "Mul")
    if square is None or square.input[0] != square.input[1]:
        return None
    diff = g.node(square.input[0], "Sub")
    if diff is None:
        return None
    x, mean_name = diff.input
    mean_node = g.producer.get(mean_name)
    if _last_axis_mean(g, mean_node, rank) != x:
        return None
    recip = g.only_reader(sqrt.output[0], "Reciprocal")
    scale = recip and g.only_reader(recip.output[0], "Mul")
    gamma = scale and g.split_constant(scale)
    if not gamma or gamma[0] != recip.output[0]:
        return None
    m = scale.output[0]
    readers = g.readers(m)
    if len(readers) != 2 or any(r is None or r.op_type != "Mul" for r in readers):
        return None
    by_other = {(r.input[1] if r.input[0] == m else r.input[0]): r for r in readers}
    neg = next((g.node(n, "Neg") for n in by_other if n != x), None)
    if x not in by_other or neg is None or neg.input[0] != mean_name:
        return None
    x_scaled, mean_scaled = by_other[x], by_other[neg.output[0]]
    shift = g.only_reader(mean_scaled.output[0], "Add")
    beta = shift and g.split_constant(shift)
    if not beta:
        return None
    out = g.only_reader(shift.output[0], "Add")
    if out is None or set(out.input) != {x_scaled.output[0], shift.output[0]}:
        return None
    channels = shapes[x][0][-1]
    if gamma[1].size != channels or beta[1].size != channels:
        return None
    return out, x, gamma[1].reshape(-1), beta[1].reshape(-1), eps


def fuse_layer_norm(model: onnx.ModelProto, shapes: Shapes) -> int:
    """Every last-axis moments normalisation -> one LayerNormalization node; returns the count."""
    g = GraphIndex(model)
    sqrts = [n for n in model.graph.node if n.op_type == "Sqrt"]
    matches = [m for n in sqrts if (m := _layer_norm_at(g, n, shapes))]
    for out, x, gamma, beta, eps in matches:
        base = out.name or out.output[0]
        scale = _add_initializer(model, f"{base}/gamma", gamma.astype(np.float32))
        bias = _add_initializer(model, f"{base}/beta", beta.astype(np.float32))
        node = helper.make_node(
            "LayerNormalization",
            [x, scale, bias],
            [out.output[0]],
            name=f"{base}/LayerNormalization",
            axis=-1,
            epsilon=eps,
        )
        replace_node(model, out, [node])
    return len(matches)


def _close(value: float | None, target: float) -> bool:
    return value is not None and abs(value - target) <= 1e-5 * abs(target)


def gelu_at(g: GraphIndex, erf: onnx.NodeProto) -> tuple | None:
    """Match 0.5 * x * (1 + erf(x * sqrt(1/2))) in tf2onnx's or ORT's spelling around one Erf.

    Returns (the final Mul, x) or None.
    """
    pre = g.producer.get(erf.input[0])
    split = pre is not None and pre.op_type in ("Mul", "Div") and g.split_constant(pre)
    if not split or split[1].size != 1:
        return None
    x, k = split[0], float(split[1].reshape(-1)[0])
    if not (_close(k, SQRT_HALF) if pre.op_type == "Mul" else _close(k, 1 / SQRT_HALF)):
        return None
    add = g.only_reader(erf.output[0], "Add")
    one = add and g.split_constant(add)
    if not one or not _close(float(one[1].reshape(-1)[0]), 1.0) or one[1].size != 1:
        return None
    mul = g.only_reader(add.output[0], "Mul")
    if mul is None:
        return None
    other = next(iter(set(mul.input) - {add.output[0]}), None)
    if other == x:  # (x * (1 + erf)) * 0.5
        half = g.only_reader(mul.output[0], "Mul")
        scale = half and g.split_constant(half)
        return (half, x) if scale and _close(float(scale[1].reshape(-1)[0]), 0.5) else None
    halved = g.node(other or "", "Mul")  # (0.5 * x) * (1 + erf)
    scale = halved and g.split_constant(halved)
    if scale and scale[0] == x and _close(float(scale[1].reshape(-1)[0]), 0.5):
        return mul, x
    return None


def fuse_gelu(model: onnx.ModelProto) -> int:
    """Every erf GELU -> the Div/Erf/Add/Mul/Mul form that ONNX Runtime's Gelu fusion
    recognises when it loads the graph; returns the count.

    Standard ops at any opset: ORT's fused Gelu ran as fast as the opset-20 Gelu operator
    (167 us either way for a 65x256 MatMul-Gelu-MatMul, ORT 1.31, 2 threads), and tf2onnx
    targets opset 18 at most.
    """
    g = GraphIndex(model)
    matches = [m for n in model.graph.node if n.op_type == "Erf" if (m := gelu_at(g, n))]
    if not matches:
        return 0
    root2 = _add_initializer(model, "gelu/sqrt2", np.array(1 / SQRT_HALF, np.float32))
    one = _add_initializer(model, "gelu/one", np.array(1.0, np.float32))
    half = _add_initializer(model, "gelu/half", np.array(0.5, np.float32))
    for out, x in matches:
        base = out.name or out.output[0]
        t = [f"{base}/gelu_{i}" for i in range(4)]
        nodes = [
            helper.make_node("Div", [x, root2], [t[0]], name=t[0]),
            helper.make_node("Erf", [t[0]], [t[1]], name=t[1]),
            helper.make_node("Add", [t[1], one], [t[2]], name=t[2]),
            helper.make_node("Mul", [x, t[2]], [t[3]], name=t[3]),
            helper.make_node("Mul", [t[3], half], [out.output[0]], name=f"{base}/Gelu"),
        ]
        replace_node(model, out, nodes)
    return len(matches)


def fuse_tensordot(model: onnx.ModelProto, shapes: Shapes) -> int:
    """Reshape(x, [-1, C]) -> MatMul(., W) -> Reshape(., x.shape[:-1] + [N]) -> MatMul(x, W)."""
    g = GraphIndex(model)
    count = 0
    for matmul in list(model.graph.node):
        if matmul.op_type != "MatMul" or matmul.input[1] not in g.constants:
            continue
        flat = g.node(matmul.input[0], "Reshape")
        back = g.only_reader(matmul.output[0], "Reshape")
        if flat is None or back is None or g.constants[matmul.input[1]].ndim != 2:
            continue
        x = flat.input[0]
        if x not in shapes or back.output[0] not in shapes:
            continue
        width = g.constants[matmul.input[1]].shape[1]
        fits = all(
            len(xs) >= 3 and out == (*xs[:-1], width)
            for xs, out in zip(shapes[x], shapes[back.output[0]], strict=True)
        )
        if not fits:
            continue
        matmul.input[0] = x
        matmul.output[0] = back.output[0]
        replace_node(model, back, [])
        count += 1
    return count


def _identity(value: np.ndarray | None) -> bool:
    """Whether `value` is a square identity matrix (leading ones in its shape allowed)."""
    if value is None or value.ndim < 2 or value.shape[-1] != value.shape[-2]:
        return False
    return np.array_equal(value.reshape(value.shape[-2:]), np.eye(value.shape[-1]))


def _diagonal_softmax_at(g: GraphIndex, softmax: onnx.NodeProto, shapes: Shapes) -> tuple | None:
    """Match `toolkit.ops.attention.mask_diagonal_softmax` as tf2onnx spells it, at its Softmax:

        low = ReduceMin(s); p = Softmax(s * keep + low * eye) * keep; out = p / ReduceSum(p)

    with keep = 1 - eye, eye an identity. Returns (the final Div, s, eye) or None.
    """
    attrs = _attrs(softmax)
    add = g.node(softmax.input[0], "Add")
    if add is None or attrs.get("axis", -1) != -1 or len(g.readers(add.output[0])) != 1:
        return None
    muls = [g.node(name, "Mul") for name in add.input]
    if any(m is None for m in muls):
        return None
    split = [g.split_constant(m) for m in muls]
    if any(s is None for s in split):
        return None
    by_input = dict(split)  # the non-constant input of each Mul -> its constant
    low = next((g.producer.get(name) for name in by_input if g.node(name, "ReduceMin")), None)
    rank = len(shapes[low.input[0]][0]) if low is not None and low.input[0] in shapes else 0
    scores = _last_axis_reduce(g, low, "ReduceMin", rank) if rank else None
    if scores is None or set(by_input) != {scores, low.output[0]}:
        return None
    eye, keep = by_input[low.output[0]], by_input[scores]
    if not _identity(eye) or keep.shape != eye.shape or not np.array_equal(keep, 1 - eye):
        return None
    again = g.only_reader(softmax.output[0], "Mul")
    kept = again and g.split_constant(again)
    if not kept or kept[0] != softmax.output[0] or not np.array_equal(kept[1], keep):
        return None
    readers = g.readers(again.output[0])
    total = next((r for r in readers if r is not None and r.op_type == "ReduceSum"), None)
    div = next((r for r in readers if r is not None and r.op_type == "Div"), None)
    if len(readers) != 2 or _last_axis_reduce(g, total, "ReduceSum", rank) != again.output[0]:
        return None
    if div is None or list(div.input) != [again.output[0], total.output[0]]:
        return None
    return div, scores, eye


def additive_diagonal_mask(model: onnx.ModelProto, shapes: Shapes) -> int:
    """Every LSA diagonal-masked softmax -> Add(scores, DIAGONAL_FILL on the diagonal) ->
    Softmax; returns the count.

    The diagonal gets weight exactly 0 and the others those of a -inf mask: the same weights
    in 2 nodes instead of 8 (the seed ViT-LSA's ONNX file 1.18x faster at batch 1). Such a fill
    would stretch an int8 scale, so both nodes are named to stay float in static int8
    (FLOAT_NODE_SUFFIX). The TFLite files get the same spelling from Keras
    (AdditiveMaskLocalitySelfAttention) where their recipe keeps the mask float.
    """
    g = GraphIndex(model)
    softmaxes = [n for n in model.graph.node if n.op_type == "Softmax"]
    matches = [m for n in softmaxes if (m := _diagonal_softmax_at(g, n, shapes))]
    for div, scores, eye in matches:
        base = div.name or div.output[0]
        bias = np.where(eye == 1, DIAGONAL_FILL, 0.0).astype(np.float32)
        fill = _add_initializer(model, f"{base}/diagonal_fill", bias)
        masked = f"{base}/masked_scores"
        nodes = [
            helper.make_node("Add", [scores, fill], [masked], name=masked + FLOAT_NODE_SUFFIX),
            helper.make_node(
                "Softmax", [masked], [div.output[0]], name=f"{base}/Softmax{FLOAT_NODE_SUFFIX}"
            ),
        ]
        replace_node(model, div, nodes)
    return len(matches)


def default_opset(model: onnx.ModelProto) -> int:
    """The model's opset of the default ONNX domain."""
    return next(o.version for o in model.opset_import if o.domain in STANDARD_ONNX_DOMAINS)


def _heads_of(g: GraphIndex, name: str, perm: list[int]) -> tuple[str, int, int, int] | None:
    """(3-D input, tokens, heads, head size) when `name` is Transpose(`perm`) of
    Reshape(x, [-1, T, H, D]) and each is read once: a head split."""
    transpose = g.node(name, "Transpose")
    if transpose is None or _attrs(transpose).get("perm") != perm or len(g.readers(name)) != 1:
        return None
    reshape = g.node(transpose.input[0], "Reshape")
    if reshape is None or len(g.readers(reshape.output[0])) != 1:
        return None
    shape = g.constants.get(reshape.input[1])
    if shape is None or shape.shape != (4,) or shape[0] != -1 or min(shape[1:]) < 1:
        return None
    return reshape.input[0], int(shape[1]), int(shape[2]), int(shape[3])


def _attention_at(g: GraphIndex, softmax: onnx.NodeProto) -> tuple | None:
    """Match one attention core as tf2onnx spells `toolkit.ops.attention.SelfAttention` (after
    `additive_diagonal_mask`), at its Softmax:
    Transpose(Reshape(q3), [0,2,1,3]) * scale -> MatMul with Transpose(Reshape(k3), [0,2,3,1])
    [-> Add(constant T x T mask)] -> Softmax -> MatMul with Transpose(Reshape(v3), [0,2,1,3])
    -> Transpose [0,2,1,3] -> Reshape [-1, T, H*D].
    The scale is one constant, or one per head ((1, H, 1, 1): LSA's per-head temperature).
    Returns (the final Reshape, q3, k3, v3, mask or None, heads, scale, per-head scales or
    None); q3, k3 and v3 may be 2-D (N*T, H*D): tf2onnx merges the Reshape back to tokens of a
    projection without bias into the head split."""
    if _attrs(softmax).get("axis", -1) not in (-1, 3):
        return None
    scores, mask = softmax.input[0], None
    add = g.node(scores, "Add")
    if add is not None and len(g.readers(scores)) == 1:
        split = g.split_constant(add)
        if split is None or split[1].ndim != 2:
            return None
        scores, mask = split[0], next(i for i in add.input if i != split[0])
    qk = g.node(scores, "MatMul")
    if qk is None or len(g.readers(scores)) != 1:
        return None
    scaled = g.producer.get(qk.input[0])
    if scaled is None or scaled.op_type not in ("Mul", "Div") or len(g.readers(qk.input[0])) != 1:
        return None
    split = g.split_constant(scaled)
    if split is None or (scaled.op_type == "Div" and split[0] != scaled.input[0]):
        return None
    q = _heads_of(g, split[0], [0, 2, 1, 3])
    k = _heads_of(g, qk.input[1], [0, 2, 3, 1])
    av = g.only_reader(softmax.output[0], "MatMul")
    if q is None or k is None or av is None or av.input[0] != softmax.output[0]:
        return None
    v = _heads_of(g, av.input[1], [0, 2, 1, 3])
    merge = g.only_reader(av.output[0], "Transpose")
    if v is None or merge is None or _attrs(merge).get("perm") != [0, 2, 1, 3]:
        return None
    out = g.only_reader(merge.output[0], "Reshape")
    tokens, heads, size = q[1:]
    if out is None or not (q[1:] == k[1:] == v[1:]):
        return None
    shape = g.constants.get(out.input[1])
    if shape is None or list(shape) != [-1, tokens, heads * size]:
        return None
    if mask is not None and g.constants[mask].shape != (tokens, tokens):
        return None
    factor = split[1].astype(np.float64)
    if factor.shape == (1, heads, 1, 1) and heads > 1:  # one scale per head
        head_scale = (
            factor.reshape(heads) if scaled.op_type == "Mul" else 1.0 / factor.reshape(heads)
        )
        return out, q[0], k[0], v[0], mask, heads, 1.0, head_scale
    if factor.size != 1:
        return None
    value = float(factor.reshape(-1)[0])
    scale = value if scaled.op_type == "Mul" else 1.0 / value
    return out, q[0], k[0], v[0], mask, heads, scale, None


def _as_tokens(
    model: onnx.ModelProto,
    shapes: Shapes,
    name: str,
    tokens_shape: np.ndarray,
    prefix: str,
    nodes: list[onnx.NodeProto],
) -> str:
    """`name` when it is 3-D (N, T, H*D), else the output of a Reshape of it to `tokens_shape`,
    appended to `nodes`."""
    if len(shapes.get(name, ((),))[0]) == 3:
        return name
    shape = _add_initializer(model, f"{prefix}_tokens_shape", tokens_shape.copy())
    nodes.append(
        helper.make_node("Reshape", [name, shape], [f"{prefix}_tokens"], name=f"{prefix}_tokens")
    )
    return nodes[-1].output[0]


def fuse_attention(model: onnx.ModelProto, shapes: Shapes) -> int:
    """Every attention core -> one Attention node (opset >= ATTENTION_OPSET; below it, nothing);
    returns the count. The node takes the 3-D query, key and value projections and gives the
    merged heads, softmax(q k^T * scale + mask) v per head, in float: its name carries
    FLOAT_NODE_SUFFIX, as the mask's nodes it replaces did. A projection that is not 3-D gets
    a Reshape to (N, T, H*D) first; per-head scales multiply the query's columns of each head
    (a Mul, float too) and the node's scale is 1."""
    if default_opset(model) < ATTENTION_OPSET:
        return 0
    g = GraphIndex(model)
    softmaxes = [n for n in model.graph.node if n.op_type == "Softmax"]
    matches = [m for n in softmaxes if (m := _attention_at(g, n))]
    for out, q, k, v, mask, heads, scale, head_scale in matches:
        base = (out.name or out.output[0]).rsplit("/", 1)[0]
        tokens_shape = g.constants[out.input[1]]  # [-1, T, H*D]
        nodes: list[onnx.NodeProto] = []
        q, k, v = (
            _as_tokens(model, shapes, name, tokens_shape, f"{base}/{role}", nodes)
            for name, role in ((q, "query"), (k, "key"), (v, "value"))
        )
        if head_scale is not None:
            size = int(tokens_shape[2]) // heads
            columns = np.repeat(head_scale, size).astype(np.float32)
            factor = _add_initializer(model, f"{base}/head_scale", columns)
            name = f"{base}/head_scale{FLOAT_NODE_SUFFIX}"
            nodes.append(helper.make_node("Mul", [q, factor], [f"{base}/scaled_query"], name=name))
            q = nodes[-1].output[0]
        node = helper.make_node(
            "Attention",
            [q, k, v] + ([mask] if mask else []),
            [out.output[0]],
            name=f"{base}/Attention{FLOAT_NODE_SUFFIX}",
            q_num_heads=heads,
            kv_num_heads=heads,
            scale=scale,
        )
        replace_node(model, out, [*nodes, node])
    return len(matches)


def constant_reshapes(model: onnx.ModelProto, shapes: Shapes) -> int:
    """Give every Reshape with a computed shape a constant one, when its output has at most
    one batch-dependent dimension (written -1); returns the count."""
    g = GraphIndex(model)
    count = 0
    for node in model.graph.node:
        if node.op_type != "Reshape" or node.input[1] in g.constants:
            continue
        observed = shapes.get(node.output[0])
        if observed is None or len(dynamic := _dynamic_dims(observed)) > 1:
            continue
        target = np.array(observed[0], np.int64)
        target[dynamic] = -1
        if 0 in target:
            continue  # a zero means "copy the input's dimension" to Reshape
        name = _add_initializer(model, f"{node.name or node.output[0]}/shape", target)
        node.input[1] = name
        count += 1
    return count


def drop_dead_nodes(model: onnx.ModelProto) -> int:
    """Remove nodes none of whose outputs is read, then unread initializers; returns nodes gone."""
    graph = model.graph
    live = {o.name for o in graph.output}
    keep = []
    for node in reversed(graph.node):
        if any(o in live for o in node.output):
            keep.append(node)
            live.update(node.input)
    removed = len(graph.node) - len(keep)
    del graph.node[:]
    graph.node.extend(reversed(keep))
    used = [i for i in graph.initializer if i.name in live]
    del graph.initializer[:]
    graph.initializer.extend(used)
    names = {i.name for i in used} | {v for n in graph.node for v in n.output}
    kept_info = [v for v in graph.value_info if v.name in names]
    del graph.value_info[:]
    graph.value_info.extend(kept_info)
    return removed


def drop_identity_resizes(model: onnx.ModelProto, shapes: Shapes) -> int:
    """Bypass every Resize whose output has its input's shape (a Resizing layer at the model's
    own input size): at scale 1 each output pixel is the input pixel. Returns the count."""
    count = 0
    graph_outputs = {o.name for o in model.graph.output}
    for node in list(model.graph.node):
        modes = _attrs(node)
        if node.op_type != "Resize" or modes.get("coordinate_transformation_mode") == (
            b"tf_crop_and_resize"
        ):
            continue
        source, result = node.input[0], node.output[0]
        if source not in shapes or shapes.get(result) != shapes[source]:
            continue
        if result in graph_outputs:
            replace_node(
                model, node, [helper.make_node("Identity", [source], [result], name=node.name)]
            )
        else:
            replace_node(model, node, [])
            for reader in model.graph.node:
                for i, name in enumerate(reader.input):
                    if name == result:
                        reader.input[i] = source
        count += 1
    return count


PASSES: dict[str, Callable[[onnx.ModelProto, Shapes], int]] = {
    "identity_resize": drop_identity_resizes,
    "tensordot_to_matmul": fuse_tensordot,
    "constant_reshape_shapes": constant_reshapes,
    "layer_normalization": fuse_layer_norm,
    "gelu": lambda model, _: fuse_gelu(model),
    "additive_diagonal_mask": additive_diagonal_mask,
    "attention": fuse_attention,
}


def rewrite(model: onnx.ModelProto, samples: np.ndarray | None = None) -> dict[str, int]:
    """Apply every pass in place, each followed by dropping what no longer feeds the output;
    returns how many places each pass changed (and `dead_nodes_removed`, in all).

    Raises ExportError when the rewritten graph's output differs from the original's on the
    probe inputs (a pass that matched what it should not): a bug, never a silent change.
    `samples` (at least 3) are inputs of the graph's own distribution: an op graph fed
    activations must not be probed with 0-255 pixels, where attention scores grow so large
    that the softmax turns on float rounding, in the original graph as much as the rewritten.
    Default: `probe_inputs`, the pixels a model's image input takes.
    """
    if samples is None:
        inputs = probe_inputs(model)
    elif len(samples) < max(OBSERVED_BATCHES):
        raise ValueError(f"the rewrite check needs {max(OBSERVED_BATCHES)} samples or more")
    else:
        inputs = [np.asarray(samples[:b], np.float32) for b in OBSERVED_BATCHES]
    before = outputs(model, inputs)
    shapes = observe_shapes(model)
    done, dead = {}, 0
    for name, apply in PASSES.items():  # each pass sees only what still feeds the output
        done[name] = apply(model, shapes)
        dead += drop_dead_nodes(model)
    done["dead_nodes_removed"] = dead
    what = f"the ONNX graph rewrites ({', '.join(k for k, v in done.items() if v)})"
    check_unchanged(what, inputs, before, outputs(model, inputs))
    return done


def check_unchanged(what: str, inputs: list, before: list, after: list) -> None:
    """ExportError unless each output of `after` is within REWRITE_TOLERANCE (relative to the
    output's scale) of `before`'s on the same input: a rewrite that moved it is a bug."""
    for x, want, got in zip(inputs, before, after, strict=True):
        error = float(np.max(np.abs(got - want)))
        if not error <= REWRITE_TOLERANCE * max(1.0, float(np.max(np.abs(want)))):
            raise ExportError(
                f"{what} changed the output by up to {error:.3g} on a batch of {len(x)}: a "
                "toolkit bug, report it"
            )
