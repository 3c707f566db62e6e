"""`toolkit export`: every format loads and runs in its runtime, graphs, manifest, bad input."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import keras
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter
from onnx import numpy_helper
from tiny_runs import CALIB_SAMPLES as TINY_CALIB
from tiny_runs import DATA as TINY_DATA

from toolkit.accuracy import tied_top1
from toolkit.common.errors import UsageError
from toolkit.common.scratch import scratch_dir
from toolkit.common.versions import versions
from toolkit.data import load_data
from toolkit.export import CONVERTERS, ExportError, export_run
from toolkit.export.command import add_arguments
from toolkit.export.command import run as run_command
from toolkit.export.entries import MODEL_HASH, update_manifest
from toolkit.export.exporter import DEFAULT_OPSET, EXPORT_DIR
from toolkit.export.int8_search import recipe_settings
from toolkit.export.onnx import keras_to_onnx
from toolkit.export.onnx_mobile import config_ops, provider_coverage
from toolkit.export.onnx_rewrite import default_opset
from toolkit.export.oplist import (
    Op,
    forbidden_ops,
    onnx_ops,
    op_names,
    ort_format_ops,
    tflite_op_sequence,
    tflite_ops,
)
from toolkit.export.signature import INPUT_NAME
from toolkit.export.tflite import DYNAMIC_B1, INT8, convert_tflite, tflite_spelling
from toolkit.export.xnnpack import delegation
from toolkit.formats import FORMATS, check_options, format_table_markdown, parse_formats
from toolkit.ops import (
    AdditiveMaskLocalitySelfAttention,
    CenteredLayerNorm,
    DepthwisePartialShift,
    PartialShift,
    reference_partial_shift,
)
from toolkit.predict import softmax as probabilities_of
from toolkit.runfiles.folder import MANIFEST_FILE, open_run
from toolkit.runfiles.hashes import sha256
from toolkit.runmodel import load_run_model
from toolkit.runtimes import open_artifact
from toolkit.verify import OP_CASES
from toolkit.verify.error_metrics import compare
from toolkit.verify.ops.artifacts import OpExport
from toolkit.verify.ops.cases import case_inputs, case_model
from toolkit.verify.rules import DEFAULT_TOLERANCES, judge, rule_for

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cifar10_train_sample.npz"
MODELS = ("shiftvit", "vit-lsa")
# the .tflite app files end in a softmax (issue 36): their output is `probabilities`, not the
# `logits` it was; the ONNX files keep logits
SIGNATURES = {"serving_default": {"inputs": ["image"], "outputs": ["probabilities"]}}
# XNNPACK takes no uint8 -> int8 QUANTIZE: the full-int8 file's first op (uint8 pixels in,
# issue 36) runs in LiteRT's kernel, before the one XNNPACK partition
UINT8_INPUT_OP = Counter({"QUANTIZE/uint8": 1})

PROGRESS = "   "  # toolkit.common.progress indents its lines; errors start at column 0


# -- running an artifact the way an app would: float32 0-255 in, float32 logits out --


def _run_ort(path: Path, images: np.ndarray) -> np.ndarray:
    """A fixed-batch file (onnx-mobile's .ort, batch 1) is called once per image."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    fixed = session.get_inputs()[0].shape[0]
    step = fixed if isinstance(fixed, int) else len(images)
    x = images.astype(np.float32)
    return np.concatenate(
        [session.run(["logits"], {"image": x[i : i + step]})[0] for i in range(0, len(x), step)]
    )


def _run_litert(path: Path, images: np.ndarray) -> np.ndarray:
    """A fixed-batch model (batch 1 of the int8 recipes) is called once per image; returns
    its probabilities (the .tflite files end in a softmax, issue 36)."""
    runner = Interpreter(model_path=str(path)).get_signature_runner("serving_default")
    inp = runner.get_input_details()["image"]
    out = runner.get_output_details()["probabilities"]
    x = images.astype(np.float32)
    if np.issubdtype(inp["dtype"], np.integer):  # the full-int8 file: uint8 pixels, q = pixel
        scale, zero = inp["quantization"]
        info = np.iinfo(inp["dtype"])
        x = np.clip(np.round(x / scale + zero), info.min, info.max).astype(inp["dtype"])
    step = len(x) if inp["shape_signature"][0] < 0 else int(inp["shape_signature"][0])
    y = np.concatenate(
        [runner(image=x[i : i + step])["probabilities"] for i in range(0, len(x), step)]
    )
    if np.issubdtype(out["dtype"], np.integer):
        scale, zero = out["quantization"]
        y = (y.astype(np.float32) - zero) * scale
    return y


def _expected(runtime: str, logits: np.ndarray) -> np.ndarray:
    """What a file of `runtime` outputs for the Keras `logits`: probabilities from .tflite."""
    return probabilities_of(logits).astype(np.float32) if runtime == "litert" else logits


RUNNERS: dict[str, Callable[[Path, np.ndarray], np.ndarray]] = {
    "ort-cpu": _run_ort,
    "litert": _run_litert,
}


OP_READERS: dict[str, Callable[[Path], list[Op]]] = {
    ".onnx": lambda path: onnx_ops(onnx.load(str(path))),
    ".ort": ort_format_ops,
    ".tflite": lambda path: tflite_ops(path.read_bytes()),
}


def _ops(path: Path) -> list[Op]:
    return OP_READERS[path.suffix](path)


def _files(*roots: Path) -> dict[str, bytes]:
    """Every file under `roots` with its bytes: compared before and after a failed export."""
    return {
        str(p): p.read_bytes()
        for root in roots
        if root.exists()
        for p in root.rglob("*")
        if p.is_file()
    }


# -- fixtures: one real run folder per model, exported to every format once --


@pytest.fixture(scope="module", params=MODELS)
def exported(request, tiny_runs):
    """The shared tiny run (1 epoch on synthetic shapes) exported to `all` into RUN/export:
    read-only here (a test that writes copies it)."""
    run_dir = tiny_runs.exported(request.param)
    run = open_run(run_dir)
    return {
        **_export_folder(run_dir),
        "model": load_run_model(run),
        "test_images": load_data(TINY_DATA, seed=0).x_test.astype(np.float32),
    }


@pytest.fixture(scope="module")
def one_exported(tiny_runs):
    """The shared ShiftViT run exported to `all` (read-only): for the tests of export's
    bookkeeping (model.json's entries, temps, the printed table), the same for every model."""
    return _export_folder(tiny_runs.exported("shiftvit"))


def _export_folder(run_dir: Path) -> dict:
    out = run_dir / EXPORT_DIR
    return {"run": run_dir, "out": out, "manifest": json.loads((out / MANIFEST_FILE).read_text())}


@pytest.fixture(scope="module")
def flex_tflite() -> bytes:
    """A .tflite that needs the Select-TF op FlexExtractImagePatches (what SPT must avoid)."""

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32, name="image")])
    def patches(image):
        kw = dict(sizes=[1, 2, 2, 1], strides=[1, 2, 2, 1], rates=[1, 1, 1, 1], padding="VALID")
        return {"logits": tf.image.extract_patches(image, **kw)}

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [patches.get_concrete_function()], patches
    )
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    return converter.convert()


# -- the registry --


@pytest.mark.parametrize("fmt", FORMATS)
def test_registry_entry_is_complete(fmt):
    entry = FORMATS[fmt]
    assert entry.name == fmt
    assert entry.runtime in RUNNERS
    kinds = {"ort-cpu": (".onnx", ".ort"), "litert": (".tflite",)}  # .ort: ORT's own format
    assert Path(entry.filename).suffix in kinds[entry.runtime]
    assert set(entry.options) <= {"opset", "calib_data", "calib_samples", "max_accuracy_drop"}
    assert f"`{fmt}`" in format_table_markdown() and entry.filename in format_table_markdown()


@pytest.mark.parametrize("fmt", FORMATS)
def test_options_a_format_does_not_take_are_refused(fmt):
    values = {"opset": 18, "calib_data": "shapes", "calib_samples": 10, "max_accuracy_drop": 1.0}
    for option, value in values.items():
        given = {option: value}
        if option in FORMATS[fmt].options:
            check_options([fmt], given)
        else:
            with pytest.raises(UsageError, match=fmt):
                check_options([fmt], given)


def test_filenames_are_unique_and_all_expands_in_order():
    assert len({f.filename for f in FORMATS.values()}) == len(FORMATS)
    assert parse_formats("all") == list(FORMATS)
    assert parse_formats(["tflite", "onnx", "tflite"]) == ["tflite", "onnx"]  # the code's lists
    with pytest.raises(UsageError, match="names tflite twice"):  # a user's typo
        parse_formats("tflite, onnx,tflite")
    with pytest.raises(UsageError, match="did you mean 'tflite-int8'"):
        parse_formats("tflite_int8")


def test_readme_format_table_matches_the_registry():
    text = (ROOT / "README.md").read_text()
    start, end = "<!-- formats -->", "<!-- /formats -->"
    if start not in text or end not in text:
        pytest.fail(f"README.md has no {start} ... {end} markers around the format table")
    table = text.split(start, 1)[1].split(end, 1)[0]
    assert table.strip() == format_table_markdown().strip(), (
        "README format table is stale: paste export.format_table_markdown() between the markers"
    )


def test_forbidden_ops_flags_flex_custom_and_extract_image_patches(flex_tflite):
    ops = [
        Op("FlexConv2D", "custom"),
        Op("MyOp", "custom"),
        Op("Gelu", "com.microsoft"),
        Op("EXTRACT_IMAGE_PATCHES", "builtin"),
        Op("ExtractImagePatches", ""),
        Op("CONV_2D", "builtin"),
        Op("Conv", ""),
        Op("Conv", "ai.onnx"),
    ]
    flagged = forbidden_ops(ops)
    assert len(flagged) == 5
    for name in ("FlexConv2D", "MyOp", "com.microsoft", "EXTRACT_IMAGE_PATCHES"):
        assert any(name in f for f in flagged), name
    flex = forbidden_ops(tflite_ops(flex_tflite))
    assert any("FlexExtractImagePatches" in f for f in flex), flex


def test_onnx_custom_domain_fails_naming_it(tmp_path):
    from toolkit.export.onnx import check_onnx

    node = onnx.helper.make_node("Fancy", ["image"], ["logits"], domain="com.example")
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("image", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, [1])],
    )
    model = onnx.helper.make_model(
        graph,
        opset_imports=[
            onnx.helper.make_opsetid("", 17),
            onnx.helper.make_opsetid("com.example", 1),
        ],
    )
    with pytest.raises(ExportError, match="com.example"):
        check_onnx(model, "onnx")


# -- the exported artifacts --


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_loads_and_runs_in_its_runtime(exported, fmt):
    entry = FORMATS[fmt]
    path = exported["out"] / entry.filename
    assert path.is_file()
    images = exported["test_images"][:5]
    logits = RUNNERS[entry.runtime](path, images)
    assert logits.shape == (5, exported["model"].output_shape[-1])
    assert np.all(np.isfinite(logits))


def _cifar_images() -> np.ndarray:
    with np.load(SAMPLE) as data:
        return data["x"][:64].astype(np.float32)


@pytest.mark.parametrize("fmt", ["onnx", "tflite"])
@pytest.mark.parametrize("images", ["cifar10 sample", "run test split"])
def test_fp32_logits_match_keras(exported, fmt, images):
    if images == "cifar10 sample" and not SAMPLE.is_file():
        pytest.skip(f"shared CIFAR-10 sample not found at {SAMPLE}")
    x = _cifar_images() if images == "cifar10 sample" else exported["test_images"]
    entry = FORMATS[fmt]
    reference = _expected(entry.runtime, np.asarray(exported["model"](x, training=False)))
    logits = RUNNERS[entry.runtime](exported["out"] / entry.filename, x)
    assert np.max(np.abs(logits - reference)) < 1e-4


def test_fp16_logits_stay_close_to_keras(exported):
    x = exported["test_images"]
    reference = _expected("litert", np.asarray(exported["model"](x, training=False)))
    probabilities = _run_litert(exported["out"] / FORMATS["tflite-fp16"].filename, x)
    assert np.max(np.abs(probabilities - reference)) < 0.05


def _constant_bytes(flatbuffer: bytes) -> int:
    model = schema.Model.GetRootAs(flatbuffer, 0)
    return sum(model.Buffers(i).DataLength() for i in range(model.BuffersLength()))


def test_tflite_int8_is_under_30_percent_of_fp32(exported):
    """The file carries ~70-100 KB of fixed flatbuffer overhead (tensor names, per-channel
    scales and int64 zero points, op tables), which the tiny presets are sized to absorb."""
    fp32 = (exported["out"] / FORMATS["tflite"].filename).read_bytes()
    int8 = (exported["out"] / FORMATS["tflite-int8"].filename).read_bytes()
    assert _constant_bytes(int8) <= 0.30 * _constant_bytes(fp32)
    assert len(int8) <= 0.30 * len(fp32)


@pytest.mark.parametrize("fmt", FORMATS)
def test_graphs_use_builtin_standard_ops_only(exported, fmt):
    path = exported["out"] / FORMATS[fmt].filename
    ops = _ops(path)
    assert ops and forbidden_ops(ops) == []
    assert not any("extractimagepatches" in op.name.lower() for op in ops)
    if FORMATS[fmt].runtime == "litert":
        assert {op.domain for op in ops} == {"builtin"}
    else:
        assert {op.domain for op in ops} <= {"", "ai.onnx"}
    assert exported["manifest"]["artifacts"][fmt]["ops"] == op_names(ops)


def _keras_layers(model, class_name: str) -> int:
    return sum(type(layer).__name__ == class_name for layer in model._flatten_layers())


def test_onnx_graph_has_fused_norms_and_no_shape_arithmetic(exported, tmp_path):
    path = exported["out"] / FORMATS["onnx"].filename
    ops = Counter(node.op_type for node in onnx.load(str(path)).graph.node)
    norms = _keras_layers(exported["model"], "LayerNormalization")
    assert ops["LayerNormalization"] == norms > 0
    assert not {"Shape", "Gather", "ReduceProd", "Cast", "Sqrt", "Reciprocal"} & set(ops), ops
    # each LSA core one standard Attention node (default opset 23): no head split or merge
    # Transposes, no Softmax, no row minimum, no renormalising sum
    assert ops["Attention"] == _keras_layers(exported["model"], "LocalitySelfAttention")
    assert not {"Softmax", "ReduceMin", "ReduceSum"} & set(ops), ops
    # what ONNX Runtime runs: every GELU fused into one kernel when it loads the graph
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    optimized = Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)
    gelus = optimized["Gelu"] + optimized["BiasGelu"]  # BiasGelu: a MatMul bias folded in
    assert gelus == ops["Erf"] > 0 and "Erf" not in optimized, optimized


def test_onnx_below_opset_23_spells_attention_op_by_op_with_the_same_logits(exported):
    model = exported["model"]
    older = keras_to_onnx(model, tuple(model.input_shape[1:]), 17)
    default = onnx.load(str(exported["out"] / FORMATS["onnx"].filename))
    assert default_opset(older) == 17 and default_opset(default) == DEFAULT_OPSET
    ops = Counter(node.op_type for node in older.graph.node)
    assert "Attention" not in ops
    assert ops["Softmax"] == _keras_layers(model, "LocalitySelfAttention")
    x = exported["test_images"][:8].astype(np.float32)

    def logits(graph: onnx.ModelProto) -> np.ndarray:
        session = ort.InferenceSession(
            graph.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return session.run(None, {INPUT_NAME: x})[0]

    np.testing.assert_allclose(logits(older), logits(default), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("additive_mask", [False, True])
@pytest.mark.parametrize("depthwise_shift", [False, True])
def test_tflite_spelling_keeps_the_function_and_shares_the_other_layers(
    exported, additive_mask, depthwise_shift
):
    model = exported["model"]
    spelled = tflite_spelling(model, additive_mask, depthwise_shift)
    x = exported["test_images"][:4]
    np.testing.assert_allclose(spelled(x), model(x), atol=1e-5)
    swaps = {"LayerNormalization": CenteredLayerNorm}
    if additive_mask:
        swaps["LocalitySelfAttention"] = AdditiveMaskLocalitySelfAttention
    if depthwise_shift:
        swaps["PartialShift"] = DepthwisePartialShift
    for old_class, new_class in swaps.items():
        top = [la.name for la in model.layers if type(la).__name__ == old_class]
        assert [la.name for la in spelled.layers if type(la) is new_class] == top
    kept = [la for la in spelled.layers[1:] if type(la) not in swaps.values()]
    assert all(any(la is old for old in model.layers) for la in kept)


@pytest.mark.parametrize("shape", [(1, 3, 13), (5, 7, 26)])
def test_int8_depthwise_shift_moves_int8_values_exactly(tmp_path, shape):
    """With its output range pinned to its input's, the int8 depthwise shift is the shift of
    the int8 values themselves (zero point where nothing moves in), bit for bit, even though
    calibration sees a narrower output range: its extremes sit where the shift drops them."""
    inputs = keras.Input(shape)
    model = keras.Model(inputs, PartialShift(12, 1, name="shift")(inputs))
    rng = np.random.default_rng(0)
    calibration = rng.uniform(-1, 1, size=(64, *shape)).astype(np.float32)
    one_hot = np.eye(np.prod(shape), dtype=np.float32).reshape(-1, 1, *shape)
    dropped = next(i for i, x in enumerate(one_hot) if not reference_partial_shift(x, 12, 1).any())
    calibration.reshape(64, -1)[:, dropped] = np.where(np.arange(64) % 2, 4.0, -4.0)
    op = OpExport(model, shape, calibration, tmp_path)
    path = tmp_path / "shift_int8.tflite"
    convert_tflite(op.source(), path, replace(INT8, depthwise_shift=True))
    assert Counter(o.name for o in tflite_op_sequence(path.read_bytes())) == {
        "DEPTHWISE_CONV_2D": 1
    }
    interpreter = Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    source, output = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    assert output["quantization"] == source["quantization"]
    zero_point = source["quantization"][1]
    q = rng.integers(-128, 128, size=(1, *shape)).astype(np.int8)
    interpreter.set_tensor(source["index"], q)
    interpreter.invoke()
    moved = reference_partial_shift(q.astype(np.int32) - zero_point, 12, 1) + zero_point
    np.testing.assert_array_equal(interpreter.get_tensor(output["index"]), moved)


@pytest.mark.parametrize("shape", [(1, 3, 13), (6, 5, 96)])
def test_onnx_shift_is_one_exact_depthwise_conv(shape):
    """The ONNX graph spells the shift as one grouped Conv (no pad, slices or concatenate), and
    ONNX Runtime moves every float value bit for bit, as the NumPy reference does."""
    inputs = keras.Input(shape)
    model = keras.Model(inputs, PartialShift(4, 1, name="shift")(inputs))
    graph = keras_to_onnx(model, shape, 17)
    ops = Counter(n.op_type for n in graph.graph.node)
    assert ops["Conv"] == 1 and not {"Pad", "Slice", "Concat"} & set(ops), ops
    (conv,) = [n for n in graph.graph.node if n.op_type == "Conv"]
    group = next(a for a in conv.attribute if a.name == "group")
    assert onnx.helper.get_attribute_value(group) == shape[-1]
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).normal(size=(2, *shape)).astype(np.float32) * 1e3
    (got,) = session.run(None, {INPUT_NAME: x})
    np.testing.assert_array_equal(got, reference_partial_shift(x, 4, 1))


@pytest.mark.parametrize("fmt", ["tflite", "tflite-int8", "tflite-dynamic"])
def test_tflite_norms_use_the_centered_spelling(exported, fmt):
    """Keras spells a norm with a NEG (-mean * scale); the centered spelling has none, only the
    norms nested in other layers keep it."""
    path = exported["out"] / FORMATS[fmt].filename
    ops = Counter(op.name for op in tflite_op_sequence(path.read_bytes()))
    model = exported["model"]
    norms = _keras_layers(model, "LayerNormalization")
    top = sum(type(layer).__name__ == "LayerNormalization" for layer in model.layers)
    assert ops["RSQRT"] == norms and ops["NEG"] == norms - top, ops


def _depthwise_weights(path: Path) -> list[dict]:
    """The weight tensor details of every DEPTHWISE_CONV_2D of a .tflite file."""
    interpreter = Interpreter(model_path=str(path))
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    ops = interpreter._get_ops_details()
    return [tensors[op["inputs"][1]] for op in ops if op["op_name"] == "DEPTHWISE_CONV_2D"]


@pytest.mark.parametrize("fmt", [n for n, f in FORMATS.items() if f.runtime == "litert"])
def test_tflite_shift_is_one_depthwise_conv(exported, fmt):
    """Every TFLite file spells each PartialShift as one DEPTHWISE_CONV_2D, all in XNNPACK.
    An int8 shift's output keeps its input's scale and zero point, so it moves values exactly;
    a dynamic-range file's shift keeps float weights (XNNPACK takes no int8-weight depthwise
    convolution on float activations)."""
    path = exported["out"] / FORMATS[fmt].filename
    ops = Counter(op.name for op in tflite_op_sequence(path.read_bytes()))
    shifts = _keras_layers(exported["model"], "PartialShift")  # none in a ViT
    assert CONVERTERS[fmt].settings.depthwise_shift
    assert ops["DEPTHWISE_CONV_2D"] == shifts, ops
    if shifts:  # the slices are the shift's only (a ViT's SPT has its own)
        assert ops["STRIDED_SLICE"] == 0, ops
    found = delegation(path)
    outside = UINT8_INPUT_OP if fmt == "tflite-int8" else Counter()
    assert found.not_delegated == outside and found.partitions == 1, found
    interpreter = Interpreter(model_path=str(path))
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    for op in interpreter._get_ops_details():
        if op["op_name"] == "DEPTHWISE_CONV_2D" and FORMATS[fmt].precision == "int8":
            source, output = (tensors[op[k][0]] for k in ("inputs", "outputs"))
            assert output["quantization"] == source["quantization"], (source, output)
            expected = np.int8 if CONVERTERS[fmt].settings.int8 else np.float32
            assert source["dtype"] == output["dtype"] == expected
            if not CONVERTERS[fmt].settings.int8:  # dynamic range: float weights
                assert tensors[op["inputs"][1]]["dtype"] == np.float32


def test_dynamic_range_shift_keeps_float_weights_and_moves_values_exactly(tmp_path):
    """The dynamic-range converter gives a shift over 128 channels (1,152 weights) int8
    weights; the export gives back the float ones and zeros, so the file is one depthwise
    convolution in XNNPACK that moves float values bit for bit. A depthwise convolution with
    other weights keeps its int8 ones."""
    shape = (5, 7, 128)
    inputs = keras.Input(shape)
    shift = PartialShift(12, 1, name="shift")(inputs)
    other = keras.layers.DepthwiseConv2D(3, padding="same", name="other")(inputs)
    model = keras.Model(inputs, keras.layers.Concatenate()([shift, other]))
    rng = np.random.default_rng(0)
    calibration = rng.uniform(-1, 1, size=(8, *shape)).astype(np.float32)
    path = tmp_path / "shift_dynamic.tflite"
    convert_tflite(OpExport(model, shape, calibration, tmp_path).source(), path, DYNAMIC_B1)
    # tensor names carry the layer's name: functional_1/shift_1/depthwise
    weights = {w["name"].split("/")[1].rsplit("_", 1)[0]: w for w in _depthwise_weights(path)}
    assert weights["shift"]["dtype"] == np.float32 and weights["other"]["dtype"] == np.int8
    interpreter = Interpreter(model_path=str(path))
    kernel = interpreter.get_tensor(weights["shift"]["index"]).reshape(-1, shape[-1])
    assert set(np.unique(kernel)) == {0.0, 1.0} and (kernel.sum(axis=0) == 1).all()
    runner = interpreter.get_signature_runner("serving_default")
    x = rng.normal(size=(1, *shape)).astype(np.float32)
    moved = next(iter(runner(image=x).values()))[..., : shape[-1]]
    np.testing.assert_array_equal(moved, reference_partial_shift(x, 12, 1))
    # the shift's int8 weights are not left behind in the file
    flat = schema.ModelT.InitFromPackedBuf(path.read_bytes(), 0)
    used = {t.buffer for g in flat.subgraphs for t in g.tensors}
    used |= {m.buffer for m in flat.metadata or []}
    filled = [i for i, b in enumerate(flat.buffers) if b.data is not None and len(b.data)]
    assert set(filled) <= used


ADDITIVE_MASK = [
    n for n, f in FORMATS.items() if getattr(CONVERTERS[n].settings, "additive_mask", False)
]


@pytest.mark.parametrize("fmt", ADDITIVE_MASK)
def test_tflite_lsa_mask_is_one_float_add_before_softmax(exported, fmt):
    """Each LSA's diagonal mask: Add(scores, fill) -> Softmax, both float even in int8 files,
    and none of the renormalised spelling's REDUCE_MIN, SUM, DIV."""
    interpreter = Interpreter(model_path=str(exported["out"] / FORMATS[fmt].filename))
    dtypes = {t["index"]: t["dtype"] for t in interpreter.get_tensor_details()}
    ops = interpreter._get_ops_details()
    producer = {out: op for op in ops for out in op["outputs"]}
    # the last SOFTMAX is the file's output (probabilities, issue 36), after the logits layer
    *softmaxes, last = [op for op in ops if op["op_name"] == "SOFTMAX"]
    logits = producer[last["inputs"][0]]
    if logits["op_name"] == "DEQUANTIZE":  # int8 logits into a softmax the recipe keeps float
        logits = producer[logits["inputs"][0]]
    assert logits["op_name"] == "FULLY_CONNECTED"
    assert len(softmaxes) == _keras_layers(exported["model"], "LocalitySelfAttention")
    assert not {"REDUCE_MIN", "SUM", "DIV"} & {op["op_name"] for op in ops}
    for softmax in softmaxes:
        add = producer[softmax["inputs"][0]]
        assert add["op_name"] == "ADD"
        assert {dtypes[i] for i in (*add["inputs"], *softmax["outputs"])} == {np.float32}


@pytest.mark.parametrize("fmt", ["tflite-int8", "tflite-int8-float-io", "tflite-dynamic"])
def test_tflite_int8_defaults_run_whole_in_xnnpack(exported, fmt):
    xnnpack = delegation(exported["out"] / FORMATS[fmt].filename)
    outside = UINT8_INPUT_OP if fmt == "tflite-int8" else Counter()
    assert xnnpack.not_delegated == outside and xnnpack.partitions == 1, xnnpack.not_delegated
    assert any(k.startswith("FULLY_CONNECTED/") and "int8" in k for k in xnnpack.delegated)


def test_onnx_int8_default_quantizes_the_weighted_matmuls(exported):
    recipe = CONVERTERS["onnx-int8"].settings
    fp32 = onnx.load(str(exported["out"] / FORMATS["onnx"].filename))
    int8 = onnx.load(str(exported["out"] / FORMATS["onnx-int8"].filename))
    weights = {i.name for i in fp32.graph.initializer}
    weighted = [n for n in fp32.graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    ops = Counter(n.op_type for n in int8.graph.node)
    assert recipe.dynamic and ops["MatMulInteger"] == len(weighted) > 0
    assert ops["MatMul"] == Counter(n.op_type for n in fp32.graph.node)["MatMul"] - len(weighted)
    stored = [numpy_helper.to_array(i) for i in int8.graph.initializer if i.data_type == 3]
    widest = max(int(np.abs(w.astype(np.int32)).max()) for w in stored if w.size > 1)
    assert widest <= 64 if recipe.reduce_range else widest > 64


@pytest.mark.parametrize("fmt", FORMATS)
def test_signatures_and_graph_contract(exported, fmt):
    path = exported["out"] / FORMATS[fmt].filename
    if FORMATS[fmt].runtime == "litert":
        assert Interpreter(model_path=str(path)).get_signature_list() == SIGNATURES
        return
    if path.suffix == ".ort":  # ORT's flatbuffer: no ONNX checker, no metadata_props kept
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        assert [(i.name, i.shape) for i in session.get_inputs()] == [("image", [1, 32, 32, 3])]
        assert [(o.name, o.shape) for o in session.get_outputs()] == [("logits", [1, 10])]
        return
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["image"]
    assert [o.name for o in model.graph.output] == ["logits"]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert {o.domain for o in model.opset_import} <= {"", "ai.onnx"}
    assert min(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 17
    meta = {p.key: p.value for p in model.metadata_props}
    assert json.loads(meta["labels"]) == open_run(exported["run"]).class_names
    assert "summary" in json.loads(meta["preprocessing"])
    assert meta["source_run"] == str(exported["run"].resolve())
    assert meta["toolkit_version"] == versions()["toolkit"]


def test_manifest_describes_every_artifact(exported):
    out = exported["out"]
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest == exported["manifest"]
    assert list(manifest["artifacts"]) == list(FORMATS)
    run = open_run(exported["run"])
    assert manifest["class_names"] == run.class_names
    assert (out / "labels.txt").read_text().splitlines() == run.class_names
    assert manifest["source_run"] == str(exported["run"].resolve())
    assert manifest["versions"] == versions()
    kind = run.config.preprocessing
    assert manifest["preprocessing"]["in_model"][0]["op"] == kind
    assert manifest["preprocessing"]["in_model"][1]["size"] == [32, 32]
    assert manifest["input"] == {
        "layout": "NHWC",
        "height": 32,
        "width": 32,
        "channels": 3,
        "range": "RGB 0-255",
    }
    for fmt, entry in manifest["artifacts"].items():
        path = out / entry["file"]
        assert entry["file"] == FORMATS[fmt].filename and entry["format"] == fmt
        assert entry["runtime"] == FORMATS[fmt].runtime
        assert entry["sha256"] == sha256(path)
        assert entry["size_bytes"] == path.stat().st_size
        assert entry["export_seconds"] > 0
        assert entry["recipe"] == {
            "name": CONVERTERS[fmt].recipe,
            "settings": recipe_settings(CONVERTERS[fmt].settings),
        }
        (inp,), (outp,) = entry["inputs"], entry["outputs"]
        # issue 36: the .tflite files end in a softmax, the ONNX files keep logits
        output = "probabilities" if FORMATS[fmt].runtime == "litert" else "logits"
        assert (inp["name"], outp["name"], entry["output"]) == ("image", output, output)
        batch = getattr(CONVERTERS[fmt].settings, "batch", None)  # fixed where the recipe fixes it
        assert inp["shape"] == [batch, 32, 32, 3] and outp["shape"] == [batch, 10]
        int8_io = fmt == "tflite-int8"
        # issue 36: the full-int8 file takes a camera's uint8 pixels (q = pixel; was int8,
        # q = pixel - 128); issue 42: every file gives float32 scores (uint8 ones tied)
        assert inp["dtype"] == ("uint8" if int8_io else "float32") and outp["dtype"] == "float32"
        assert (inp["scale"] is not None) == int8_io and outp["scale"] is None
        if int8_io:
            assert (inp["scale"], inp["zero_point"]) == (1.0, 0)
        # issue 36: each app file's check in LiteRT's GPU accelerator, or why it was not made
        gpu = entry.get("gpu_accelerator")
        if FORMATS[fmt].runtime != "litert":
            assert gpu is None, fmt
        elif gpu["checked"]:
            assert isinstance(gpu["fully_accelerated"], bool)
        else:
            assert gpu["reason"].startswith("LiteRT's GPU accelerator did not start: "), gpu
    assert manifest["artifacts"]["onnx"]["options"] == {"opset": DEFAULT_OPSET}
    calib = {"calib_data": TINY_DATA, "calib_samples": TINY_CALIB}
    assert manifest["artifacts"]["tflite-int8"]["options"] == calib
    assert manifest["artifacts"]["onnx-int8"]["options"] == {"opset": DEFAULT_OPSET, **calib}


# -- issue 42: int8 files keep the float model's top-1 decisions --


def test_no_int8_file_ties_the_top_two_scores_where_the_float_model_does_not(exported):
    """A uint8 probability output (steps of 1/256) tied the two highest scores of low-margin
    images, and argmax took the first: every default int8 file gives float32 scores whose
    top two differ wherever the Keras model's do, on the test split."""
    images = exported["test_images"]
    float_tied = tied_top1(np.asarray(exported["model"](images, training=False)))
    int8 = [fmt for fmt, f in FORMATS.items() if f.precision == "int8"]
    assert {"tflite-int8", "tflite-int8-float-io", "onnx-int8"} <= set(int8)
    for fmt in int8:
        path = exported["out"] / exported["manifest"]["artifacts"][fmt]["file"]
        tied = tied_top1(open_artifact(path).run(images))
        assert not (tied & ~float_tied).any(), f"{fmt}: {int(tied.sum())} of {len(images)} tied"


def test_tflite_int8_takes_uint8_pixels_and_gives_float32_probabilities(exported):
    """The app file's tensors as LiteRT reads them: q = pixel in, float32 softmax out."""
    session = open_artifact(exported["out"] / FORMATS["tflite-int8"].filename, "litert")
    assert (session.input.dtype, session.input.scale, session.input.zero_point) == ("uint8", 1, 0)
    assert (session.output.dtype, session.output.scale) == ("float32", None)
    scores = session.run(exported["test_images"][:1])
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-5)


# -- onnx-mobile: the .ort file, its provider coverage and its required-operators config --


def test_onnx_mobile_ort_matches_model_onnx_within_its_verify_rule(exported):
    """The .ort (batch 1) loads in onnxruntime and gives model.onnx's logits, judged by the
    rule `toolkit verify` holds it to against Keras (fp32: 1e-3 of the largest logit)."""
    x = exported["test_images"]
    reference = _run_ort(exported["out"] / FORMATS["onnx"].filename, x)
    logits = _run_ort(exported["out"] / FORMATS["onnx-mobile"].filename, x)
    metrics = compare(logits, reference)
    assert judge(rule_for("onnx-mobile"), metrics, DEFAULT_TOLERANCES) == []
    assert metrics["max_abs"] < 1e-4  # measured 2-4e-6 on the tiny runs


def test_onnx_mobile_records_each_providers_coverage(exported):
    """model.json holds ORT's mobile checker's counts per provider for the .ort's graph: every
    node in one partition for NNAPI and CoreML ML Program, where model.onnx gives them none."""
    entry = exported["manifest"]["artifacts"]["onnx-mobile"]
    coverage = entry["mobile_providers"]
    assert "usability_checker" in coverage["checker"]
    for provider in ("nnapi", "coreml_mlprogram", "coreml_neuralnetwork"):
        got = coverage[provider]
        assert 0 < got["supported_nodes"] <= got["nodes"] and got["dynamic_shape_nodes"] == 0
        assert got["partitions"] >= 1
    for provider in ("nnapi", "coreml_mlprogram"):
        assert coverage[provider]["supported_nodes"] == coverage[provider]["nodes"]
        assert (coverage[provider]["partitions"], coverage[provider]["unsupported_ops"]) == (1, [])
    dynamic = provider_coverage(onnx.load(str(exported["out"] / FORMATS["onnx"].filename)))
    assert all(c["supported_nodes"] == 0 for c in dynamic.values())
    rewrites = entry["graph_rewrites"]
    assert rewrites["layer_normalization_decomposed"] > 0 and rewrites["gelu_without_erf"] > 0


def test_onnx_mobile_required_operators_config_lists_the_files_ops(exported):
    (name,) = FORMATS["onnx-mobile"].companions
    entry = exported["manifest"]["artifacts"]["onnx-mobile"]
    assert entry["required_operators"] == name
    config = (exported["out"] / name).read_text()
    assert config.splitlines()[:2] == ["# Generated from model/s:", "# - model.ort"]
    ops = ort_format_ops(exported["out"] / FORMATS["onnx-mobile"].filename)
    assert config_ops(config) == ops and op_names(ops) == entry["ops"]
    assert {"Gemm", "Softmax" if exported["model"].name.startswith("vit") else "Conv"} <= {
        op.name for op in ops
    }
    assert not {"Erf", "LayerNormalization", "Attention", "Pad"} & {op.name for op in ops}


# -- re-exports, failures and bad input --


def test_reexport_updates_one_entry_and_keeps_the_others(one_exported, tmp_path):
    out = tmp_path / "export"
    shutil.copytree(one_exported["out"], out)
    stale = json.loads((out / MANIFEST_FILE).read_text())
    stale["artifacts"]["tflite-dynamic"]["sha256"] = "stale"
    (out / MANIFEST_FILE).write_text(json.dumps(stale))
    written = export_run(one_exported["run"], "tflite-dynamic", out=out)
    manifest = written.manifest.to_json()
    path = out / FORMATS["tflite-dynamic"].filename
    assert written.formats == ("tflite-dynamic",) and written.folder == out  # what it wrote
    assert list(written.entries) == ["tflite-dynamic"] and written.path("tflite-dynamic") == path
    assert manifest["artifacts"]["tflite-dynamic"]["sha256"] == sha256(path)
    for fmt, entry in one_exported["manifest"]["artifacts"].items():
        if fmt != "tflite-dynamic":
            assert manifest["artifacts"][fmt] == entry


def test_reexport_of_a_copied_run_keeps_the_entries_whose_files_match(one_exported, tmp_path):
    """`cp -a RUN COPY; toolkit export COPY --format tflite` keeps every other artifact the copy
    holds unchanged; a file changed or gone since its entry was written is dropped."""
    copy = tmp_path / "copy"
    shutil.copytree(one_exported["run"], copy)
    out = copy / EXPORT_DIR
    (out / FORMATS["onnx-int8"].filename).write_bytes(b"replaced by hand")
    (out / FORMATS["tflite-fp16"].filename).unlink()
    manifest = export_run(copy, "tflite").manifest.to_json()
    kept = [f for f in FORMATS if f not in ("onnx-int8", "tflite-fp16")]
    assert list(manifest["artifacts"]) == kept
    for fmt in kept:
        if fmt != "tflite":
            assert manifest["artifacts"][fmt] == one_exported["manifest"]["artifacts"][fmt]
    assert manifest["source_run"] == str(copy.resolve())
    assert manifest[MODEL_HASH] == sha256(copy / "model.keras")
    assert json.loads((out / MANIFEST_FILE).read_text()) == manifest


def test_merge_keeps_entries_of_the_same_model_only(tmp_path):
    """The model's sha256 decides; a model.json without it (older toolkit) is the same run's
    when it names the run or sits in the run's own export folder (a copied run)."""
    run = tmp_path / "copy"
    head = {"source_run": str(run.resolve()), MODEL_HASH: "model-b", "class_names": ["a"]}
    onnx_entry = {"file": "model.onnx", "sha256": sha256(_write(tmp_path / "o/model.onnx"))}

    def merged(out: Path, old: dict) -> list[str]:
        _write(out / "model.onnx")
        (out / MANIFEST_FILE).write_text(json.dumps({**old, "artifacts": {"onnx": onnx_entry}}))
        return list(update_manifest(out, head, "tflite", {"file": "x"}).artifacts)

    legacy = {"source_run": str(tmp_path / "run")}  # the folder it was copied from
    assert merged(run / EXPORT_DIR, legacy) == ["onnx", "tflite"]
    assert merged(run / EXPORT_DIR, {**legacy, MODEL_HASH: "model-b"}) == ["onnx", "tflite"]
    assert merged(run / EXPORT_DIR, {**legacy, MODEL_HASH: "model-a"}) == ["tflite"]
    assert merged(tmp_path / "elsewhere", legacy) == ["tflite"]  # --out of another run


def _write(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"an artifact")
    return path


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_scratch_folders_of_dead_processes_are_removed_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = [tmp_path / f"toolkit-{kind}-{_dead_pid()}-ab_d1234" for kind in ("export", "verify")]
    live = tmp_path / f"toolkit-verify-{os.getpid()}-abcd1234"  # a concurrent run's
    other = [tmp_path / "toolkit-export-abcd1234", tmp_path / f"other-{_dead_pid()}-abcd1234"]
    for folder in [*dead, live, *other]:
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "model.onnx").write_bytes(b"x" * 1000)
    with scratch_dir("export") as scratch:
        assert scratch.parent == tmp_path and scratch.is_dir()
        assert scratch.name.startswith(f"toolkit-export-{os.getpid()}-")
        assert [p.name for p in dead if p.exists()] == []
        assert live.is_dir() and all(p.is_dir() for p in other)
    assert not scratch.exists()


def test_export_removes_stale_temps_of_every_format_and_dead_scratch(
    one_exported, tmp_path, monkeypatch
):
    """What a `kill -9` during export left: a hidden temp of any format's file in the export
    folder (not only of the formats exported now), and its scratch folder in the temp folder."""
    out = tmp_path / "export"
    shutil.copytree(one_exported["out"], out)
    temps = [out / f".{f.filename}.abcd_123{Path(f.filename).suffix}" for f in FORMATS.values()]
    temps.append(out / ".model.json.x1y2z3w4.json")
    for path in temps:
        path.write_bytes(b"")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"toolkit-export-{_dead_pid()}-abcd1234"
    live = tmp_path / f"toolkit-export-{os.getpid()}-abcd1234"
    dead.mkdir()
    live.mkdir()
    export_run(one_exported["run"], "tflite-fp16", out=out)
    assert [p.name for p in temps if p.exists()] == []
    assert not dead.exists() and live.is_dir()
    assert [p.name for p in tmp_path.glob("toolkit-*")] == [live.name]  # its own one removed


def test_command_refuses_a_negative_accuracy_budget(exported, tmp_path, capsys):
    """A negative budget asks int8 to beat the float model: only validation noise 'meets' it."""
    from toolkit.cli.main import main

    out = tmp_path / "x"
    argv = ["export", str(exported["run"]), "--format", "tflite-int8", "--out", str(out)]
    assert main([*argv, "--max-accuracy-drop", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--max-accuracy-drop must be 0 or more" in err
    assert not out.exists()


def _boom(src, path):
    path.write_bytes(b"half-written")
    raise RuntimeError("converter crashed")


def _garbage(src, path):
    path.write_bytes(b"not a flatbuffer")


@pytest.mark.parametrize(
    "converter, message",
    [(_boom, "converter crashed"), (_garbage, "conversion failed"), ("flex", "FlexExtract")],
)
def test_failed_conversion_keeps_the_previous_artifact(
    exported, tmp_path, monkeypatch, flex_tflite, converter, message
):
    out = tmp_path / "export"
    shutil.copytree(exported["out"], out)
    before = _files(out)
    if converter == "flex":

        def converter(src, path):
            path.write_bytes(flex_tflite)

    monkeypatch.setitem(CONVERTERS, "tflite", replace(CONVERTERS["tflite"], convert=converter))
    with pytest.raises(ExportError, match=message):
        export_run(exported["run"], "tflite", out=out)
    assert _files(out) == before


@pytest.fixture
def bad_inputs(exported, tmp_path):
    run = exported["run"]
    corrupt = tmp_path / "corrupt_run"
    corrupt.mkdir()
    shutil.copy(run / "config.json", corrupt / "config.json")
    (corrupt / "model.keras").write_bytes(b"not a zip")
    small = tmp_path / "small.npz"
    np.savez(small, x=np.zeros((40, 16, 16, 3), np.uint8), y=np.arange(40) % 4)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    return {
        "missing run": (dict(run_dir=tmp_path / "nope", formats="onnx"), "does not exist"),
        "corrupt model.keras": (dict(run_dir=corrupt, formats="onnx"), "corrupt"),
        "unknown format": (dict(formats="tflite-f16"), "did you mean 'tflite-fp16'"),
        "opset for tflite": (dict(formats="tflite,tflite-fp16", opset=18), "--opset"),
        "calib data for onnx": (dict(formats="onnx", calib_data="shapes"), "--calib-data"),
        "calib samples for fp16": (dict(formats="tflite-fp16", calib_samples=8), "calib-samples"),
        "opset below 17": (dict(formats="onnx", opset=16), "--opset 16"),
        "zero calib samples": (dict(formats="tflite-int8", calib_samples=0), "positive"),
        "calib data wrong shape": (
            dict(formats="onnx-int8", calib_data=f"npz:{small}", calib_samples=8),
            r"\(16, 16, 3\).*\(32, 32, 3\)",
        ),
        "fewer calib images than asked": (
            dict(formats="tflite-int8", calib_samples=10_000),
            "only 240 training images.*lower --calib-samples",
        ),
        "out is a file": (dict(formats="onnx", out=a_file), "is a file"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing run",
        "corrupt model.keras",
        "unknown format",
        "opset for tflite",
        "calib data for onnx",
        "calib samples for fp16",
        "opset below 17",
        "zero calib samples",
        "calib data wrong shape",
        "fewer calib images than asked",
        "out is a file",
    ],
)
def test_bad_input_is_a_usage_error_and_writes_nothing(bad_inputs, exported, tmp_path, case):
    kwargs, message = bad_inputs[case]
    kwargs = {"run_dir": exported["run"], "out": tmp_path / "out", **kwargs}
    before = _files(tmp_path, exported["run"])
    with pytest.raises(UsageError, match=message):
        export_run(**kwargs)
    assert _files(tmp_path, exported["run"]) == before


def _command_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_command_prints_the_table(one_exported, tmp_path, capsys):
    out = tmp_path / "cli"
    args = _command_args(str(one_exported["run"]), "--format", "tflite-dynamic", "--out", str(out))
    assert run_command(args) == 0
    text = capsys.readouterr().out
    size = (out / FORMATS["tflite-dynamic"].filename).stat().st_size
    assert "format" in text and "size (KB)" in text and "seconds" in text
    assert f"tflite-dynamic  {FORMATS['tflite-dynamic'].filename}" in text
    assert f"{size / 1024:.1f}" in text
    assert str(out) in text


def test_command_reports_a_failed_conversion_in_one_line(exported, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(CONVERTERS, "tflite", replace(CONVERTERS["tflite"], convert=_boom))
    args = _command_args(str(exported["run"]), "--format", "tflite", "--out", str(tmp_path / "x"))
    assert run_command(args) == 1
    err = [x for x in capsys.readouterr().err.splitlines() if not x.startswith(PROGRESS)]
    assert len(err) == 1 and "export failed: tflite: conversion failed" in err[0]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("params", [{"t": 64, "dim": 48, "heads": 2, "key_dim": 24}])
def test_lsa_op_converts_at_opset_23_and_matches_numpy(params):
    """The LSA op where heads x key_dim is the token width (the tiny presets'): the rewrite is
    checked on the op's own activations, its Attention node matches the float64 reference.
    Probed with 0-255 pixels, the near one-hot softmax made the check fail a correct graph."""
    case = OP_CASES["lsa"]
    shape = case.input_shape(params)
    model = case_model(case, params, None, seed=0)
    x = case_inputs(shape, 8, seed=1)
    graph = keras_to_onnx(model, shape, 23, samples=x)
    assert "Attention" in {n.op_type for n in graph.graph.node}
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {INPUT_NAME: x})
    np.testing.assert_allclose(got, case.reference(model, params, x), atol=1e-5)
