"""`toolkit verify`: op and model parity on tiny runs, wrong ops caught, report, exit codes."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tiny_runs import copy_tiny_run
from wrong_ops import CropPadShift, UnmaskedLSA

import toolkit.verify.ops.level as oplevel
from toolkit.cli.main import main
from toolkit.common.argtypes import OneLineParser
from toolkit.runfiles.folder import VERIFY_FILE
from toolkit.runtimes import DEFAULT_VERIFIED
from toolkit.runtimes import VERIFIED_RUNTIMES as RUNTIMES  # what verify checks
from toolkit.verify import OP_CASES, Tolerances, verify_ops
from toolkit.verify.cells import FAIL, NOT_APPLICABLE, PASS, UNAVAILABLE
from toolkit.verify.command import add_arguments
from toolkit.verify.error_metrics import compare
from toolkit.verify.levels import runtimes_at
from toolkit.verify.ops.artifacts import PRECISIONS

MODELS = ("shiftvit", "vit-lsa")
CPU_RUNTIMES = ["keras", "litert", "ort-cpu"]
SHIFT_SHAPE = {"shift": [{"h": 5, "w": 7, "c": 26, "num_div": 12, "shift_pixel": 1}]}
STATUSES = {PASS, FAIL, UNAVAILABLE, NOT_APPLICABLE, "error"}
# The op shapes the `verified` fixture's `toolkit verify` runs as its `full` set: per op, the
# first of the seed presets' shapes and the `quick` odd ones (10 of the 22; the tiny presets'
# are the tiny runs' own, checked whole at the model level). Each full shape takes ~1-7 CPU-s.
VERIFIED_SHAPES = {
    name: (case.shapes["full"][0], *case.shapes["quick"]) for name, case in OP_CASES.items()
}
pytestmark = pytest.mark.filterwarnings("ignore:Statistics for quantized inputs:UserWarning")


# -- running the command the way the CLI does --


def verify_main(argv: list[str]) -> int:
    """`toolkit verify ARGV` through the CLI entry point."""
    return main(["verify", *argv])


# -- fixtures: one real run folder per tiny model, exported to every format --


@pytest.fixture(scope="module")
def runs(tiny_runs, tmp_path_factory) -> dict[str, Path]:
    """Copies of the shared tiny runs (1 epoch on synthetic shapes, exported with `--format
    all`), which verify writes its report into."""
    root = tmp_path_factory.mktemp("verify")
    return {m: copy_tiny_run(tiny_runs.exported(m), root / m) for m in MODELS}


@pytest.fixture(scope="module")
def verified(runs) -> dict[str, tuple[int, dict]]:
    """`toolkit verify` on each run: shiftvit at both levels as a user runs it (the `full` op
    shapes, on every runtime present), its `full` set cut to VERIFIED_SHAPES for the time;
    vit-lsa models only (the op level does not depend on the run); exit code and verify.json."""
    argv = {"shiftvit": [], "vit-lsa": ["--models-only"]}
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        for name, shapes in VERIFIED_SHAPES.items():
            case = OP_CASES[name]
            mp.setitem(OP_CASES, name, replace(case, shapes={**case.shapes, "full": shapes}))
        for model, run_dir in runs.items():
            code = verify_main([str(run_dir), *argv[model]])
            out[model] = (code, json.loads((run_dir / VERIFY_FILE).read_text()))
    return out


# -- acceptance --


@pytest.mark.parametrize("model", MODELS)
def test_verify_passes_on_tiny_runs(verified, model):
    code, report = verified[model]
    cells = [c for part in ("ops", "models") for c in report.get(part, {}).get("cells", [])]
    failures = [c for c in cells if c["status"] in (FAIL, "error")]
    assert code == 0, report["failures"]
    assert report["passed"] and not failures
    assert any(c["status"] == PASS for c in cells)


def test_op_report_has_a_cell_for_every_op_shape_runtime_precision(verified):
    _, report = verified["shiftvit"]
    ops = report["ops"]
    assert report["options"]["shapes"] == ops["shapes"] == "full"
    index = {(c["op"], c["shape"], c["runtime"], c["precision"]): c for c in ops["cells"]}
    assert len(index) == len(ops["cells"])
    assert {(c["op"], c["shape"]) for c in ops["cells"]} == {
        (name, OP_CASES[name].label(p)) for name, shapes in VERIFIED_SHAPES.items() for p in shapes
    }
    for name, shapes in VERIFIED_SHAPES.items():
        case = OP_CASES[name]
        for params in shapes:
            for runtime in runtimes_at("ops"):  # the native ones: the web ones run models alone
                for precision in PRECISIONS:
                    c = index[(name, case.label(params), runtime, precision)]
                    assert c["status"] in STATUSES
                    if c["status"] in (PASS, FAIL):
                        m = c["metrics"]
                        for key in ("max_abs", "mean_abs", "max_rel", "cosine", "min_atol"):
                            assert m[key] is not None and math.isfinite(m[key]), (key, c)
                        assert c["tolerance"]["atol"] is not None
                        if precision == "int8":
                            assert m["output_scale"] > 0 and m["min_steps"] >= 0
    fp32_exact = [
        c
        for c in ops["cells"]
        if c["op"] in ("shift", "shifted-patches")
        and c["precision"] == "fp32"
        and c["status"] == PASS
    ]
    assert fp32_exact and all(c["metrics"]["max_abs"] == 0 for c in fp32_exact)
    assert "steps" in report["tolerances"]["rationale"]


def test_default_op_shapes_are_the_full_set(runs, tmp_path, monkeypatch):
    """`toolkit verify RUN` runs every op at every `full` shape (the `verified` fixture, above,
    runs a cut of them): walked here without exporting, each shape's cells left out."""
    visited = []
    monkeypatch.setattr(oplevel, "_verify_shape", lambda *a: visited.append(a[:2]) or [])
    out = tmp_path / "report.json"
    assert verify_main([str(runs["shiftvit"]), "--ops-only", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["ops"]["shapes"] == "full"
    assert visited == [(c, p) for c in OP_CASES.values() for p in c.shapes["full"]]
    for name, case in OP_CASES.items():  # the fixture's cut: a seed shape and the quick ones
        seed, *quick = VERIFIED_SHAPES[name]
        assert seed in case.shapes["full"] and seed not in case.shapes["quick"]
        assert all(p in case.shapes["full"] for p in quick)


def test_model_report_covers_every_artifact_and_attributes_int8(verified, runs):
    for model, run_dir in runs.items():
        _, report = verified[model]
        manifest = json.loads((run_dir / "export" / "model.json").read_text())
        got = {(c["format"], c["runtime"]) for c in report["models"]["cells"]}
        want = {
            (fmt, r)
            for fmt, entry in manifest["artifacts"].items()
            for r, runtime in RUNTIMES.items()
            if Path(entry["file"]).suffix in runtime.suffixes and r in DEFAULT_VERIFIED
        }
        assert got == want  # the browser's only when asked for (tests/test_web_bench_verify.py)
        for c in report["models"]["cells"]:
            if c["status"] in (PASS, FAIL):
                assert 0.0 <= c["metrics"]["top1_agreement"] <= 1.0
                assert c["metrics"]["cosine"] is not None
        layers = report["int8_attribution"]["top"]
        assert 0 < len(layers) <= 10
        ranked = [layer["rmse/scale"] for layer in layers]
        assert ranked == sorted(ranked, reverse=True)


def test_ort_cuda_is_never_a_cpu_result(verified):
    _, report = verified["shiftvit"]
    reason = RUNTIMES["ort-cuda"].unavailable()
    cells = [c for part in ("ops", "models") for c in report[part]["cells"]]
    cuda = [c for c in cells if c["runtime"] == "ort-cuda" and c["status"] != NOT_APPLICABLE]
    assert cuda
    for c in cuda:
        if reason is not None or c["status"] == UNAVAILABLE:
            assert c["status"] == UNAVAILABLE and c["reason"], c
        else:
            assert "CUDAExecutionProvider" in c["providers"], c


# -- wrong ops must fail, naming the op and the runtime --


def test_wrong_shift_fails_naming_op_and_runtime():
    report = verify_ops(SHIFT_SHAPE, ops=["shift"], overrides={"shift": CropPadShift})
    failed = {(c["runtime"], c["precision"]) for c in report["cells"] if c["status"] == FAIL}
    assert {(r, "fp32") for r in CPU_RUNTIMES} <= failed
    assert not report["summary"]["passed"]
    for runtime in CPU_RUNTIMES:
        assert any(
            line.startswith("shift [") and f"on {runtime} (fp32): fail" in line
            for line in report["summary"]["failures"]
        ), runtime


def test_wrong_lsa_fails_naming_op_and_runtime():
    report = verify_ops("quick", ops=["lsa"], overrides={"lsa": UnmaskedLSA})
    failed = {(c["runtime"], c["precision"]) for c in report["cells"] if c["status"] == FAIL}
    assert {(r, "fp32") for r in CPU_RUNTIMES} <= failed
    for runtime in CPU_RUNTIMES:
        assert any(
            line.startswith("lsa [") and f"on {runtime} (fp32): fail" in line
            for line in report["summary"]["failures"]
        ), runtime


def test_correct_shift_passes_bit_exact():
    report = verify_ops(SHIFT_SHAPE, ops=["shift"], runtimes=CPU_RUNTIMES)
    assert report["summary"]["passed"], report["summary"]["failures"]
    fp32 = [c for c in report["cells"] if c["precision"] == "fp32"]
    assert len(fp32) == 3 and all(c["metrics"]["max_abs"] == 0 for c in fp32)


def test_op_scratch_is_named_for_its_process_and_dead_ones_are_removed(tmp_path, monkeypatch):
    """A `kill -9` during verify left its ~1 MB scratch folder in the temp folder for good: the
    folder names its pid, and the next verify removes it when that process is gone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # its pid is now free: the owner of the dead folder
    dead = tmp_path / f"toolkit-verify-{proc.pid}-abcd1234"
    live = tmp_path / f"toolkit-verify-{os.getpid()}-abcd1234"  # a concurrent verify's
    (dead / "shift-0").mkdir(parents=True)
    live.mkdir()
    folders = []
    real = oplevel._verify_shape
    monkeypatch.setattr(oplevel, "_verify_shape", lambda *a: folders.append(a[-1]) or real(*a))
    verify_ops(SHIFT_SHAPE, ops=["shift"], runtimes=["ort-cpu"])
    (folder,) = folders
    assert folder.parent.parent == tmp_path
    assert folder.parent.name.startswith(f"toolkit-verify-{os.getpid()}-")
    assert not dead.exists() and live.is_dir() and not folder.parent.exists()


# -- exit codes --


def test_tolerance_exceeded_exits_1(runs, tmp_path, capsys):
    out = tmp_path / "report.json"
    argv = [
        str(runs["shiftvit"]),
        "--ops-only",
        "--ops",
        "spt",
        "--shapes",
        "quick",
        "--runtime",
        "litert",
        "--atol-fp32",
        "1e-12",
        "--json",
        str(out),
    ]
    assert verify_main(argv) == 1
    report = json.loads(out.read_text())
    assert not report["passed"]
    assert any(
        line.startswith("spt [") and "litert (fp32): fail" in line for line in report["failures"]
    )
    assert "verify: FAILED" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{missing}"], "does not exist"),
        (["{run}", "--runtime", "ort-gpu"], "did you mean 'ort-cpu'"),
        (["{run}", "--runtimes", "litert,ort-gpu"], "unknown runtime 'ort-gpu'"),  # old spelling
        (["{run}", "--ops", "lsa,shfit", "--ops-only"], "did you mean 'shift'"),
        (["{bare}"], "toolkit export"),
        (["{run}", "--samples", "0"], "--samples"),
        (["{run}", "--int8-steps", "0"], "--int8-steps"),
        (["{run}", "--ops-only", "--models-only"], "not allowed with"),
        (["{run}", "--json", "{missing}/r.json"], "does not exist"),
    ],
)
def test_bad_input_exits_2(runs, tmp_path, capsys, argv, message):
    bare = tmp_path / "bare"  # a run folder that was never exported
    bare.mkdir()
    for name in ("config.json", "model.keras", "labels.txt"):
        (bare / name).write_bytes((runs["shiftvit"] / name).read_bytes())
    paths = {"run": runs["shiftvit"], "bare": bare, "missing": tmp_path / "nope"}
    argv = [a.format(**paths) for a in argv]
    assert verify_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_old_option_spellings_are_aliases():
    """--runtimes and --formats (before the canonical --runtime and --format) still parse."""
    parser = OneLineParser(prog="toolkit verify")
    add_arguments(parser)
    old = parser.parse_args(["RUN", "--runtimes", "litert,ort-cpu", "--formats", "onnx"])
    new = parser.parse_args(["RUN", "--runtime", "litert,ort-cpu", "--format", "onnx"])
    assert vars(old) == vars(new)
    assert (new.runtime, new.format, new.ops) == ("litert,ort-cpu", "onnx", "all")


# -- metrics --


def test_compare_metrics():
    e = np.array([[0.0, 1.0, -2.0, 4.0]])
    exact = compare(e.astype(np.float32), e)
    assert exact["max_abs"] == 0 and exact["cosine"] == pytest.approx(1.0)
    off = compare(e + np.array([[1e-3, 0, 0, -2e-3]]), e)
    assert off["max_abs"] == pytest.approx(2e-3) and off["min_atol"] == off["max_abs"]
    assert off["mean_abs"] == pytest.approx(7.5e-4)
    assert off["max_rel"] == pytest.approx(1e-3 / (1e-3 * 4))  # zero reference: floored
    bad = compare(np.array([[np.nan, 1.0, -2.0, 4.0]]), e)
    assert not bad["finite"] and bad["max_abs"] is None
    json.dumps(bad, allow_nan=False)
    assert Tolerances().to_dict()["int8_steps"] == 16
