"""The browser runtimes in `toolkit bench` (wasm rows at one thread and the page's most, a WebGPU
row said once, top-1 computed in the browser, unavailable rows without Chromium) and in
`toolkit verify` (the model level; the op and layer levels refuse them in one line)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tiny_runs import copy_tiny_run

from toolkit.bench import artifact_accuracy, web
from toolkit.bench.benchmarker import split_hash, top1_key
from toolkit.cli.main import main
from toolkit.runfiles.folder import BENCH_TOP1_FILE, VERIFY_FILE
from toolkit.runfiles.hashes import sha256
from toolkit.runtimes.web import npm
from toolkit.runtimes.web.browser import Chromium
from toolkit.runtimes.web.runtimes import webgpu_unavailable

pytestmark = pytest.mark.slow
QUICK = ["--seconds", "0.05", "--warmup", "1"]


@pytest.fixture
def run(tiny_runs, tmp_path, monkeypatch) -> Path:
    """A copy of the shared tiny shiftvit run, exported to every format."""
    monkeypatch.setenv(npm.CACHE_ENV, str(npm.npm_cache()))  # kept when the cache moves
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the roofline's models
    return copy_tiny_run(tiny_runs.exported("shiftvit"), tmp_path / "run")


def test_web_rows_at_one_and_most_threads_top1_in_the_browser(run, monkeypatch):
    """web-litert on the fp32 .tflite: a wasm row at 1 thread and one at every core, a WebGPU
    row not timed (the browser's reason); top-1 computed in the browser, in the page that timed
    the most-threads row (no page of its own), as a page of its own computes it, not the file's
    Python top-1 from the cache; the library and Chromium versions in bench.md; one browser
    started for the whole bench (rows, top-1 and the WebGPU check: `one_browser`)."""
    path = run / "export" / "model_fp32.tflite"
    key = top1_key(None, split_hash(*artifact_accuracy.test_split(run)), sha256(path))
    cached = {key: {"top1": 0.125, "samples": 30}}  # the file's own
    (run / BENCH_TOP1_FILE).write_text(json.dumps(cached))
    starts = []
    launch = Chromium.__init__
    monkeypatch.setattr(Chromium, "__init__", lambda self: starts.append(1) or launch(self))
    own_pages = []  # top-1s computed in a session of their own
    top1 = artifact_accuracy.top1
    monkeypatch.setattr(
        artifact_accuracy, "top1", lambda *a, **k: own_pages.append(1) or top1(*a, **k)
    )
    assert main(["bench", str(run), "--runtime", "web-litert", "--format", "tflite", *QUICK]) == 0
    assert len(starts) == 1 and own_pages == []
    result = json.loads((run / "bench.json").read_text())
    rows = {(r["backend"], r["threads"]): r for r in result["rows"]}
    assert set(rows) == {("wasm", 1), ("wasm", os.cpu_count()), ("webgpu", None)}
    split = artifact_accuracy.test_split(run)
    browser = top1(path, *split, runtime="web-litert")
    for threads in (1, os.cpu_count()):
        row = rows["wasm", threads]
        assert row["status"] == "ok" and row["runs"] >= 1 and row["p50_ms"] > 0
        assert row["top1"] == browser != 0.125 and row["roofline_fraction"] is None
    cache = json.loads((run / BENCH_TOP1_FILE).read_text())
    assert cache[f"{key}:web-litert"]["top1"] == browser
    gpu = rows["webgpu", None]
    assert gpu["status"] == "unavailable" and "p50_ms" not in gpu and "top1" not in gpu
    assert gpu["reason"] == (webgpu_unavailable() or web.WEBGPU_NOT_TIMED)
    md = (run / "bench.md").read_text()
    assert "- web-litert: @litertjs/core " in md and "Chromium " in md
    assert web.NO_ROOFLINE in md and "| web-litert wasm | 1 | ok | 1 |" in md
    assert "--threads" not in result["command"] and result["protocol"]["web"]["seconds"] == 0.05


def test_without_chromium_web_rows_are_unavailable(run, monkeypatch):
    """CHROMIUM=/nope: every web row (both thread requests, and WebGPU) unavailable with the
    way out; the native rows run; exit 0. (The run's export folder: no roofline to time.)"""
    monkeypatch.setenv("CHROMIUM", "/nope")
    export = run / "export"
    argv = ["bench", str(export), "--runtime", "web-ort,ort-cpu", "--format", "onnx", *QUICK]
    assert main(argv) == 0
    rows = json.loads((export / "bench.json").read_text())["rows"]
    got = [(r["runtime"], r.get("backend"), r["threads"], r["status"]) for r in rows]
    assert got == [
        ("web-ort", "wasm", 1, "unavailable"),
        ("web-ort", "wasm", None, "unavailable"),
        ("ort-cpu", None, os.cpu_count(), "ok"),
        ("web-ort", "webgpu", None, "unavailable"),
    ]
    for row in rows[:2] + rows[3:]:
        assert "/nope" in row["reason"] and "apt-get install chromium" in row["reason"]


def test_threads_option_gives_one_web_row(run):
    """--threads 1: one wasm row per file and batch, at that count; its top-1 computed in a page
    of its own (no row asks for the page's default threads)."""
    argv = ["bench", str(run), "--runtime", "web-ort", "--format", "onnx", "--threads", "1"]
    assert main([*argv, *QUICK]) == 0
    rows = json.loads((run / "bench.json").read_text())["rows"]
    assert [(r["backend"], r["threads"], r["status"]) for r in rows][:1] == [("wasm", 1, "ok")]
    assert 0 <= rows[0]["top1"] <= 1
    assert [r["backend"] for r in rows] == ["wasm", "webgpu"]


def test_verify_web_litert_passes_at_the_model_level(run, capsys):
    """`toolkit verify RUN --runtime web-litert`: the op level is not run (said why), every
    .tflite file passes against Keras in the browser."""
    assert main(["verify", str(run), "--runtime", "web-litert"]) == 0
    out = capsys.readouterr().out
    assert "op level: not run: runtime web-litert is verified at the model level only" in out
    report = json.loads((run / VERIFY_FILE).read_text())
    assert "ops" not in report and report["passed"]
    cells = report["models"]["cells"]
    formats = json.loads((run / "export/model.json").read_text())["artifacts"]
    assert {c["format"] for c in cells} == {f for f in formats if f.startswith("tflite")}
    for c in cells:
        assert c["runtime"] == "web-litert" and c["status"] == "pass", c.get("reason")
        assert "Chromium" in c["providers"][0]


@pytest.mark.parametrize(
    "argv",
    [["--ops-only", "--runtime", "web-litert"], ["--layers", "--runtime", "web-ort"]],
)
def test_verify_levels_without_the_web_runtimes_refuse_them(run, capsys, argv):
    """The op and layer levels stay with the native runtimes: one line, exit 2."""
    assert main(["verify", str(run), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is verified at the model level only" in err[0]
    assert "--models-only" in err[0]
