"""`toolkit export --max-accuracy-drop`: recipe tables, budgeted search, model.json, failures."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from ai_edge_litert.interpreter import Interpreter
from onnx import numpy_helper
from tiny_runs import copy_tiny_run

import toolkit.export.int8_search as int8_search
from toolkit.common.errors import UsageError
from toolkit.export import export_run
from toolkit.export.command import add_arguments
from toolkit.export.command import run as run_command
from toolkit.export.converters import CONVERTERS
from toolkit.export.int8_search import ONNX_RECIPES, TFLITE_RECIPES, choose
from toolkit.export.metadata import read_metadata
from toolkit.export.onnx_int8 import ImageReader
from toolkit.export.oplist import forbidden_ops, onnx_ops, tflite_ops
from toolkit.export.xnnpack import delegation
from toolkit.formats import FORMATS, check_options
from toolkit.runfiles.folder import MANIFEST_FILE, open_run
from toolkit.runfiles.hashes import sha256
from toolkit.runtimes import open_artifact
from toolkit.runtimes.timing import Protocol

CALIB_SAMPLES = 32
QUICK = Protocol(warmup=1, runs=5, seconds=None)  # latency is recorded, never asserted on

PROGRESS = "   "  # toolkit.common.progress indents its lines; errors start at column 0


@pytest.fixture(autouse=True)
def quick_latency(monkeypatch):
    monkeypatch.setattr(int8_search, "SEARCH_PROTOCOL", QUICK)


@pytest.fixture(scope="module")
def vit_run(tiny_runs, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("search-vit")
    return copy_tiny_run(tiny_runs.trained("vit-lsa"), root / "run")


def _ops_by_type(flatbuffer: bytes) -> dict[str, set[str]]:
    """TFLite op name -> the dtypes of its first operand, over the whole graph."""
    interpreter = Interpreter(model_content=flatbuffer)
    found: dict[str, set[str]] = {}
    for op in interpreter._get_ops_details():
        found.setdefault(op["op_name"], set()).add(np.dtype(op["operand_types"][0]).name)
    return found


# the formats searched per model: both on ViT-LSA (attention, the recipes' reason to exist);
# ShiftViT's .tflite (no attention: the float-attention recipes change nothing there)
SEARCHED = {"vit-lsa": ("tflite-int8", "onnx-int8"), "shiftvit": ("tflite-int8",)}


@dataclass
class Searched:
    """`export_run(RUN, FORMATS, max_accuracy_drop=50)` with every candidate's bytes kept."""

    out: Path  # the export folder
    manifest: dict
    built: dict[str, dict[str, bytes]]  # format -> recipe -> the candidate's bytes


def budgeted_search(run: Path, out: Path) -> Searched:
    """Both search tables built, scored and timed once on RUN; the recipe tests below read
    the candidates from here (a search builds every recipe of its table)."""
    formats = SEARCHED[open_run(run).config.model]
    built: dict[str, dict[str, bytes]] = {fmt: {} for fmt in formats}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(int8_search, "SEARCH_PROTOCOL", QUICK)
        for fmt in formats:
            converter = CONVERTERS[fmt]

            def build(src, recipe, name, _build=converter.search.build, _kept=built[fmt]):
                _kept[name] = _build(src, recipe, name)
                return _kept[name]

            space = replace(converter.search, build=build)
            patch.setitem(CONVERTERS, fmt, replace(converter, search=space))
        exported = export_run(
            run, ",".join(formats), calib_samples=CALIB_SAMPLES, max_accuracy_drop=50.0, out=out
        )
    return Searched(out, exported.manifest.to_json(), built)


@pytest.fixture(scope="module")
def vit_searched(vit_run, tmp_path_factory) -> Searched:
    return budgeted_search(vit_run, tmp_path_factory.mktemp("searched-vit") / "export")


# -- the recipe tables --


@pytest.mark.parametrize("name", TFLITE_RECIPES)
def test_every_tflite_recipe_builds_a_runnable_builtin_artifact(name, vit_searched, tmp_path):
    recipe = TFLITE_RECIPES[name]
    flatbuffer = vit_searched.built["tflite-int8"][name]
    assert forbidden_ops(tflite_ops(flatbuffer)) == []
    path = tmp_path / "m.tflite"
    path.write_bytes(flatbuffer)
    session = open_artifact(path, "litert")
    # the app's camera pixels in (q = pixel), float32 probabilities out (MediaPipe refuses an
    # int8 output; a uint8 one ties the top two on low-margin images): export/tflite.py's int8 io
    assert session.input.dtype == "uint8" and session.output.dtype == "float32"
    assert session.input.shape[0] == recipe.batch
    logits = session.run(np.full((3, 32, 32, 3), 128.0, np.float32))
    assert logits.shape == (3, 10) and np.all(np.isfinite(logits))
    ops = _ops_by_type(flatbuffer)
    # the matmuls with weights are int8, but for the logits layer where the recipe keeps it float
    assert ops["FULLY_CONNECTED"] == ({"int8", "float32"} if recipe.float_logits else {"int8"})
    for op in recipe.float_ops:
        assert ops[op] == {"float32"}, f"{op} should stay float in {name}"
    # RSQRT only appears inside LayerNormalization: float exactly when the recipe keeps it so
    expected = "float32" if "LayerNormalization" in recipe.float_layers else "int8"
    assert ops["RSQRT"] == {expected}
    # LSA's mask: one float Add (the additive spelling) or the int8-safe renormalised one
    assert ("REDUCE_MIN" in ops) is not recipe.additive_mask


def test_float_norm_gelu_attention_runs_whole_in_xnnpack_where_plain_int8_does_not(
    vit_searched, tmp_path
):
    paths = {}
    for name in ("int8", "int8-b1-float-norm-gelu-attention"):
        paths[name] = tmp_path / f"{name}.tflite"
        paths[name].write_bytes(vit_searched.built["tflite-int8"][name])
    plain = delegation(paths["int8"])
    assert not plain.fully_delegated and plain.partitions > 1
    assert {"SQUARED_DIFFERENCE/int8", "RSQRT/int8"} <= set(plain.not_delegated)
    selective = delegation(paths["int8-b1-float-norm-gelu-attention"])
    # one XNNPACK partition; the uint8 pixels' QUANTIZE to int8 runs in LiteRT's own kernel
    assert selective.partitions == 1, selective.not_delegated
    assert selective.not_delegated == Counter({"QUANTIZE/uint8": 1})
    assert any(k.startswith("FULLY_CONNECTED/") and "int8" in k for k in selective.delegated)


@pytest.mark.parametrize("name", ONNX_RECIPES)
def test_every_onnx_recipe_builds_a_runnable_standard_artifact(name, vit_searched, tmp_path):
    recipe = ONNX_RECIPES[name]
    data = vit_searched.built["onnx-int8"][name]
    model = onnx.load_from_string(data)
    assert forbidden_ops(onnx_ops(model)) == []
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    logits = open_artifact(path, "ort-cpu").run(np.full((2, 32, 32, 3), 128.0, np.float32))
    assert logits.shape == (2, 10) and np.all(np.isfinite(logits))
    weights = {i.name for i in model.graph.initializer}
    ops = {n.op_type for n in model.graph.node}
    if recipe.dynamic:  # int8 weights straight into MatMulInteger, activations quantized per call
        assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops and "QuantizeLinear" not in ops
        integer = [n for n in model.graph.node if n.op_type == "MatMulInteger"]
        assert all(n.input[1] in weights for n in integer)
    else:
        int8_weights = {  # outputs of DequantizeLinear nodes of stored (int8) weights
            n.output[0]
            for n in model.graph.node
            if n.op_type == "DequantizeLinear" and n.input[0] in weights
        }
        with_int8_weights = {n.op_type for n in model.graph.node if int8_weights & set(n.input)}
        assert with_int8_weights & {"MatMul", "Conv"}
        if recipe.op_types is not None:
            assert with_int8_weights <= set(recipe.op_types)
    stored = [
        numpy_helper.to_array(i)
        for i in model.graph.initializer
        if i.data_type == onnx.TensorProto.INT8 and i.dims
    ]
    widest = max(int(np.abs(w.astype(np.int32)).max()) for w in stored)
    assert widest <= 64 if recipe.reduce_range else widest > 64  # 7-bit weights or full 8


def test_choose_takes_the_fastest_within_budget():
    rows = [
        {"recipe": "a", "within_budget": True, "p50_ms": 3.0},
        {"recipe": "b", "within_budget": False, "p50_ms": 1.0},
        {"recipe": "c", "within_budget": True, "p50_ms": 2.0},
        {"recipe": "d", "error": "RuntimeError: no"},
    ]
    assert choose(rows)["recipe"] == "c"
    assert choose([r for r in rows if r["recipe"] in "bd"]) is None


def test_choose_breaks_a_latency_tie_by_agreement_with_float():
    rows = [
        {"recipe": "lucky", "within_budget": True, "p50_ms": 2.00, "agreement": 0.94},
        {"recipe": "faithful", "within_budget": True, "p50_ms": 2.08, "agreement": 0.99},
        {"recipe": "slow", "within_budget": True, "p50_ms": 2.50, "agreement": 1.00},
    ]
    assert choose(rows, tie=0.05)["recipe"] == "faithful"  # 4% slower: within the tie
    assert choose(rows, tie=0.0)["recipe"] == "lucky"


def test_only_the_int8_formats_take_the_budget():
    takers = {f.name for f in FORMATS.values() if "max_accuracy_drop" in f.options}
    searched = {name for name, c in CONVERTERS.items() if c.search}
    assert takers == searched == {"tflite-int8", "onnx-int8"}
    with pytest.raises(UsageError, match="--max-accuracy-drop does not apply to tflite"):
        check_options(["tflite"], {"max_accuracy_drop": 1.0})


# -- the search on a tiny run --


@pytest.mark.parametrize("model", SEARCHED)
def test_search_keeps_the_fastest_recipe_within_budget(model, vit_searched, tiny_runs, tmp_path):
    if model == "vit-lsa":
        searched = vit_searched
    else:
        run = copy_tiny_run(tiny_runs.trained(model), tmp_path / "run")
        searched = budgeted_search(run, tmp_path / "export")
    out, manifest, formats = searched.out, searched.manifest, SEARCHED[model]
    assert json.loads((out / MANIFEST_FILE).read_text()) == manifest
    tables = {"tflite-int8": TFLITE_RECIPES, "onnx-int8": ONNX_RECIPES}
    assert set(manifest["artifacts"]) == set(formats)
    for fmt in formats:
        table = tables[fmt]
        entry = manifest["artifacts"][fmt]
        found = entry["quantization_search"]
        assert entry["options"]["max_accuracy_drop"] == 50.0
        assert [c["recipe"] for c in found["candidates"]] == list(table)
        assert found["split"] == "validation" and found["images"] > 0
        assert found["latency"]["batch"] == 1 and found["latency"]["statistic"] == "p50_ms"
        judged = [c for c in found["candidates"] if "drop_points" in c]
        assert judged, found["candidates"]
        for c in judged:
            assert c["drop_points"] == pytest.approx(100 * (found["float_top1"] - c["top1"]))
            assert c["within_budget"] == (c["drop_points"] <= 50.0)
        winner = next(c for c in judged if c["recipe"] == found["recipe"])
        assert winner["within_budget"] and found["drop_points"] == winner["drop_points"]
        assert winner == choose(judged) and found["agreement"] == winner["agreement"]
        assert 0.0 <= winner["agreement"] <= 1.0
        assert found["fp32_p50_ms"] > 0
        assert found["speedup_vs_fp32"] == pytest.approx(
            found["fp32_p50_ms"] / winner["p50_ms"], abs=1e-3
        )
        fastest = min(c["p50_ms"] for c in judged if c["within_budget"])
        assert winner["p50_ms"] <= fastest * (1 + int8_search.LATENCY_TIE)
        assert found["settings"] == winner["settings"]
        assert entry["recipe"] == {"name": winner["recipe"], "settings": winner["settings"]}
        # the published file is the winning candidate, plus the app metadata of a .tflite
        data = (out / entry["file"]).read_bytes()
        assert entry["sha256"] == sha256(out / entry["file"])
        if fmt.startswith("tflite"):
            assert read_metadata(data) is not None
            assert 0 < entry["size_bytes"] - winner["size_bytes"] < 16_384
        else:
            assert entry["size_bytes"] == winner["size_bytes"]


def first_recipes(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Each search table cut to its first `count` recipes: what the tests of a search's outcome
    (the error, the printed line) need; the whole tables are searched above."""
    for table in (TFLITE_RECIPES, ONNX_RECIPES):
        for name in list(table)[count:]:
            monkeypatch.delitem(table, name)


@pytest.fixture
def two_recipes(monkeypatch) -> None:
    first_recipes(monkeypatch, 2)


@pytest.fixture
def impossible(monkeypatch) -> None:
    """One recipe per table, its float model scored at 200%: the candidate drops 100 points
    or more."""
    first_recipes(monkeypatch, 1)
    monkeypatch.setattr(int8_search, "float_top1", lambda src: 2.0)


def test_impossible_budget_fails_in_one_line_and_writes_nothing(vit_run, tmp_path, impossible):
    out = tmp_path / "export"
    with pytest.raises(UsageError) as error:
        export_run(
            vit_run, "tflite-int8", calib_samples=CALIB_SAMPLES, max_accuracy_drop=1.0, out=out
        )
    message = str(error.value)
    assert "\n" not in message
    assert "--max-accuracy-drop 1 points" in message and "smallest drop" in message
    assert not out.exists()


def test_command_exits_2_for_an_impossible_budget(vit_run, tmp_path, capsys, impossible):
    from toolkit.cli.main import main

    out = tmp_path / "export"
    argv = ["export", str(vit_run), "--format", "onnx-int8", "--max-accuracy-drop", "1"]
    code = main([*argv, "--calib-samples", str(CALIB_SAMPLES), "--out", str(out)])
    lines = capsys.readouterr().err.splitlines()
    err = "\n".join(x for x in lines if not x.startswith(PROGRESS))
    assert code == 2 and len(err.splitlines()) == 1 and "onnx-int8" in err
    assert lines[-1] == err  # progress lines come first, the error last
    assert "Traceback" not in err and not out.exists()


@pytest.mark.parametrize(
    "value, words", [("nan", "finite"), ("inf", "finite"), ("-1", "0 or more")]
)
def test_a_non_finite_or_negative_budget_is_a_usage_error(vit_run, tmp_path, value, words):
    with pytest.raises(UsageError, match=words):
        export_run(vit_run, "tflite-int8", max_accuracy_drop=float(value), out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_command_prints_the_winning_recipe(vit_run, tmp_path, capsys, two_recipes):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [str(vit_run), "--format", "tflite-int8", "--max-accuracy-drop", "100"]
        + ["--calib-samples", str(CALIB_SAMPLES), "--out", str(tmp_path / "e")]
    )
    assert run_command(args) == 0
    printed = capsys.readouterr().out
    assert "tflite-int8: recipe " in printed and "2 recipes tried" in printed


@pytest.mark.parametrize("count", [500, 509, 32, 64, 7])
def test_calibration_batches_all_have_one_size(count):
    images = np.zeros((count, 2, 2, 3), np.float32)
    reader = ImageReader(images)
    sizes = []
    while (batch := reader.get_next()) is not None:
        sizes.append(len(batch["image"]))
    assert sum(sizes) == count and len(set(sizes)) == 1 and sizes[0] <= 32
