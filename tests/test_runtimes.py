"""Runtime adapters: every registry entry against Keras, int8 quantization, open_artifact errors."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
import tf2onnx

from toolkit.common.errors import UsageError
from toolkit.data.shapes import generate_shapes
from toolkit.models import build_model, get_preset
from toolkit.runtimes import (
    DEFAULT_RUNTIME,
    DEFAULT_RUNTIMES,
    DEFAULT_VERIFIED,
    RUNTIMES,
    VERIFIED_RUNTIMES,
    RuntimeOptions,
    RuntimeUnavailable,
    TensorSpec,
    base,
    open_artifact,
)
from toolkit.runtimes.base import PreparedRun, run_images, to_input, to_logits
from toolkit.runtimes.litert import LiteRTSession, load_interpreter

SHAPE = (32, 32, 3)
CLASSES = 10
MODELS = ("shiftvit", "vit-lsa")
pytestmark = pytest.mark.filterwarnings("ignore:Statistics for quantized inputs:UserWarning")


def convert_tflite(model: keras.Model, calibration: np.ndarray | None = None) -> bytes:
    """fp32 TFLite (builtins only), or full-integer int8 with int8 input/output."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if calibration is not None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([x[None]] for x in calibration)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    return converter.convert()


def write_artifacts(model: keras.Model, folder: Path, int8: bool = True) -> dict[str, Path]:
    """model.keras, model.tflite, model.onnx and (optionally) model-int8.tflite in `folder`."""
    paths = {s: folder / f"model{s}" for s in (".keras", ".tflite", ".onnx")}
    model.save(paths[".keras"])
    paths[".tflite"].write_bytes(convert_tflite(model))
    signature = [tf.TensorSpec((None, *SHAPE), tf.float32, name="image")]
    tf2onnx.convert.from_keras(
        model, input_signature=signature, opset=17, output_path=str(paths[".onnx"])
    )
    if int8:
        calibration = generate_shapes(8, seed=1)[0].astype(np.float32)
        paths["int8"] = folder / "model-int8.tflite"
        paths["int8"].write_bytes(convert_tflite(model, calibration))
    return paths


@pytest.fixture(scope="module", params=MODELS)
def artifacts(request, tmp_path_factory) -> tuple[keras.Model, dict[str, Path]]:
    """A tiny untrained model of each family and its artifacts (no training needed)."""
    keras.utils.set_random_seed(0)
    model = build_model(get_preset(request.param, "tiny"), SHAPE, CLASSES)
    return model, write_artifacts(model, tmp_path_factory.mktemp(request.param))


def random_images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, *SHAPE)).astype(np.float32)


def test_registry_covers_every_suffix():
    web = {"web-mediapipe", "web-litert", "web-ort"}  # toolkit/runtimes/web/libraries.py
    assert set(RUNTIMES) == {"keras", "litert", "mediapipe", "ort-cpu", "ort-cuda"} | web
    # the browser runtimes: verify's model level alone (MediaPipe's, like mediapipe, none)
    assert set(VERIFIED_RUNTIMES) == set(RUNTIMES) - {"mediapipe", "web-mediapipe"}
    assert {n for n, r in RUNTIMES.items() if r.levels == ("models",)} == web - {"web-mediapipe"}
    # bench's and verify's default lists: each browser row starts a Chromium, so asked by name
    assert set(DEFAULT_RUNTIMES) == set(RUNTIMES) - web
    assert set(DEFAULT_VERIFIED) == set(VERIFIED_RUNTIMES) - web
    for name, entry in RUNTIMES.items():
        assert entry.name == name and entry.description
    for suffix, name in DEFAULT_RUNTIME.items():
        assert suffix in RUNTIMES[name].suffixes
    assert RUNTIMES["keras"].unavailable() is None
    assert RUNTIMES["litert"].unavailable() is None
    assert RUNTIMES["ort-cpu"].unavailable() is None


@pytest.mark.parametrize("runtime", [n for n, r in VERIFIED_RUNTIMES.items() if "ops" in r.levels])
def test_runtime_matches_keras(artifacts, runtime):
    """fp32 logits of every verified runtime match the in-memory Keras model within 1e-4 (the
    mediapipe runtime takes app files only: tests/test_app_ready.py checks it)."""
    model, paths = artifacts
    entry = RUNTIMES[runtime]
    if (reason := entry.unavailable()) is not None:
        pytest.skip(reason)
    session = open_artifact(paths[entry.suffixes[0]], runtime, RuntimeOptions(threads=2))
    assert session.runtime == runtime and session.providers
    assert session.input == TensorSpec(session.input.name, (None, *SHAPE), "float32")
    assert session.output == TensorSpec(session.output.name, (None, CLASSES), "float32")
    for batch in (1, 5, 1):
        x = random_images(batch, seed=batch)
        logits = session.run(x)
        assert logits.dtype == np.float32 and logits.shape == (batch, CLASSES)
        np.testing.assert_allclose(logits, model.predict_on_batch(x), rtol=0, atol=1e-4)
    assert session.run(x[:0]).shape == (0, CLASSES)


def test_default_runtimes_and_providers(artifacts):
    _, paths = artifacts
    assert open_artifact(paths[".onnx"]).providers == ["CPUExecutionProvider"]
    litert = open_artifact(paths[".tflite"])
    assert litert.runtime == "litert" and litert.providers[0] == "XNNPACK"
    assert open_artifact(paths[".keras"]).runtime == "keras"


def test_litert_without_signature_resizes_batch(artifacts):
    """The input/output-details path (models without a serving_default signature)."""
    model, paths = artifacts
    session = LiteRTSession(load_interpreter(paths[".tflite"], RuntimeOptions()), Path("m"), None)
    assert session.input.shape == (None, *SHAPE)
    for batch in (5, 2, 5):
        x = random_images(batch, seed=batch)
        np.testing.assert_allclose(session.run(x), model.predict_on_batch(x), atol=1e-4)


def test_int8_tflite_close_to_keras(artifacts):
    """int8 in and out, quantized like an app would; loose bounds from untrained tiny models.

    Measured on 64 shape images (seeds 0 and 1, 8 or 32 calibration images): ShiftViT
    correlation >= 0.994, mean |error| <= 0.08 x std(logits), top-1 agreement >= 0.92;
    ViT-LSA (more sensitive: untrained logits are near-ties) >= 0.92, <= 0.31 and >= 0.78.
    """
    model, paths = artifacts
    session = open_artifact(paths["int8"])
    for spec in (session.input, session.output):
        assert spec.dtype == "int8" and spec.scale > 0 and -128 <= spec.zero_point <= 127
    x = generate_shapes(64, seed=2)[0].astype(np.float32)
    logits, reference = session.run(x), model.predict_on_batch(x)
    assert logits.dtype == np.float32
    assert np.corrcoef(logits.ravel(), reference.ravel())[0, 1] > 0.85
    assert np.abs(logits - reference).mean() < 0.45 * reference.std()
    assert (logits.argmax(1) == reference.argmax(1)).mean() >= 0.65


def test_quantize_and_dequantize_like_an_app():
    spec = TensorSpec("image", (None, 2), "int8", scale=2.0, zero_point=-10)
    q = to_input(np.array([[0.0, 3.0], [300.0, -400.0]], np.float32), spec)
    assert q.dtype == np.int8 and q.tolist() == [[-10, -8], [127, -128]]
    np.testing.assert_array_equal(to_logits(q, spec), [[0.0, 4.0], [274.0, -236.0]])
    raw = TensorSpec("image", (None, 1), "uint8")  # no scale: raw pixel values
    assert to_input(np.array([[254.6]]), raw).tolist() == [[255]]


def test_fixed_batch_models_run_in_chunks():
    seen = []

    def call(x: np.ndarray) -> np.ndarray:
        seen.append(len(x))
        return x.reshape(len(x), -1).sum(axis=1, keepdims=True)

    spec = TensorSpec("x", (2, 3), "float32")
    out = run_images(call, np.ones((5, 3), np.float32), spec, TensorSpec("y", (2, 1), "float32"))
    assert seen == [2, 2, 2] and out[:, 0].tolist() == [3.0] * 5
    with pytest.raises(ValueError, match="do not fit"):
        run_images(call, np.ones((5, 4), np.float32), spec, spec)


@pytest.mark.parametrize("key", [".keras", ".tflite", ".onnx", "int8"])
def test_bound_run_gives_the_logits_of_run(artifacts, key):
    """What bench times (`bind`, then `run()`) computes what `run` returns, int8 file included."""
    _, paths = artifacts
    session = open_artifact(paths[key], options=RuntimeOptions(threads=2))
    images = random_images(3, seed=4)
    bound = session.bind(images)
    for _ in range(2):
        bound.run()
        np.testing.assert_allclose(bound.logits(), session.run(images), rtol=0, atol=1e-6)


def test_prepared_run_converts_once_and_calls_per_fixed_batch(monkeypatch):
    """The pixels are quantized once, at bind; each run is the fixed-batch calls alone."""
    conversions, seen = [], []
    monkeypatch.setattr(
        base, "to_input", lambda x, spec: conversions.append(1) or to_input(x, spec)
    )

    def call(x: np.ndarray) -> np.ndarray:
        seen.append(x.copy())
        return x[:, :1]

    spec = TensorSpec("x", (2, 3), "int8", scale=2.0, zero_point=-10)
    bound = PreparedRun(
        call, np.full((5, 3), 4.0, np.float32), spec, TensorSpec("y", (2, 1), "int8", 0.5, 0)
    )
    for _ in range(3):
        bound.run()
    assert len(conversions) == 1 and [len(x) for x in seen] == [2, 2, 2] * 3
    assert all(x.dtype == np.int8 for x in seen) and seen[2].tolist() == [[-8] * 3, [0] * 3]
    assert bound.logits().tolist() == [[-4.0]] * 5  # (-8 - 0) x 0.5, the padding row dropped
    with pytest.raises(ValueError, match="no images"):
        PreparedRun(call, np.zeros((0, 3), np.float32), spec, spec)
    with pytest.raises(ValueError, match="do not fit"):
        PreparedRun(call, np.zeros((2, 4), np.float32), spec, spec)


def test_ort_cuda_never_answers_with_cpu(artifacts):
    """Where CUDA is missing, ort-cuda raises instead of quietly running on the CPU."""
    _, paths = artifacts
    entry = RUNTIMES["ort-cuda"]
    reason = entry.unavailable()
    if reason is None:
        session = open_artifact(paths[".onnx"], "ort-cuda")
        assert session.providers[0] == "CUDAExecutionProvider"
        return
    assert "ort-cuda" in reason and "\n" not in reason
    with pytest.raises(RuntimeUnavailable, match="ort-cuda"):
        open_artifact(paths[".onnx"], "ort-cuda")
    with pytest.raises(RuntimeUnavailable, match="CUDA") as info:  # the adapter's own check
        entry.open(paths[".onnx"], RuntimeOptions())
    assert isinstance(info.value, UsageError) and info.value.reason == str(info.value)


@pytest.mark.parametrize(
    ("name", "content", "runtime", "message"),
    [
        ("missing.onnx", None, None, "missing.onnx not found"),
        ("model.pb", b"x", None, "model.pb is not a .keras, .tflite, .onnx, .ort file"),
        ("bad.tflite", b"not a flatbuffer", None, "bad.tflite could not be loaded by litert"),
        ("bad.onnx", b"not a protobuf", None, "bad.onnx could not be loaded by ort-cpu"),
        ("bad.keras", b"not a zip", None, "bad.keras is not a valid .keras file"),
        ("m.onnx", b"x", "litert", "litert opens .tflite files, not .*use --runtime ort-cpu"),
        ("m.onnx", b"x", "ort-cpo", "unknown runtime 'ort-cpo': did you mean 'ort-cpu'"),
        ("m.onnx", b"x", "tensorrt", "unknown runtime 'tensorrt': choose one of keras"),
    ],
)
def test_open_artifact_errors(tmp_path, name, content, runtime, message):
    if content is not None:
        (tmp_path / name).write_bytes(content)
    with pytest.raises(UsageError, match=message) as info:
        open_artifact(tmp_path / name, runtime)
    assert "\n" not in str(info.value)


def test_open_artifact_rejects_folders_and_bad_threads(artifacts, tmp_path):
    with pytest.raises(UsageError, match="is a folder"):
        open_artifact(tmp_path)
    with pytest.raises(UsageError, match="threads must be at least 1"):
        open_artifact(artifacts[1][".tflite"], options=RuntimeOptions(threads=0))


# -- ONNX Runtime session options and bound runs (CUDA graphs) --


def test_ort_sessions_are_set_up_for_latency_and_say_so(artifacts):
    from toolkit.runtimes.onnxruntime import session_settings
    from toolkit.runtimes.timing import Protocol
    from toolkit.runtimes.worker import measure

    _, paths = artifacts
    session = open_artifact(paths[".onnx"], "ort-cpu", RuntimeOptions(threads=2))
    options = session.session.get_session_options()
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert session.settings == session_settings(RuntimeOptions(threads=2))
    assert session.settings["graph_optimization_level"] == options.graph_optimization_level.name
    row = measure(paths[".onnx"], "ort-cpu", 1, Protocol(warmup=0, runs=2, seconds=None), 2)
    assert row["status"] == "ok" and row["settings"]["intra_op_num_threads"] == 2  # bench.json


def test_ort_cuda_asks_for_cuda_graphs_only_where_inputs_stay_bound():
    from toolkit.runtimes.onnxruntime import CPU, CUDA, CUDA_GRAPH_OPTION, cuda_providers

    assert cuda_providers(cuda_graph=True) == [(CUDA, {CUDA_GRAPH_OPTION: "1"}), CPU]
    assert cuda_providers(cuda_graph=False) == [(CUDA, {CUDA_GRAPH_OPTION: "0"}), CPU]


def test_a_graph_ort_cannot_capture_runs_node_by_node_and_says_why(monkeypatch, tmp_path):
    from toolkit.runtimes import onnxruntime as adapter

    class Captured:
        def get_providers(self):
            return [adapter.CUDA, adapter.CPU]

    def refuses(model, options, providers):
        raise RuntimeError("This session cannot use the graph capture feature\nas requested")

    path, plain = tmp_path / "m.onnx", object()
    monkeypatch.setattr(adapter, "open_session", refuses)
    session, state = adapter._cuda_graph_session(path, RuntimeOptions(), plain)
    assert session is plain and state == "off: This session cannot use the graph capture feature"
    monkeypatch.setattr(adapter, "open_session", lambda model, options, providers: (Captured(), []))
    session, state = adapter._cuda_graph_session(path, RuntimeOptions(), plain)
    assert isinstance(session, Captured) and state == "on"


def test_ort_cuda_without_cuda_graphs_runs_node_by_node_and_the_worker_says_so(monkeypatch):
    """RuntimeOptions(cuda_graph=False) (the worker's --no-cuda-graph) keeps the plain CUDA
    session: no graph session is opened, and the reason is recorded."""
    from toolkit.runtimes import onnxruntime as adapter
    from toolkit.runtimes.timing import Protocol
    from toolkit.runtimes.worker import build_parser, worker_command

    opened = []
    monkeypatch.setattr(
        adapter, "_cuda_graph_session", lambda *a: opened.append(a) or ("graph", "on")
    )
    session = object.__new__(adapter.OrtSession)  # a CUDA session needs a GPU; its options do not
    session.session, session.path, session.runtime = "plain", Path("m.onnx"), "ort-cuda"
    session.options = RuntimeOptions(cuda_graph=False)
    assert session.bound_session() == (
        "plain",
        "off: not asked for (RuntimeOptions.cuda_graph=False)",
    )
    assert opened == []
    session.options = RuntimeOptions()
    assert session.bound_session() == ("graph", "on") and len(opened) == 1
    session.runtime = "ort-cpu"
    assert session.bound_session() == ("plain", "off: ort-cpu")

    protocol = Protocol(warmup=1, runs=2, seconds=None)
    argv = worker_command(Path("m.onnx"), "ort-cuda", 1, protocol, None, cuda_graph=False)
    assert argv[-1] == "--no-cuda-graph"
    assert not build_parser().parse_args(argv[3:]).cuda_graph
    default = worker_command(Path("m.onnx"), "ort-cuda", 1, protocol, None)
    assert "--no-cuda-graph" not in default and build_parser().parse_args(default[3:]).cuda_graph


def test_mediapipe_refuses_files_without_metadata_in_one_line(artifacts, tmp_path):
    """A .tflite without TFLite Model Metadata (another program's) and bytes that are no TFLite
    model: one-line UsageErrors naming the way out, found before the task is created."""
    pytest.importorskip("mediapipe")
    _, paths = artifacts
    garbage = tmp_path / "other.tflite"
    garbage.write_bytes(b"\x00" * 64)
    for path, words in ((paths[".tflite"], "has no TFLite Model Metadata"), (garbage, "is not a")):
        assert words in RUNTIMES["mediapipe"].refuses(path)
        with pytest.raises(UsageError, match=words) as caught:
            open_artifact(path, "mediapipe")
        message = str(caught.value)
        assert len(message.splitlines()) == 1 and "toolkit export" in message
    with pytest.raises(UsageError, match="opens .tflite files"):
        open_artifact(paths[".onnx"], "mediapipe")
