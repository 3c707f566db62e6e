"""onnx-mobile's graph rewrites (export/onnx_mobile.py), each on a one-pattern graph: the same
function as before in ops NNAPI and CoreML take, checked by ORT's own mobile checker."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from toolkit.export.onnx_mobile import (
    decompose_layer_norm,
    fix_batch,
    gelu_without_erf,
    optimized,
    pad_as_concat,
    provider_coverage,
    spell_reciprocal_and_neg,
)
from toolkit.export.onnx_rewrite import drop_dead_nodes, fuse_gelu, observe_shapes
from toolkit.export.oplist import ort_format_ops

SHAPE = (5, 16)  # tokens x channels after the batch


def _model(nodes, initializers, out_shape, opset=17) -> onnx.ModelProto:
    """image (batch, *SHAPE) -> logits graph of `nodes`."""
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", *SHAPE])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", *out_shape])
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in initializers.items()]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return session.run(None, {"image": x.astype(np.float32)})[0]


def _gelu_model() -> onnx.ModelProto:
    """tf2onnx's erf GELU, 0.5 x (1 + erf(x sqrt(1/2))), as export/onnx_rewrite fuses it."""
    nodes = [
        helper.make_node("Mul", ["image", "k"], ["t"]),
        helper.make_node("Erf", ["t"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["p"]),
        helper.make_node("Mul", ["image", "p"], ["q"]),
        helper.make_node("Mul", ["q", "half"], ["logits"]),
    ]
    consts = {"k": math.sqrt(0.5), "one": 1.0, "half": 0.5}
    model = _model(nodes, consts, SHAPE)
    assert fuse_gelu(model) == 1
    drop_dead_nodes(model)
    return model


def test_gelu_without_erf_is_the_erf_gelu_within_float_rounding():
    model = _gelu_model()
    x = np.concatenate([np.linspace(-12, 12, 2 * 80), [0.0, -0.0, 1e-30, -1e-30, 300, -300]])
    x = np.resize(x, (3, *SHAPE)).astype(np.float32)
    x[0, 0, :6] = [0.0, -0.0, 1e-30, -1e-30, 300.0, -300.0]
    want = _run(model, x)
    assert gelu_without_erf(model) == 1
    drop_dead_nodes(model)
    got = _run(model, x)
    assert {n.op_type for n in model.graph.node} <= {"Mul", "Add", "Sub", "Div", "Sqrt"}
    assert np.all(np.isfinite(got))
    # A&S 7.1.28's 3e-7 on erf, times |x| / 2, plus float32 rounding of the result
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel().tolist()])
    np.testing.assert_allclose(got.ravel(), exact, rtol=2e-6, atol=2e-6)


def test_layer_norm_decomposed_matches_layer_normalization():
    rng = np.random.default_rng(0)
    scale, bias = rng.normal(1, 0.1, SHAPE[-1]), rng.normal(0, 0.1, SHAPE[-1])
    node = helper.make_node(
        "LayerNormalization", ["image", "g", "b"], ["logits"], axis=-1, epsilon=1e-6
    )
    model = _model([node], {"g": scale, "b": bias}, SHAPE)
    x = rng.normal(3, 5, (2, *SHAPE)).astype(np.float32)
    want = _run(model, x)
    assert decompose_layer_norm(model) == 1
    ops = {n.op_type for n in model.graph.node}
    assert ops == {"ReduceMean", "Sub", "Mul", "Add", "Sqrt", "Div"}
    np.testing.assert_allclose(_run(model, x), want, atol=2e-6)


def test_pad_as_concat_moves_the_same_values():
    pads = np.array([0, 2, 1, 0, 1, 3], np.int64)  # batch, tokens before/after, channels
    node = helper.make_node("Pad", ["image", "pads"], ["logits"])
    model = _model([node], {}, (SHAPE[0] + 3, SHAPE[1] + 4))
    model.graph.initializer.append(numpy_helper.from_array(pads, "pads"))
    fix_batch(model)
    x = np.random.default_rng(1).normal(size=(1, *SHAPE)).astype(np.float32)
    want = _run(model, x)
    assert pad_as_concat(model, observe_shapes(model, (1,))) == 1
    drop_dead_nodes(model)
    assert [n.op_type for n in model.graph.node] == ["Concat", "Concat"]
    np.testing.assert_array_equal(_run(model, x), want)  # bit-exact: data movement


def test_a_pad_of_another_value_or_a_dynamic_shape_is_kept():
    pads = np.array([0, 1, 0, 0, 1, 0], np.int64)
    node = helper.make_node("Pad", ["image", "pads", "v"], ["logits"])
    model = _model([node], {"v": 1.0}, (SHAPE[0] + 2, SHAPE[1]))
    model.graph.initializer.append(numpy_helper.from_array(pads, "pads"))
    assert pad_as_concat(model, observe_shapes(model, (1,))) == 0  # padding with ones
    del model.graph.node[0].input[2]
    assert pad_as_concat(model, observe_shapes(model, (2, 3))) == 0  # the batch is dynamic


@pytest.mark.parametrize("fixed", [False, True])
def test_providers_take_the_rewritten_graph_whole_only_at_a_fixed_batch(fixed):
    """ORT's checker gives NNAPI and CoreML no node of a dynamic-batch graph; at batch 1 the
    rewritten GELU is one partition of supported nodes for NNAPI and CoreML ML Program."""
    model = _gelu_model()
    gelu_without_erf(model)
    drop_dead_nodes(model)
    if fixed:
        fix_batch(model)
    coverage = provider_coverage(model)
    nodes = len(model.graph.node)
    for provider in ("nnapi", "coreml_mlprogram", "coreml_neuralnetwork"):
        got = coverage[provider]
        assert got["nodes"] == nodes and got["unsupported_ops"] == []
        want = (nodes, 1, 0) if fixed else (0, 0, nodes)
        assert (got["supported_nodes"], got["partitions"], got["dynamic_shape_nodes"]) == want


def test_ort_format_file_runs_and_lists_its_ops(tmp_path):
    model = _gelu_model()
    gelu_without_erf(model)
    drop_dead_nodes(model)
    fix_batch(model)
    onnx.save(model, str(tmp_path / "m.onnx"))
    optimized(tmp_path / "m.onnx", tmp_path / "m.ort", "ORT")
    session = ort.InferenceSession(str(tmp_path / "m.ort"), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape == [1, *SHAPE]
    x = np.random.default_rng(2).normal(size=(1, *SHAPE)).astype(np.float32)
    np.testing.assert_allclose(session.run(None, {"image": x})[0], _run(model, x), atol=1e-6)
    assert {op.name for op in ort_format_ops(tmp_path / "m.ort")} == {
        n.op_type for n in model.graph.node
    }


def test_reciprocal_and_neg_are_spelled_in_ops_every_provider_takes():
    nodes = [
        helper.make_node("Reciprocal", ["image"], ["r"]),
        helper.make_node("Neg", ["r"], ["logits"]),
    ]
    model = _model(nodes, {}, SHAPE)
    x = np.random.default_rng(3).normal(size=(2, *SHAPE)).astype(np.float32)
    want = _run(model, x)
    assert spell_reciprocal_and_neg(model) == 2
    assert [n.op_type for n in model.graph.node] == ["Div", "Mul"]
    np.testing.assert_array_equal(_run(model, x), want)  # exact in IEEE float
