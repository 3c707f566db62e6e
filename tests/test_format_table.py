"""One row per export format: its facts live in toolkit/formats.py (verify, bench and predict
read them there), its converter too, by the name of a constant of toolkit/export/converters.py;
no other table is keyed by format name."""

import re
from dataclasses import replace
from pathlib import Path

import pytest

from toolkit.bench import roofline
from toolkit.common.errors import UsageError
from toolkit.export.converters import CONVERTERS
from toolkit.export.validate import INSPECTORS
from toolkit.formats import (
    FORMATS,
    OPTION_FLAGS,
    PRECISIONS,
    ROOFLINE_PRECISIONS,
    SEARCH_OPTIONS,
)
from toolkit.runfiles import Manifest
from toolkit.runtimes import RUNTIMES
from toolkit.verify.artifacts import artifact_cells
from toolkit.verify.attribution import int8_formats
from toolkit.verify.cells import ERROR, NOT_APPLICABLE
from toolkit.verify.layers.level import no_layer_level
from toolkit.verify.rules import LAYER_RULES, MODEL_RULES, format_rules, rule_for

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", FORMATS)
def test_every_row_holds_every_fact(name):
    f = FORMATS[name]
    assert f.name == name and f.description.strip()
    assert Path(f.filename).suffix in RUNTIMES[f.runtime].suffixes  # the runtime opens the file
    assert Path(f.filename).suffix in INSPECTORS  # export loads and checks files of its kind
    assert f.precision in PRECISIONS
    assert f.rule in MODEL_RULES and f.rule in LAYER_RULES  # toolkit verify judges it
    assert f.roofline in ROOFLINE_PRECISIONS
    assert (f.runtime, f.roofline) in roofline.KERNELS  # toolkit bench has its peak
    assert callable(CONVERTERS[name].convert)  # export writes it
    assert set(f.options) <= set(OPTION_FLAGS)
    assert isinstance(f.int8_attribution, bool)
    assert f.batch is None or (isinstance(f.batch, int) and f.batch >= 1)
    assert f.no_layer_level is None or f.no_layer_level.strip()
    assert f.cpu_note is None or (f.cpu_note.strip() and "\n" not in f.cpu_note)
    if f.int8_attribution:  # the debugger re-quantizes with the TFLite int8 converter
        assert f.precision == "int8" and f.runtime == "litert"
    # --max-accuracy-drop is taken exactly by the formats with a search space, of their runtime
    search = CONVERTERS[name].search
    assert (set(SEARCH_OPTIONS) <= set(f.options)) == (search is not None)
    if search is not None:
        assert search.runtime == f.runtime and search.suffix == Path(f.filename).suffix
        assert search.recipes


def test_every_row_names_a_converter_and_the_converters_derive_from_the_rows():
    from toolkit.export.converters import Converter, converter_named

    for name, f in FORMATS.items():
        assert isinstance(converter_named(f.converter), Converter)
        assert CONVERTERS[name] is converter_named(f.converter)
    assert list(CONVERTERS) == list(FORMATS)
    with pytest.raises(KeyError, match="no converter"):
        converter_named("FLOAT_IO_RECIPE")  # a recipe, not a converter


def test_every_written_file_name_is_unique():
    """Artifacts and their companions (onnx-mobile's required-operators config) never collide:
    export checks, writes and cleans each name as its format's."""
    names = [n for f in FORMATS.values() for n in (f.filename, *f.companions)]
    assert len(names) == len(set(names))


def test_the_layer_level_is_not_applicable_where_the_row_says_why(tmp_path):
    """onnx-mobile's .ort opens in ort-cpu, but its tensors cannot be read: an n/a cell with
    the row's reason, never a capture attempt (an error) or a pass."""
    (fmt,) = [n for n, f in FORMATS.items() if f.no_layer_level]
    path = tmp_path / FORMATS[fmt].filename
    path.write_bytes(b"unused: the level does not apply")
    manifest = Manifest.from_json({"artifacts": {fmt: {"file": path.name}}})

    def measure(target):
        raise AssertionError(f"measured {target.fmt} at the layer level")

    args = ("layers", tmp_path, manifest, [fmt], [FORMATS[fmt].runtime], LAYER_RULES, measure)
    (cell,) = artifact_cells(*args, no_layer_level)
    assert (cell["status"], cell["reason"]) == (NOT_APPLICABLE, FORMATS[fmt].no_layer_level)


def test_verify_bench_and_attribution_read_the_rows(monkeypatch):
    row = replace(FORMATS["tflite-int8"], name="tflite-x", rule="fp16", roofline="fp32")
    monkeypatch.setitem(FORMATS, "tflite-x", replace(row, int8_attribution=False))
    assert rule_for("tflite-x") is MODEL_RULES["fp16"]
    assert format_rules()["tflite-x"] is MODEL_RULES["fp16"]
    assert rule_for("tflite-x", LAYER_RULES) is LAYER_RULES["fp16"]
    assert roofline.precision_of("tflite-x") == "fp32"
    assert "tflite-x" not in int8_formats()
    monkeypatch.setitem(FORMATS, "tflite-x", replace(row, roofline="int8", int8_attribution=True))
    assert roofline.precision_of("tflite-x") == "int8"
    assert "tflite-x" in int8_formats()
    assert roofline.precision_of("keras") == "fp32" and roofline.precision_of("nope") is None


@pytest.mark.parametrize(("level", "rules"), [("model", MODEL_RULES), ("layers", LAYER_RULES)])
def test_a_format_without_a_rule_is_an_error_never_a_pass(tmp_path, level, rules):
    with pytest.raises(UsageError, match="no rule"):
        rule_for("tflite-int4", rules)
    path = tmp_path / "model_int4.tflite"
    path.write_bytes(b"unused: the rule is looked up first")
    manifest = Manifest.from_json({"artifacts": {"tflite-int4": {"file": path.name}}})

    def measure(target):
        raise AssertionError(f"measured {target.fmt} without a rule")

    (cell,) = artifact_cells(level, tmp_path, manifest, ["tflite-int4"], ["litert"], rules, measure)
    assert cell["status"] == ERROR and "no rule" in cell["reason"] and cell["level"] == level


# quoted format names allowed outside the two format tables, and why
ALLOWED = {
    "toolkit/export/onnx.py": "label of the onnx converter's error messages",
    "toolkit/export/onnx_int8.py": "label and scratch folder of the onnx-int8 converter",
    "toolkit/export/onnx_mobile.py": "label and scratch memo of the onnx-mobile converter",
    "toolkit/verify/ops/artifacts.py": "op-level artifacts of `toolkit verify`, a table of its own",
    "toolkit/runtimes/onnxruntime.py": "the onnx package",
    "toolkit/common/versions.py": "the onnx package",
}


def test_no_other_table_is_keyed_by_format_name():
    quoted = re.compile("|".join(rf'"{re.escape(n)}"' for n in FORMATS))
    found = []
    for path in sorted((ROOT / "toolkit").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "toolkit/formats.py" or rel in ALLOWED:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if quoted.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert found == [], "format facts outside toolkit/formats.py:\n" + "\n".join(found)
