"""export/onnx_rewrite.py on small graphs spelled the way tf2onnx spells Keras layers: each pass
fuses what it should, leaves what it should not, and the rewritten graph computes the same."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from toolkit.export import onnx_rewrite
from toolkit.export.conversion_error import ExportError
from toolkit.export.onnx_int8 import OnnxRecipe, quantize_int8
from toolkit.export.onnx_rewrite import (
    ATTENTION_OPSET,
    FLOAT_NODE_SUFFIX,
    additive_diagonal_mask,
    constant_reshapes,
    drop_dead_nodes,
    drop_identity_resizes,
    fuse_attention,
    fuse_gelu,
    fuse_layer_norm,
    fuse_tensordot,
    observe_shapes,
    rewrite,
)
from toolkit.export.signature import INPUT_NAME

TOKENS, WIDTH, OUT = 5, 8, 6
RNG = np.random.default_rng(0)


class Builder:
    """Nodes and initializers of a graph from `x` (batch, TOKENS, WIDTH) to `y`."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def const(self, value) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        self.count += 1
        out = f"t{self.count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def model(
        self, y: str, rank: int = 3, out: list | None = None, opset: int = 17
    ) -> onnx.ModelProto:
        self.nodes.append(helper.make_node("Identity", [y], ["y"], name="out"))
        dims = ["batch", TOKENS, WIDTH] if rank == 3 else ["batch", 2, 3, WIDTH]
        graph = helper.make_graph(
            self.nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, out or dims)],
            self.inits,
        )
        opsets = [helper.make_opsetid("", opset)]
        model = helper.make_model(graph, opset_imports=opsets)
        model.ir_version = helper.find_min_ir_version_for(opsets)
        return model


def tf2onnx_layer_norm(b: Builder, x: str, gamma, beta, eps: float, mean_op: str) -> str:
    """LayerNormalization as tf2onnx writes Keras' (moments, rsqrt as Sqrt + Reciprocal)."""

    def mean(t: str) -> str:
        return (
            b.op("GlobalAveragePool", t)
            if mean_op == "gap"
            else b.op("ReduceMean", t, axes=[-1], keepdims=1)
        )

    mu = mean(x)
    neg = b.op("Neg", mu)
    diff = b.op("Sub", x, mu)
    var = mean(b.op("Mul", diff, diff))
    inv = b.op("Reciprocal", b.op("Sqrt", b.op("Add", var, b.const(np.float32(eps)))))
    m = b.op("Mul", inv, b.const(gamma))
    scaled = b.op("Mul", x, m)
    shift = b.op("Add", b.op("Mul", neg, m), b.const(beta))
    return b.op("Add", scaled, shift)


def tf2onnx_gelu(b: Builder, x: str) -> str:
    """The erf GELU as tf2onnx writes Keras' (x * sqrt(1/2), constants first)."""
    erf = b.op("Erf", b.op("Mul", x, b.const(np.float32(np.sqrt(0.5)))))
    plus = b.op("Add", b.const(np.float32(1.0)), erf)
    return b.op("Mul", b.op("Mul", b.const(np.float32(0.5)), x), plus)


def tensordot(b: Builder, x: str, weight: np.ndarray) -> str:
    """A Dense on tokens as TF's Tensordot: shape arithmetic around a 2-D MatMul."""
    shape = b.op("Shape", x)
    lead = b.op("Gather", shape, b.const(np.array([0, 1], np.int64)), axis=0)
    target = b.op("Concat", lead, b.const(np.array([weight.shape[1]], np.int64)), axis=0)
    flat = b.op("Reshape", x, b.const(np.array([-1, weight.shape[0]], np.int64)))
    return b.op("Reshape", b.op("MatMul", flat, b.const(weight)), target)


def tf2onnx_diagonal_softmax(b: Builder, x: str, eye: np.ndarray) -> str:
    """LSA's mask_diagonal_softmax on scores x.x^T (batch, TOKENS, TOKENS), as tf2onnx writes it."""
    scores = b.op("MatMul", x, b.op("Transpose", x, perm=[0, 2, 1]))
    keep = b.const((1 - eye).astype(np.float32))
    low = b.op("ReduceMin", scores, axes=[-1], keepdims=1)
    filled = b.op("Add", b.op("Mul", scores, keep), b.op("Mul", low, b.const(eye)))
    weights = b.op("Mul", b.op("Softmax", filled, axis=-1), keep)
    return b.op("Div", weights, b.op("ReduceSum", weights, b.const(np.array([-1], np.int64))))


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


def ops(model: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in model.graph.node)


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _x(batch: int = 4, rank: int = 3) -> np.ndarray:
    shape = (batch, TOKENS, WIDTH) if rank == 3 else (batch, 2, 3, WIDTH)
    return RNG.normal(size=shape).astype(np.float32) * 3 + 1


@pytest.mark.parametrize("mean_op, rank", [("gap", 3), ("reduce", 3), ("reduce", 4)])
def test_layer_norm_becomes_one_node_with_the_same_values(mean_op, rank):
    b = Builder()
    gamma = RNG.normal(size=WIDTH).astype(np.float32)
    beta = RNG.normal(size=WIDTH).astype(np.float32)
    model = b.model(tf2onnx_layer_norm(b, "x", gamma, beta, 1e-3, mean_op), rank)
    before = _copy(model)
    assert fuse_layer_norm(model, observe_shapes(model)) == 1
    drop_dead_nodes(model)
    onnx.checker.check_model(model, full_check=True)
    assert ops(model) == Counter({"LayerNormalization": 1, "Identity": 1})
    (norm,) = [n for n in model.graph.node if n.op_type == "LayerNormalization"]
    attrs = {a.name: helper.get_attribute_value(a) for a in norm.attribute}
    assert attrs["axis"] == -1 and attrs["epsilon"] == pytest.approx(1e-3)
    x = _x(rank=rank)
    np.testing.assert_allclose(run(model, x), run(before, x), atol=1e-5)
    reference = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(run(model, x), reference * gamma + beta, atol=1e-4)


def test_a_normalisation_over_another_axis_is_left_alone():
    b = Builder()
    mu = b.op("ReduceMean", "x", axes=[1], keepdims=1)
    diff = b.op("Sub", "x", mu)
    var = b.op("ReduceMean", b.op("Mul", diff, diff), axes=[1], keepdims=1)
    inv = b.op("Reciprocal", b.op("Sqrt", b.op("Add", var, b.const(np.float32(1e-3)))))
    m = b.op("Mul", inv, b.const(np.ones(WIDTH, np.float32)))
    y = b.op("Add", b.op("Mul", "x", m), b.op("Add", b.op("Mul", b.op("Neg", mu), m), b.const(
        np.zeros(WIDTH, np.float32))))  # fmt: skip
    model = b.model(y)
    assert fuse_layer_norm(model, observe_shapes(model)) == 0


def test_gelu_takes_the_form_onnx_runtime_fuses(tmp_path):
    b = Builder()
    model = b.model(tf2onnx_gelu(b, "x"))
    before = _copy(model)
    assert fuse_gelu(model) == 1
    drop_dead_nodes(model)
    x = _x()
    np.testing.assert_allclose(run(model, x), run(before, x), atol=1e-6)
    fused = {}
    for name, graph in (("before", before), ("after", model)):
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(tmp_path / f"{name}.onnx")
        ort.InferenceSession(graph.SerializeToString(), options, ["CPUExecutionProvider"])
        fused[name] = ops(onnx.load(options.optimized_model_filepath))
    assert "Gelu" not in fused["before"] and fused["before"]["Erf"] == 1
    assert fused["after"]["Gelu"] == 1 and "Erf" not in fused["after"]


def test_tensordot_becomes_one_matmul_and_its_shape_arithmetic_goes():
    b = Builder()
    weight = RNG.normal(size=(WIDTH, OUT)).astype(np.float32)
    model = b.model(tensordot(b, "x", weight), out=["batch", TOKENS, OUT])
    before = _copy(model)
    assert fuse_tensordot(model, observe_shapes(model)) == 1
    drop_dead_nodes(model)
    assert ops(model) == Counter({"MatMul": 1, "Identity": 1})
    for batch in (1, 7):
        x = _x(batch)
        np.testing.assert_allclose(run(model, x), run(before, x), atol=1e-5)


def test_a_computed_reshape_gets_a_constant_shape_with_minus_one_for_the_batch():
    b = Builder()
    shape = b.op("Shape", "x")
    batch = b.op("Gather", shape, b.const(np.array([0], np.int64)), axis=0)
    target = b.op("Concat", batch, b.const(np.array([TOKENS * WIDTH], np.int64)), axis=0)
    model = b.model(b.op("Reshape", "x", target), out=["batch", TOKENS * WIDTH])
    before = _copy(model)
    assert constant_reshapes(model, observe_shapes(model)) == 1
    drop_dead_nodes(model)
    assert ops(model) == Counter({"Reshape": 1, "Identity": 1})
    (reshape,) = [n for n in model.graph.node if n.op_type == "Reshape"]
    shape_value = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    assert shape_value[reshape.input[1]].tolist() == [-1, TOKENS * WIDTH]
    for n in (1, 5):
        x = _x(n)
        np.testing.assert_array_equal(run(model, x), run(before, x))


def test_a_reshape_with_two_batch_dependent_dimensions_keeps_its_computed_shape():
    b = Builder()
    column = b.op("Reshape", "x", b.const(np.array([-1, 1], np.int64)))
    row = b.op("Reshape", "x", b.const(np.array([1, -1], np.int64)))
    square = b.op("Mul", column, row)  # (n, n) with n = batch * TOKENS * WIDTH
    model = b.model(b.op("Reshape", square, b.op("Shape", square)), out=["n", "n"])
    assert constant_reshapes(model, observe_shapes(model)) == 0


def test_rewrite_runs_every_pass_on_a_transformer_block():
    b = Builder()
    gamma, beta = np.ones(WIDTH, np.float32), np.zeros(WIDTH, np.float32)
    h = tf2onnx_layer_norm(b, "x", gamma, beta, 1e-6, "gap")
    h = tf2onnx_gelu(b, tensordot(b, h, RNG.normal(size=(WIDTH, WIDTH)).astype(np.float32)))
    model = b.model(b.op("Add", "x", h))
    before = _copy(model)
    done = rewrite(model)
    assert done["layer_normalization"] == 1 and done["gelu"] == 1
    assert done["tensordot_to_matmul"] == 1 and done["dead_nodes_removed"] > 0
    assert not {"Shape", "Gather", "Concat", "Reshape", "Sqrt"} & set(ops(model))
    onnx.checker.check_model(model, full_check=True)
    x = _x(3)
    np.testing.assert_allclose(run(model, x), run(before, x), atol=1e-5)


def test_a_resize_to_its_own_size_is_bypassed():
    b = Builder()
    ones = b.const(np.ones(4, np.float32))
    model = b.model(b.op("Relu", b.op("Resize", "x", "", ones, mode="linear")), rank=4)
    before = _copy(model)
    assert drop_identity_resizes(model, observe_shapes(model)) == 1
    assert "Resize" not in ops(model)
    x = _x(rank=4)
    np.testing.assert_array_equal(run(model, x), run(before, x))


def test_a_pass_that_changes_the_output_is_refused(monkeypatch):
    def corrupt(model, shapes):
        weight = next(i for i in model.graph.initializer if len(i.dims) == 2)
        weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 2, weight.name))
        return 1

    b = Builder()
    model = b.model(tensordot(b, "x", RNG.normal(size=(WIDTH, OUT)).astype(np.float32)), out=[
        "batch", TOKENS, OUT])  # fmt: skip
    monkeypatch.setitem(onnx_rewrite.PASSES, "corrupt", corrupt)
    with pytest.raises(ExportError, match="corrupt.*changed the output"):
        rewrite(model)


def _masked_softmax_model(eye: np.ndarray) -> onnx.ModelProto:
    b = Builder()
    return b.model(tf2onnx_diagonal_softmax(b, "x", eye), out=["batch", TOKENS, TOKENS])


def test_lsa_diagonal_mask_becomes_an_add_and_a_softmax_with_the_weights_of_a_minus_inf_mask():
    model = _masked_softmax_model(np.eye(TOKENS, dtype=np.float32))
    assert additive_diagonal_mask(model, observe_shapes(model)) == 1
    drop_dead_nodes(model)
    onnx.checker.check_model(model, full_check=True)
    assert ops(model) == Counter(
        {"MatMul": 1, "Transpose": 1, "Add": 1, "Softmax": 1, "Identity": 1}
    )
    marked = [n.op_type for n in model.graph.node if n.name.endswith(FLOAT_NODE_SUFFIX)]
    assert sorted(marked) == ["Add", "Softmax"]
    x = _x()
    logits = (x @ x.transpose(0, 2, 1)).astype(np.float64)
    logits[:, np.arange(TOKENS), np.arange(TOKENS)] = -np.inf
    e = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(run(model, x), e / e.sum(-1, keepdims=True), atol=1e-6)
    assert np.diagonal(run(model, x), axis1=1, axis2=2).max() == 0.0


def test_a_mask_that_is_not_the_diagonal_is_left_alone():
    shifted = np.roll(np.eye(TOKENS, dtype=np.float32), 1, axis=1)
    model = _masked_softmax_model(shifted)
    assert additive_diagonal_mask(model, observe_shapes(model)) == 0


def test_static_int8_leaves_the_marked_mask_nodes_float(tmp_path):
    model = _masked_softmax_model(np.eye(TOKENS, dtype=np.float32))
    rewrite(model)
    model.graph.input[0].name = INPUT_NAME  # what the calibration reader feeds
    for node in model.graph.node:
        node.input[:] = [INPUT_NAME if i == "x" else i for i in node.input]
    quantized = tmp_path / "int8.onnx"
    calibration = _x(batch=8)
    quantize_int8(model, calibration, tmp_path, quantized, OnnxRecipe(op_types=None))
    int8 = onnx.load(str(quantized))
    readers = {i: n.op_type for n in int8.graph.node for i in n.input}
    marked = [n for n in int8.graph.node if n.name.endswith(FLOAT_NODE_SUFFIX)]
    assert len(marked) == 2 and all(readers.get(n.output[0]) != "QuantizeLinear" for n in marked)
    assert "QuantizeLinear" in ops(int8)  # the scores MatMul is still int8
    session = ort.InferenceSession(str(quantized), providers=["CPUExecutionProvider"])
    weights = session.run(None, {INPUT_NAME: calibration})[0]
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)  # no int8 scale saw the fill


HEADS, HEAD_SIZE = 2, 4  # WIDTH = HEADS * HEAD_SIZE


def tf2onnx_attention(
    b: Builder,
    x: str,
    mask: np.ndarray | None,
    div: bool,
    flat: bool = False,
    per_head: bool = False,
) -> str:
    """SelfAttention's core on projections of x, as tf2onnx writes it (after
    `additive_diagonal_mask`): head split Reshape + Transpose of q, k (to k^T) and v, q scaled,
    QK^T, the mask Add, Softmax, the product with v, the head merge. `flat`: projections
    without bias, whose 2-D MatMul (N*T, W) tf2onnx reshapes straight into heads; `per_head`:
    LSA's scale per head, a (1, H, 1, 1) constant."""
    rows = b.op("Reshape", x, b.const(np.array([-1, WIDTH], np.int64))) if flat else x

    def heads(perm: list[int]) -> str:
        kernel = b.const(RNG.normal(size=(WIDTH, WIDTH)).astype(np.float32))
        projected = b.op("MatMul", rows, kernel)
        split = b.const(np.array([-1, TOKENS, HEADS, HEAD_SIZE], np.int64))
        return b.op("Transpose", b.op("Reshape", projected, split), perm=perm)

    q, k, v = heads([0, 2, 1, 3]), heads([0, 2, 3, 1]), heads([0, 2, 1, 3])
    scale = b.const(np.float32(2.0 if div else 0.5))
    if per_head:
        scale = b.const(np.array([2.0, 0.25], np.float32).reshape(1, HEADS, 1, 1))
    scores = b.op("MatMul", b.op("Div" if div else "Mul", q, scale), k)
    if mask is not None:
        scores = b.op("Add", scores, b.const(mask))
    attended = b.op("MatMul", b.op("Softmax", scores, axis=-1), v)
    merge = b.const(np.array([-1, TOKENS, WIDTH], np.int64))
    return b.op("Reshape", b.op("Transpose", attended, perm=[0, 2, 1, 3]), merge)


@pytest.mark.parametrize("masked", [True, False], ids=["lsa", "plain"])
@pytest.mark.parametrize("div", [False, True], ids=["mul", "div"])
def test_an_attention_core_becomes_one_attention_node_from_opset_23(masked, div):
    mask = np.where(np.eye(TOKENS, dtype=bool), np.finfo(np.float32).min, 0).astype(np.float32)
    b = Builder()
    y = tf2onnx_attention(b, "x", mask if masked else None, div)
    model = b.model(y, opset=ATTENTION_OPSET)
    before = _copy(model)
    assert fuse_attention(model, observe_shapes(model)) == 1
    drop_dead_nodes(model)
    assert ops(model) == Counter({"MatMul": 3, "Attention": 1, "Identity": 1})
    [node] = [n for n in model.graph.node if n.op_type == "Attention"]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["q_num_heads"] == attrs["kv_num_heads"] == HEADS
    assert attrs["scale"] == pytest.approx(0.5) and len(node.input) == 3 + masked
    assert node.name.endswith(FLOAT_NODE_SUFFIX)  # static int8 leaves it float
    onnx.checker.check_model(model, full_check=True)
    x = _x()
    np.testing.assert_allclose(run(model, x), run(before, x), rtol=1e-5, atol=1e-5)
    older = _copy(before)
    older.opset_import[0].version = 18  # no Attention op before opset 23
    assert fuse_attention(older, observe_shapes(older)) == 0


@pytest.mark.parametrize(("flat", "per_head"), [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("div", [False, True], ids=["mul", "div"])
def test_bias_free_projections_and_per_head_scales_fuse_with_the_same_values(flat, per_head, div):
    """The paper-cifar ViTs: q, k, v without bias reach the head split 2-D (a Reshape to
    tokens is put back before Attention, which takes 3-D); LSA's per-head scale multiplies the
    query's columns of each head and the node's scale is 1."""
    mask = np.where(np.eye(TOKENS, dtype=bool), np.finfo(np.float32).min, 0).astype(np.float32)
    b = Builder()
    model = b.model(tf2onnx_attention(b, "x", mask, div, flat, per_head), opset=ATTENTION_OPSET)
    before = _copy(model)
    assert fuse_attention(model, observe_shapes(model)) == 1
    drop_dead_nodes(model)
    counts = ops(model)
    assert counts["Attention"] == 1 and counts["Softmax"] == 0
    assert counts["Mul"] == per_head and counts["Div"] == 0
    [node] = [n for n in model.graph.node if n.op_type == "Attention"]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["scale"] == pytest.approx(1.0 if per_head else 0.5)
    onnx.checker.check_model(model, full_check=True)
    x = _x()
    np.testing.assert_allclose(run(model, x), run(before, x), rtol=1e-5, atol=1e-5)


def test_an_attention_core_read_elsewhere_is_left_alone():
    b = Builder()
    y = tf2onnx_attention(b, "x", None, div=False)
    softmax = next(n for n in b.nodes if n.op_type == "Softmax")
    mean = b.op("ReduceMean", softmax.output[0], b.const(np.array([1, 3], np.int64)), keepdims=0)
    y = b.op("Add", y, b.op("Unsqueeze", mean, b.const(np.array([-1], np.int64))))
    model = b.model(y, opset=ATTENTION_OPSET)  # the weights are an output of their own
    assert fuse_attention(model, observe_shapes(model)) == 0
