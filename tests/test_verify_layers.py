"""`toolkit verify RUN --layers`: boundary tensors of every artifact vs Keras on tiny runs, the
first divergence of deliberately broken artifacts, the plot, the parity record, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest
from tiny_runs import copy_tiny_run, only_formats
from wrong_ops import CropPadShift

import toolkit.verify.verifier as verifier
from toolkit.cli.main import main
from toolkit.export import export_run
from toolkit.runfiles.folder import (
    EXPORT_DIR,
    MANIFEST_FILE,
    MODEL_FILE,
    VERIFY_FILE,
    VERIFY_LAYERS_PLOT,
)
from toolkit.verify.layers.boundaries import Boundary, Graph, Op, ScopeNames, Tensor, locate
from toolkit.verify.layers.level import verify_layers_run

MODELS = ("shiftvit", "vit-lsa")
FORMATS = "tflite,tflite-int8,onnx,onnx-int8"
CPU = {"tflite": "litert", "tflite-int8": "litert", "onnx": "ort-cpu", "onnx-int8": "ort-cpu"}
MUTANT_FORMATS = "tflite,onnx"
pytestmark = pytest.mark.filterwarnings("ignore:Statistics for quantized inputs:UserWarning")


@pytest.fixture(scope="module")
def runs(tiny_runs, tmp_path_factory) -> dict[str, Path]:
    """Copies of the shared tiny runs (1 epoch on synthetic shapes, exported with `--format
    all`, 64 calibration images) cut to float32 and int8 TFLite and ONNX: what exporting
    those four alone writes, without its ~11 CPU-s a model."""
    root = tmp_path_factory.mktemp("layers")
    copies = {m: copy_tiny_run(tiny_runs.exported(m), root / m) for m in MODELS}
    return {m: only_formats(run, FORMATS) for m, run in copies.items()}


@pytest.fixture(scope="module")
def verified(runs) -> dict[str, tuple[int, dict]]:
    """`toolkit verify RUN --layers --runtime litert,ort-cpu`: exit code and verify.json."""
    out = {}
    for model, run_dir in runs.items():
        code = main(["verify", str(run_dir), "--layers", "--runtime", "litert,ort-cpu"])
        out[model] = (code, json.loads((run_dir / VERIFY_FILE).read_text()))
    return out


def _cells(report: dict) -> dict[str, dict]:
    return {c["format"]: c for c in report["layers"]["cells"]}


def _fused(cell: dict) -> list[dict]:
    """Boundaries the converter fused into a later op (a norm's gamma and beta into the next
    Dense, a Dense's bias into the residual Add): no tensor of their own, and a reason that
    names the layer that took them in (not the boundary's own)."""
    fused = [
        r
        for r in cell["boundaries"]
        if "metrics" not in r and r["reason"].startswith("not found: fused by the converter into")
    ]
    assert all(f"of '{r['layer']}'" not in r["reason"] for r in fused)
    return fused


@pytest.mark.parametrize("model", MODELS)
def test_every_fp32_boundary_within_tolerance(verified, model):
    code, report = verified[model]
    cells = _cells(report)
    assert set(cells) == set(CPU) and all(cells[f]["runtime"] == r for f, r in CPU.items())
    # exit 1 only for a boundary out of tolerance, and never a float32 one
    assert code == (0 if report["passed"] else 1)
    assert all(line.startswith(("tflite-int8 ", "onnx-int8 ")) for line in report["failures"])
    for fmt in ("tflite", "onnx"):
        c = cells[fmt]
        assert c["status"] == "pass" and c["first_divergence"] is None, c.get("reason")
        rows = [r for r in c["boundaries"] if "metrics" in r]
        # every boundary is found but the ones the converter fused away, said so in the cell
        absent = [r for r in c["boundaries"] if "metrics" not in r]
        assert len(rows) >= len(c["boundaries"]) - 2 - len(_fused(c))
        assert all(r["reason"].startswith("not found: ") for r in absent)
        # matched by layer, the tensors are the Keras ones to float32 rounding
        assert all(r["status"] == "pass" for r in rows)
        assert all(r["metrics"]["exact"] or r["metrics"]["sqnr_db"] > 100 for r in rows)
        # the .tflite files end in the app's softmax, the ONNX files in the logits
        last = {"tflite": "probabilities", "onnx": "logits"}[fmt]
        assert rows[-1]["layer"] == last and rows[-1]["metrics"]["max_abs"] < 1e-4
        assert c["instrumented_vs_plain_max_abs"] < 1e-4


@pytest.mark.parametrize("model", MODELS)
def test_int8_boundaries_report_steps_of_their_own_scale(verified, model):
    """An int8 boundary tensor is dequantized with its own scale and its error counted in those
    steps; a float tensor inside an int8 model (a layer the recipe keeps float, or dynamic
    quantization's float activations) has no steps."""
    _, report = verified[model]
    int8_rows = []
    for fmt in ("tflite-int8", "onnx-int8"):
        c = _cells(report)[fmt]
        rows = [r for r in c["boundaries"] if "metrics" in r]
        assert len(rows) >= len(c["boundaries"]) - 4 - len(_fused(c))
        for r in rows:
            m = r["metrics"]
            if "scale" in m:
                assert m["scale"] > 0 and m["max_steps"] == pytest.approx(m["max_abs"] / m["scale"])
                int8_rows.append(r)
            else:
                assert "max_steps" not in m
        # int8 is not float32: the error is far above float32 rounding
        assert 10 < min(r["metrics"]["sqnr_db"] for r in rows if not r["metrics"]["exact"]) < 60
        assert c["largest_drop"]["ops"], c["largest_drop"]
    # LiteRT's full-integer model keeps its residual stream in int8: more than rounding there
    assert len(int8_rows) >= 5 and max(r["metrics"]["max_steps"] for r in int8_rows) > 1.0


def test_plot_and_parity_record(verified, runs):
    _, report = verified["shiftvit"]
    png = runs["shiftvit"] / VERIFY_LAYERS_PLOT
    assert report["layers"]["plot"] == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    manifest = json.loads((runs["shiftvit"] / EXPORT_DIR / MANIFEST_FILE).read_text())
    for fmt, runtime in CPU.items():
        entry = manifest["artifacts"][fmt]
        parity = entry["parity"]
        assert parity["sha256"] == entry["sha256"] and parity["matches_export"]
        assert parity["verified"] == report["date"] and parity["samples"]["layers"] == 30
        measured = parity["runtimes"][runtime]
        assert (
            measured["version"]
            == report["versions"]["litert" if runtime == "litert" else "onnxruntime"]
        )
        assert measured["layers"]["status"] == "pass"
        assert measured["layers"]["first_divergence"] is None
        assert measured["layers"]["tolerance"]["precision"] in ("fp32", "int8")


# -- mutants: the artifact is wrong at one layer; --layers must name that layer --


def _mutant_run(run_dir: Path, out: Path, mutate) -> Path:
    """A copy of the run whose artifacts come from a mutated model, but whose model.keras (the
    reference) is the original."""
    shutil.copytree(run_dir, out, ignore=shutil.ignore_patterns(EXPORT_DIR))
    model = keras.saving.load_model(run_dir / MODEL_FILE, compile=False)
    mutate(model).save(out / MODEL_FILE)
    export_run(out, MUTANT_FORMATS)
    shutil.copy(run_dir / MODEL_FILE, out / MODEL_FILE)
    return out


def _first_divergences(run_dir: Path) -> dict[tuple[str, str], str | None]:
    report = verify_layers_run(run_dir, runtimes=["litert", "ort-cpu"], samples=16)
    return {
        (c["format"], c["runtime"]): (c["first_divergence"] or {}).get("layer")
        for c in report["layers"]["cells"]
    }


def _perturb(layer_name: str, relative: float):
    def mutate(model: keras.Model) -> keras.Model:
        layer = model.get_layer(layer_name)
        rng = np.random.default_rng(0)
        layer.set_weights(
            [w * (1 + relative * rng.standard_normal(w.shape)) for w in layer.get_weights()]
        )
        return model

    return mutate


def _keras_io_shift(layer_name: str):
    def mutate(model: keras.Model) -> keras.Model:
        def clone(layer):
            kind = CropPadShift if layer.name == layer_name else type(layer)
            return kind.from_config(layer.get_config())

        mutant = keras.models.clone_model(model, clone_function=clone)
        mutant.set_weights(model.get_weights())
        return mutant

    return mutate


def test_perturbed_block_is_the_first_divergence(runs, tmp_path):
    """One attention block's weights off by 1% (vit-lsa): flagged at that block, not before.
    The batch-1 TFLite file fuses the block's output bias into the residual Add, so the first
    tensor it has after the block is that Add's."""
    mutant = _mutant_run(runs["vit-lsa"], tmp_path / "mutant", _perturb("block1_attn", 0.01))
    found = _first_divergences(mutant)
    assert found == {("tflite", "litert"): "block1_add1", ("onnx", "ort-cpu"): "block1_attn"}


def test_keras_io_no_op_shift_is_the_first_divergence(runs, tmp_path):
    """The keras.io shift (crop and pad back: nothing moves) in one ShiftViT block."""
    layer = "stage2_block1_shift"
    mutant = _mutant_run(runs["shiftvit"], tmp_path / "mutant", _keras_io_shift(layer))
    found = _first_divergences(mutant)
    assert found == {("tflite", "litert"): layer, ("onnx", "ort-cpu"): layer}


# -- bad input: one line, exit 2, nothing written --


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--format", "onnx"], "--format applies to the layer level"),
        (["--layers", "--formats", "tflite-fp16"], "not exported in this run"),  # old spelling
        (["--layers", "--format", "tflit"], "did you mean 'tflite'"),
        (["--layers", "--models-only"], "not allowed with argument"),
        (["--layers", "--samples", "0"], "--samples must be a positive integer"),
    ],
)
def test_bad_input_exits_2(runs, tmp_path, capsys, argv, message):
    report = tmp_path / "report.json"
    code = main(["verify", str(runs["shiftvit"]), "--json", str(report), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not report.exists() and not (tmp_path / VERIFY_LAYERS_PLOT).exists()


# -- matching by name: a layer whose output the converter fused into the next layer's op --


def _locate_chain(ops: list[tuple[str, str]], layers: list[tuple[str, str]]):
    """locate() on a chain x -> ops[0] -> ... -> y of (type, name) ops, every tensor (4, 8),
    with top-level layers (name, class) whose last is the model's output layer `logits`."""
    names = ["x", *(name for _, name in ops[:-1]), "y"]
    graph_ops = [
        Op(i, kind, names[i + 1], (names[i],), (names[i + 1],)) for i, (kind, _) in enumerate(ops)
    ]
    tensors = {n: Tensor(n, (None, 4, 8), True, True) for n in names}
    boundaries = [Boundary(name, kind, (4, 8), i) for i, (name, kind) in enumerate(layers)]
    scopes = ScopeNames("m", [b.name for b in boundaries])
    return locate(Graph(graph_ops, tensors, "y"), scopes, boundaries, "logits")


def test_a_layer_fused_into_the_next_is_not_found_rather_than_guessed():
    """TFLite folds tokenize's bias add into the position add: the op is named
    `m_1/position_1/add;m_1/tokenize_1/BiasAdd`, and tokenize's last tensor of its own (the
    matmul before the bias) must not stand in for its output."""
    add = "m_1/position_1/add;m_1/tokenize_1/BiasAdd"
    found, missing = _locate_chain(
        [("FULLY_CONNECTED", "m_1/tokenize_1/MatMul"), ("ADD", add), ("FULLY_CONNECTED", "y")],
        [
            ("tokenize", "ShiftedPatchTokenization"),
            ("position", "PositionEmbedding"),
            ("logits", "Dense"),
        ],
    )
    assert missing == {"tokenize": "not found: fused by the converter into ADD of 'position'"}
    assert found["position"].tensor == add and found["logits"].tensor == "y"


def test_a_norm_folded_into_the_next_dense_belongs_to_that_dense():
    """The int8 converter folds a norm's gamma and beta into the Dense that reads it and names
    the op after the norm first (`m_1/norm_1/mul_1;m_1/norm_1/add_1;m_1/attn_1/key_1/MatMul`),
    with a QUANTIZE between: the op is the attention's, the norm has no tensor of its own, and
    the norm's unscaled value (its MUL) must not stand in for its output."""
    fc = "m_1/norm_1/mul_1;m_1/norm_1/add_1;m_1/attn_1/key_1/MatMul"
    found, missing = _locate_chain(
        [
            ("MUL", "m_1/norm_1/mul"),
            ("QUANTIZE", "tfl.quantize"),
            ("FULLY_CONNECTED", fc),
            ("FULLY_CONNECTED", "y"),
        ],
        [("norm", "LayerNormalization"), ("attn", "LocalitySelfAttention"), ("logits", "Dense")],
    )
    assert missing == {"norm": "not found: fused by the converter into FULLY_CONNECTED of 'attn'"}
    assert found["attn"].tensor == fc and found["logits"].tensor == "y"


def test_model_level_verify_replaces_the_parity_record(runs, tmp_path, monkeypatch):
    """A later plain verify leaves its own record: the logits figures, the file's sha256.
    Without the int8 attribution (no part of the record; tests/test_verify.py checks it): it
    was ~6 of this test's ~8 CPU-s."""
    monkeypatch.setattr(verifier, "int8_formats", lambda: [])  # no format asks for it
    run_dir = runs["shiftvit"]
    argv = ["--models-only", "--runtime", "litert", "--samples", "8"]
    code = main(["verify", str(run_dir), "--json", str(tmp_path / "r.json"), *argv])
    report = json.loads((tmp_path / "r.json").read_text())
    manifest = json.loads((run_dir / EXPORT_DIR / MANIFEST_FILE).read_text())
    cells = {c["format"]: c for c in report["models"]["cells"]}
    assert code == (0 if report["passed"] else 1)
    for fmt in ("tflite", "tflite-int8"):
        parity = manifest["artifacts"][fmt]["parity"]
        assert parity["verified"] == report["date"] and parity["matches_export"]
        assert set(parity["runtimes"]) == {"litert"}
        assert "layers" not in parity["runtimes"]["litert"]
        logits = parity["runtimes"]["litert"]["model"]["logits"]
        assert logits["cosine"] == cells[fmt]["metrics"]["cosine"]
    # an artifact this verify did not measure keeps the record of the one that did
    assert "layers" in manifest["artifacts"]["onnx"]["parity"]["runtimes"]["ort-cpu"]
