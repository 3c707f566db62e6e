"""`toolkit bench`: the stats, the worker (no TensorFlow for .onnx/.tflite), every runtime of the
registry, the end-to-end outputs, failed and unavailable rows, an export folder benched without
TensorFlow, Keras or JAX, the interleaved mode, and the exit-2 paths."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from blockers import blocker_code
from tiny_runs import BENCH_FORMATS as FORMATS
from tiny_runs import DATA, copy_tiny_run

from toolkit.bench import artifact_accuracy, benchmarker, interleaved, roofline
from toolkit.bench.bench_tables import roofline_lines, terminal_table
from toolkit.bench.benchmarker import split_hash, top1_key
from toolkit.bench.machine import last_level_cache_bytes
from toolkit.cli.main import main
from toolkit.models import LayerCost, count_macs
from toolkit.runfiles.folder import (
    BENCH_FILES,
    BENCH_INTERLEAVED_FILES,
    BENCH_TOP1_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
)
from toolkit.runfiles.hashes import sha256
from toolkit.runtimes import RUNTIMES, open_artifact
from toolkit.runtimes.timing import Protocol, summarize, time_calls
from toolkit.runtimes.web import npm
from toolkit.runtimes.worker import measure, run_worker, worker_command, worker_env

SHORT = ["--runs", "3", "--warmup", "1"]

ROOT = Path(__file__).resolve().parent.parent
CUDA_HERE = RUNTIMES["ort-cuda"].unavailable() is None


@pytest.fixture(scope="module")
def run_dir(tiny_runs, tmp_path_factory) -> Path:
    """A copy of the shared tiny shiftvit run (1 epoch on synthetic shapes) with onnx,
    tflite and tflite-int8 exported (FORMATS)."""
    return copy_tiny_run(
        tiny_runs.bench_ready("shiftvit"), tmp_path_factory.mktemp("bench") / "run"
    )


def roofline_in_tmp(mp: pytest.MonkeyPatch, tmp_path_factory) -> None:
    """Matmul models for the roofline go to a per-session cache, not ~/.cache (the web
    runtimes' npm packages stay where `make browser` put them: no npm install per session)."""
    mp.setenv(npm.CACHE_ENV, str(npm.npm_cache()))
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(autouse=True)
def roofline_cache(tmp_path_factory, monkeypatch):
    roofline_in_tmp(monkeypatch, tmp_path_factory)


# -- the protocol and its stats --


def test_stats_match_numpy():
    rng = np.random.default_rng(0)
    times = rng.integers(1_000_000, 9_000_000, 101)  # ns
    ms = times / 1e6
    s = summarize(times, batch=4)
    for got, q in ((s.p50_ms, 50), (s.p90_ms, 90), (s.p99_ms, 99)):
        assert got == pytest.approx(np.percentile(ms, q))
    assert s.mean_ms == pytest.approx(ms.mean())
    assert s.std_ms == pytest.approx(ms.std())
    assert (s.min_ms, s.max_ms, s.runs) == (pytest.approx(ms.min()), pytest.approx(ms.max()), 101)
    assert s.images_per_s == pytest.approx(4 * 1000 / ms.mean())
    rounds = [np.median(part) for part in np.array_split(ms, 5)]
    assert s.round_p50_ms == pytest.approx(rounds)
    assert s.spread == pytest.approx((max(rounds) - min(rounds)) / np.median(rounds))


def test_spread_of_a_drifting_series():
    """Five slices at 1, 1, 1, 1, 2 ms: the p50 of slices spans 1 ms around a 1 ms median."""
    times = np.repeat([1e6, 1e6, 1e6, 1e6, 2e6], 4)
    assert summarize(times, 1).spread == pytest.approx(1.0)
    assert summarize(np.full(10, 3e6), 1).spread == 0.0


def test_protocol_counts_warmup_and_runs():
    calls = []
    times = time_calls(lambda: calls.append(1), Protocol(warmup=3, runs=7, seconds=None))
    assert len(calls) == 10 and len(times) == 7 and times.dtype == np.int64


def test_protocol_stops_on_the_time_budget():
    times = time_calls(lambda: sum(range(1000)), Protocol(warmup=0, runs=None, seconds=0.02))
    assert len(times) >= 1 and times.sum() >= 0.02e9
    assert len(time_calls(lambda: None, Protocol(0, 5, 60.0))) == 5  # runs first


def test_protocol_needs_a_budget():
    with pytest.raises(ValueError):
        Protocol(warmup=1, runs=None, seconds=None)


# -- the worker --


def _artifact_for(run_dir: Path, runtime: str) -> Path:
    candidates = [run_dir / "model.keras", *sorted((run_dir / "export").iterdir())]
    return next(p for p in candidates if p.suffix in RUNTIMES[runtime].suffixes)


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_every_runtime_of_the_registry(run_dir, runtime):
    """ok with figures where the runtime can run here, else unavailable with its reason."""
    row = measure(_artifact_for(run_dir, runtime), runtime, 2, Protocol(1, 3, None), 1)
    reason = RUNTIMES[runtime].unavailable()
    if reason is not None:
        assert (row["status"], row["reason"]) == ("unavailable", reason)
        return
    assert row["status"] == "ok", row["reason"]
    assert row["runs"] == 3 and row["batch"] == 2
    assert 0 < row["min_ms"] <= row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
    assert row["load_ms"] > 0 and row["first_ms"] > 0
    assert row["peak_rss_mb"] >= row["rss_before_load_mb"] > 0
    assert row["providers"]


def test_failed_artifact_is_a_row_not_a_crash(tmp_path):
    bad = tmp_path / "model.tflite"
    bad.write_bytes(b"TFL3" + b"\x00" * 64)
    row = measure(bad, "litert", 1, Protocol(1, 3, None), 1)
    assert row["status"] == "failed" and "could not be loaded" in row["reason"]


def _worker_script(artifacts: list[Path], poison: bool) -> str:
    """Python that measures `artifacts` in the worker and prints which TF modules got loaded."""
    lines = ["import json, sys"]
    if poison:  # as on a GPU box with onnxruntime-gpu and numpy, and no TensorFlow or Keras
        lines.append("sys.modules.update(tensorflow=None, keras=None)")
    lines += [
        "from toolkit.runtimes.timing import Protocol",
        "from toolkit.runtimes.worker import measure",
        "statuses = []",
        *(
            f"statuses.append(measure({str(a)!r}, {r!r}, 1, Protocol(1, 2, None), 1)['status'])"
            for a, r in artifacts
        ),
        "tf = [m for m, v in sys.modules.items() if v is not None and m.split('.')[0] in "
        "('tensorflow', 'keras', 'tf_keras')]",
        "print(json.dumps({'statuses': statuses, 'tf': tf}))",
    ]
    return "\n".join(lines)


@pytest.mark.parametrize("poison", [False, True], ids=["tf-installed", "no-tf"])
def test_worker_never_imports_tensorflow_for_onnx_and_tflite(run_dir, poison):
    """In the environment `run_worker` gives a worker of a non-Keras runtime."""
    export = run_dir / "export"
    artifacts = [(export / "model.onnx", "ort-cpu"), (export / "model_fp32.tflite", "litert")]
    done = subprocess.run(
        [sys.executable, "-c", _worker_script(artifacts, poison)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        env=worker_env("ort-cpu"),
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"statuses": ["ok", "ok"], "tf": []}


def test_worker_started_by_hand_measures_without_tensorflow(tmp_path):
    """`python -m toolkit.runtimes.worker` typed by hand imports no TensorFlow (`import toolkit`
    is light), so its memory figure matches the one `run_worker` gets."""
    from onnx import TensorProto, helper

    spec = helper.make_tensor_value_info("images", TensorProto.FLOAT, [None, 8, 8, 3])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, 8, 8, 3])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["images"], ["logits"])], "g", [spec], [out]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "relu.onnx"
    path.write_bytes(model.SerializeToString())
    argv = worker_command(path, "ort-cpu", 1, Protocol(1, 2, None), 1)
    env = worker_env("keras")
    by_hand = json.loads(subprocess.run(argv, capture_output=True, env=env, check=True).stdout)
    assert by_hand["status"] == "ok", by_hand["reason"]
    row = run_worker(path, "ort-cpu", 1, Protocol(1, 2, None), 1)
    assert row["status"] == "ok", row["reason"]
    assert by_hand["rss_before_load_mb"] < 1.5 * row["rss_before_load_mb"]


def test_io_binding_gives_the_same_logits_as_run(run_dir):
    """The bound run ort-cuda times, checked on the CPU device where there is no GPU."""
    session = open_artifact(run_dir / "export" / "model.onnx", "ort-cpu")
    images = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3)).astype(np.float32)
    bound = session.bind(images)  # into a preallocated output, as CUDA graphs need
    bound.run()
    np.testing.assert_allclose(bound.logits(), session.run(images), rtol=1e-5, atol=1e-5)
    assert bound.cuda_graph.startswith("off") and session.settings["cuda_graph"] == bound.cuda_graph


def test_roofline_kernels_compute_a_matmul(tmp_path):
    """The ORT kernels are real matmuls: fp32 against numpy, int8 against integer numpy."""
    import onnx
    from onnx import numpy_helper

    for precision in ("fp32", "int8"):
        path = roofline.kernel_file(roofline.KERNELS["ort-cpu", precision], tmp_path)
        w = numpy_helper.to_array(onnx.load(str(path)).graph.initializer[0])
        session = open_artifact(path, "ort-cpu")
        a = np.random.default_rng(1).integers(0, 256, (roofline.M, roofline.K))
        got = session.run(a.astype(np.float32))
        want = a.astype(np.float64) @ w.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_stream_kernel_reads_the_models_weight_bytes_and_computes_a_gemv(tmp_path):
    """The memory roof's matmul: batch 1, weights of (at least) the model's bytes at the
    precision of the row it bounds, in that precision's kernel."""
    kernel = roofline.stream_kernel("ort-cpu", "fp32", 2**18 - 5)  # rounded up to whole columns
    assert kernel.shape == (1, roofline.STREAM_K, 16) and kernel.weight_bytes == 2**18
    base = roofline.stream_kernel("ort-cpu", "fp32", 1)  # one column: the fixed cost of a call
    assert base.weight_bytes == 4 * roofline.STREAM_K
    got = roofline.bandwidth_gbs(kernel, 2.0, base, 0.5)  # 240 KiB more in 1.5 ms more
    assert got == pytest.approx((2**18 - 2**14) / 1.5e6)
    assert roofline.bandwidth_gbs(kernel, 0.5, base, 0.5) is None  # reads cost nothing
    big = roofline.stream_kernel("litert", "fp32", roofline.model_weight_bytes(LAYERS, "fp32"))
    assert big.shape == (1, roofline.STREAM_K, 2442) and big.filename.endswith(".tflite")
    session = open_artifact(roofline.kernel_file(kernel, tmp_path), "ort-cpu")
    a = np.random.default_rng(1).standard_normal((1, roofline.STREAM_K)).astype(np.float32)
    assert session.run(a).shape == (1, 16)
    int8 = roofline.stream_kernel("ort-cpu", "int8", 2**18 - 5)  # one byte a weight
    assert int8.shape == (1, roofline.STREAM_K, 64) and int8.weight_bytes == 2**18
    assert int8.filename == roofline.KERNELS["ort-cpu", "int8"].filename
    session = open_artifact(roofline.kernel_file(int8, tmp_path), "ort-cpu")
    a = np.random.default_rng(1).integers(0, 256, (1, roofline.STREAM_K)).astype(np.uint8)
    assert session.run(a).shape == (1, 64)


def test_last_level_cache_bytes_reads_the_highest_level(tmp_path):
    for index, (level, size) in enumerate([(1, "32K"), (1, "32K"), (2, "1024K"), (3, "32768K")]):
        (folder := tmp_path / f"index{index}").mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "size").write_text(f"{size}\n")
    assert last_level_cache_bytes(tmp_path) == 32 * 2**20
    (tmp_path / "index3" / "size").write_text("lots\n")  # unreadable: the next level down
    assert last_level_cache_bytes(tmp_path) == 2**20
    assert last_level_cache_bytes(tmp_path / "missing") is None


ROW = {"format": "tflite", "runtime": "litert", "batch": 1, "macs_per_image": 10**8, "gmacs": 30.0}
PEAKS = {("litert", "fp32"): 80.0, ("litert", "int8"): 80.0}
# 90 M MACs over 1 M weights, then 10 M MACs over 9 M (a ViT's head): 40 MB of fp32 weights
LAYERS = (LayerCost("body", 9 * 10**7, 10**6), LayerCost("head", 10**7, 9 * 10**6))
READS = {("litert", "fp32"): 20.0, ("litert", "int8"): 80.0}  # GB/s: 10 MB of int8 stay cached


@pytest.mark.parametrize(
    "change, bandwidths, want",
    [
        # body: 90 M / 80 G = 1.125 ms of compute (4 MB: 0.2 ms of reads); head: 36 MB at 20 GB/s
        # = 1.8 ms of reads (0.125 ms of compute); 100 M MACs in 2.925 ms
        ({}, READS, ("memory", 1e8 / 2.925e-3 / 1e9, 1.8 / 2.925)),
        # int8: the head's 9 MB at 80 GB/s = 0.1125 ms, shorter than its 0.125 ms of compute
        ({"format": "tflite-int8"}, READS, ("compute", 80.0, 0.0)),
        # 16 images a read: the head computes 2 ms, longer than its 1.8 ms of reads
        ({"batch": 16, "gmacs": 60.0}, READS, ("compute", 80.0, 0.0)),
        # 4 images: body 4.5 ms of compute, head 1.8 ms of reads (0.5 ms of compute)
        ({"batch": 4, "gmacs": 50.0}, READS, ("compute", 4e8 / 6.3e-3 / 1e9, 1.8 / 6.3)),
        ({}, {}, ("compute", 80.0, 0.0)),  # no bandwidth measured (a GPU): the peak alone
    ],
)
def test_attainable_is_the_per_layer_roofline(change, bandwidths, want):
    row = {**ROW, **change}
    got = roofline.attainable(row, PEAKS, bandwidths, LAYERS)
    bound, gmacs, share = want
    assert got["bound"] == bound and got["attainable_gmacs"] == pytest.approx(gmacs)
    assert got["memory_bound_share"] == pytest.approx(share)
    assert got["attainable_fraction"] == pytest.approx(row["gmacs"] / gmacs)
    per_weight = roofline.WEIGHT_BYTES[roofline.precision_of(row["format"])]
    assert got["weight_bytes"] == 10**7 * per_weight
    assert set(got) == set(roofline.ATTAINABLE_KEYS)


def test_attainable_is_empty_without_a_peak_or_layers():
    assert roofline.attainable(ROW, PEAKS, READS, ()) == {}
    assert roofline.attainable({**ROW, "runtime": "ort-cpu"}, PEAKS, READS, LAYERS) == {}


def test_a_peak_is_the_fastest_of_its_rounds_and_a_row_above_a_roof_is_flagged(
    monkeypatch, tmp_path
):
    """A VM slow during one round spoils that round's figure, not the peak; a row faster than
    a roof says the roofline was timed slow, and bench.md warns."""
    times = iter([4.0, None, 2.0, 3.0])  # fp32 then int8, round 1; again, round 2

    def timed(kernel, cache, threads):
        entry = {"runtime": kernel.runtime, "precision": kernel.precision, "status": "ok"}
        entry["shape"] = list(kernel.shape)
        ms = next(times)
        return {**entry, "min_ms": ms} if ms else {**entry, "status": "failed", "reason": "x"}

    monkeypatch.setattr(benchmarker, "_time_kernel", timed)
    plan = benchmarker.Plan(tmp_path, [], ["ort-cpu"], [1], Protocol(1, 2, None), 1, 10**8, ())
    peaks, entries = benchmarker.measure_peaks(plan, {"ort-cpu"}, tmp_path)
    assert [e["rounds_min_ms"] for e in entries] == [[4.0, 2.0], [None, 3.0]]
    assert peaks["ort-cpu", "fp32"] == pytest.approx(roofline.peak_gmacs(2.0))
    assert peaks["ort-cpu", "int8"] == pytest.approx(roofline.peak_gmacs(3.0))
    rows = [
        {"format": "onnx", "runtime": "ort-cpu", "batch": 1, "roofline_fraction": 1.04},
        {
            "format": "tflite",
            "runtime": "litert",
            "batch": 1,
            "roofline_fraction": 0.9,
            "attainable_fraction": 1.02,
        },
        {"format": "keras", "runtime": "keras", "batch": 1, "roofline_fraction": None},
    ]
    flagged = benchmarker.above_roof(rows)
    assert flagged == [
        "onnx on ort-cpu at batch 1 ran at 104% of its peak",
        "tflite on litert at batch 1 ran at 102% of its roofline",
    ]
    roof = {"peaks": entries, "fastest": [], "above_roof": flagged}
    warnings = [line for line in roofline_lines({"roofline": roof}) if "warning" in line]
    assert len(warnings) == 2 and "onnx on ort-cpu" in warnings[0]


def test_roofline_reads_the_models_bytes_per_runtime_and_precision_that_ran(tmp_path):
    """One stream matmul per (CPU runtime, precision) of the ok rows, over the model's bytes at
    that precision, in that precision's kernel; measured whatever the size of the CPU's caches
    (weights this small fit in any last-level cache)."""
    rows = [
        {**ROW, "format": "onnx", "runtime": "ort-cpu", "status": "ok", "p50_ms": 3.3},
        {**ROW, "format": "onnx-int8", "runtime": "ort-cpu", "status": "ok", "p50_ms": 2.0},
        {"format": "tflite", "runtime": "litert", "batch": 1, "status": "failed"},
    ]
    model = (LayerCost("a", 10**6, 250_000), LayerCost("b", 10**6, 250_000))  # 2 MB of fp32
    plan = benchmarker.Plan(
        tmp_path, [], ["ort-cpu"], [1], Protocol(1, 2, None), 1, 2 * 10**6, model
    )
    roof = benchmarker.measure_roofline(plan, rows, tmp_path)
    assert [p["precision"] for p in roof["peaks"]] == ["fp32", "int8"]
    reads = {read["for"]: read for read in roof["memory"]}
    assert set(reads) == {"fp32", "int8"}
    for precision, read in reads.items():
        per_weight = roofline.WEIGHT_BYTES[precision]
        assert (read["runtime"], read["precision"]) == ("ort-cpu", precision)
        assert read["shape"] == [1, 4096, 123] and read["weight_bytes"] == 123 * 4096 * per_weight
        extra_ms = read["min_ms"] - read["base_ms"]  # over the one-column call's fixed cost
        want = 122 * 4096 * per_weight / (extra_ms * 1e6) if extra_ms > 0 else None
        assert read["gbs"] == pytest.approx(want)
    assert rows[0]["weight_bytes"] == 2_000_000 and rows[1]["weight_bytes"] == 500_000
    assert "attainable_fraction" not in rows[2]
    assert [layer["parameters"] for layer in roof["layers"]] == [250_000, 250_000]


# -- toolkit bench end to end --


@pytest.fixture(scope="module")
def benched(run_dir, tmp_path_factory) -> tuple[int, Path, dict]:
    """`toolkit bench` on a copy of the run, every runtime, batches 1 and 2, three runs each;
    the roofline's matmuls timed once each, three calls (not the fastest of two rounds of up to
    30: a 1 GMAC kernel's worker then takes a second; rounds have a test of their own)."""
    run = copy_tiny_run(run_dir, tmp_path_factory.mktemp("benched") / "run")
    mp = pytest.MonkeyPatch()
    roofline_in_tmp(mp, tmp_path_factory)
    mp.setattr(benchmarker, "ROOFLINE_PROTOCOL", Protocol(warmup=1, runs=3, seconds=None))
    mp.setattr(benchmarker, "PEAK_ROUNDS", 1)
    try:
        code = main(["bench", str(run), "--batch", "1,2", *SHORT])
    finally:
        mp.undo()
    return code, run, json.loads((run / "bench.json").read_text())


def test_bench_writes_json_md_png(benched):
    code, run, result = benched
    assert code == 0
    assert (run / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for key in ("command", "machine", "protocol", "rows", "roofline", "data"):
        assert key in result
    machine = result["machine"]
    assert machine["cores"] >= 1 and machine["cpu"] and len(machine["load_average"]) == 3
    assert isinstance(machine["cpu_flags"], list)
    assert machine["last_level_cache_bytes"] == last_level_cache_bytes()  # the real one, sysfs
    for package in ("python", "numpy", "onnxruntime", "litert", "tensorflow", "matplotlib"):
        assert package in machine["versions"]
    assert result["command"].startswith(f"toolkit bench {run} ")
    md = (run / "bench.md").read_text()
    assert result["command"] in md and "| keras | keras | 1 | ok |" in md
    ort_rows = [r for r in result["rows"] if r["runtime"] == "ort-cpu" and r["status"] == "ok"]
    assert ort_rows and all(r["settings"]["inter_op_num_threads"] == 1 for r in ort_rows)
    assert "- ort-cpu session: graph_optimization_level ORT_ENABLE_ALL" in md
    assert not list(run.glob(".bench*"))  # no temp files left


def test_bench_rows_cover_artifacts_runtimes_and_batches(benched):
    _, run, result = benched
    cells = {(r["format"], r["runtime"], r["batch"]) for r in result["rows"]}
    expected = {("keras", "keras"), ("onnx", "ort-cpu"), ("onnx", "ort-cuda")}
    expected |= {("tflite", "litert"), ("tflite-int8", "litert")}
    expected |= {("tflite", "mediapipe"), ("tflite-int8", "mediapipe")}  # an app's path
    # the browser's web-* rows only when asked for (tests/test_web_bench_verify.py)
    assert cells == {(f, r, b) for f, r in expected for b in (1, 2)}
    macs = json.loads((run / "metrics.json").read_text())["macs_per_image"]
    files = {r["file"]: run / "export" / r["file"] for r in result["rows"]}
    files["model.keras"] = run / "model.keras"
    for row in result["rows"]:
        assert row["size_bytes"] > 0
        assert row["sha256"] == sha256(files[row["file"]])  # the bytes timed (toolkit ship)
        if row["runtime"] == "ort-cuda" and not CUDA_HERE:
            assert row["status"] == "unavailable" and "ort-cuda" in row["reason"]
            assert "p50_ms" not in row
            continue
        assert row["status"] == "ok", row["reason"]
        assert 0 <= row["top1"] <= 1 and row["runs"] == 3
        assert row["gmacs"] == pytest.approx(macs * row["batch"] / (row["p50_ms"] * 1e6))
        if row["runtime"] == "mediapipe":  # LiteRT inside, with the task's pre/postprocessing
            assert row["roofline_fraction"] is None and row["providers"][0].startswith("Media")
        elif row["runtime"] != "keras":
            assert row["roofline_fraction"] > 0 and row["attainable_fraction"] > 0
            assert row["weight_bytes"] > 0 and row["bound"] in ("compute", "memory")
            assert row["attainable_fraction"] >= row["roofline_fraction"]  # a roof <= its peak


def test_bench_roofline_peaks_memory_and_fastest(benched):
    _, run, result = benched
    peaks = {(p["runtime"], p["precision"]): p for p in result["roofline"]["peaks"]}
    for key in (("ort-cpu", "fp32"), ("litert", "fp32"), ("litert", "int8")):
        assert peaks[key]["status"] == "ok" and peaks[key]["peak_gmacs"] > 0
    fastest = {(f["batch"], f["precision"]) for f in result["roofline"]["fastest"]}
    assert fastest == {(1, "fp32"), (1, "int8"), (2, "fp32"), (2, "int8")}
    memory = {(m["runtime"], m["for"]): m for m in result["roofline"]["memory"]}
    assert set(memory) == {("ort-cpu", "fp32"), ("litert", "fp32"), ("litert", "int8")}
    rows = {(r["runtime"], roofline.precision_of(r["format"])): r for r in result["rows"]}
    for key, m in memory.items():  # a tiny model's reads may not time apart from a call
        assert m["status"] == "ok" and (m["gbs"] is None or m["gbs"] > 0)
        assert m["weight_bytes"] >= rows[key]["weight_bytes"] > m["weight_bytes"] - 4 * 4096
    md = (run / "bench.md").read_text()
    assert "- litert memory for int8 weights: " in md and "memory-bound layers)" in md


def test_failed_artifact_keeps_the_table_and_accuracy_is_cached(run_dir, tmp_path, capsys):
    run = copy_tiny_run(run_dir, tmp_path / "run")
    (run / "export" / "model_fp32.tflite").write_bytes(b"not a flatbuffer" * 8)
    onnx = run / "export" / "model.onnx"
    key = top1_key(None, split_hash(*artifact_accuracy.test_split(run)), sha256(onnx))
    (run / BENCH_TOP1_FILE).write_text(json.dumps({key: {"top1": 0.125}}))
    argv = ["bench", str(run), "--runtime", "litert,ort-cpu", "--formats", "tflite,onnx"]
    argv += ["--allow-modified"]  # model.json records the exported file's sha256
    assert main([*argv, *SHORT]) == 0  # --formats: the old spelling of --format, kept
    result = json.loads((run / "bench.json").read_text())
    assert " --format tflite,onnx " in result["command"]  # the canonical spelling
    rows = {r["format"]: r for r in result["rows"]}
    assert rows["tflite"]["status"] == "failed" and rows["tflite"]["reason"]
    assert rows["onnx"]["status"] == "ok" and rows["onnx"]["top1"] == 0.125  # from the cache
    captured = capsys.readouterr()
    assert "failed" in captured.out and "model_fp32.tflite" in captured.out
    warned = [line for line in captured.err.splitlines() if "toolkit: warning:" in line]
    assert len(warned) == 1 and "model_fp32.tflite was changed after export" in warned[0]
    assert "using it as it is (--allow-modified)" in warned[0]


def _flip(path: Path, count: int = 2000) -> None:
    """Invert `count` bytes in the middle of the file: same size, another sha256."""
    data = bytearray(path.read_bytes())
    start = len(data) // 2
    data[start : start + count] = bytes(b ^ 0xFF for b in data[start : start + count])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("mode", [[], ["--interleaved"]], ids=["rows", "interleaved"])
def test_a_file_changed_after_export_is_refused_before_any_timing(run_dir, tmp_path, capsys, mode):
    """2,000 bytes of a .tflite flipped after export were benched `ok` though its sha256 was
    no longer model.json's: now refused in one line naming the ways out, nothing written."""
    run = copy_tiny_run(run_dir, tmp_path / "run")
    _flip(run / "export" / "model_fp32.tflite")
    argv = ["bench", str(run), "--runtime", "litert", "--format", "tflite", *mode]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"toolkit: error: {run / 'export' / 'model_fp32.tflite'} was changed ")
    assert f"export it again (`toolkit export {run} --format tflite`)" in err and "\n" not in err
    assert err.endswith("or pass --allow-modified to use it as it is")
    assert not [p for p in run.iterdir() if p.name.startswith(("bench", ".bench"))]
    ok = ["bench", str(run), "--runtime", "ort-cpu", "--format", "onnx", *SHORT]
    assert main(ok) == 0  # the files not chosen are not checked (nor hashed)


def test_a_truncated_onnx_is_refused_before_any_timing(run_dir, tmp_path, capsys):
    """A truncated model.onnx was a `failed` row and exit 0 where a truncated .tflite was
    refused: refused by its sha256, and where model.json records none (or --allow-modified),
    by its protobuf structure, before anything is timed."""
    device = shutil.copytree(run_dir / "export", tmp_path / "device")
    onnx = device / "model.onnx"
    onnx.write_bytes(onnx.read_bytes()[: onnx.stat().st_size // 2])
    argv = ["bench", str(device), "--runtime", "ort-cpu", "--format", "onnx"]
    assert main(argv) == 2
    assert f"{onnx} was changed after export" in capsys.readouterr().err
    manifest = json.loads((device / MANIFEST_FILE).read_text())
    del manifest["artifacts"]["onnx"]["sha256"]  # as an older model.json, or a hand-made one
    (device / MANIFEST_FILE).write_text(json.dumps(manifest))
    for extra in ([], ["--allow-modified"], ["--interleaved"]):
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith(f"toolkit: error: {onnx} is not a whole ONNX model (truncated: it")
    assert not [p for p in device.iterdir() if p.name.startswith(("bench", ".bench"))]


# -- bad input: one line, exit 2, nothing written --


def _no_export(run_dir: Path, tmp: Path) -> Path:
    run = copy_tiny_run(run_dir, tmp / "no_export")
    shutil.rmtree(run / "export")
    return run


BAD = {  # case -> (extra argv, words the message holds)
    "unknown runtime": (["--runtime", "ort-gpu"], "unknown --runtime 'ort-gpu'"),
    "unknown format": (["--format", "tflite-int4"], "unknown --format 'tflite-int4'"),
    "not exported": (["--format", "onnx-int8"], "has no onnx-int8 file: export it (`toolkit"),
    "batch zero": (["--batch", "0"], "--batch"),
    "batch text": (["--batch", "1,x"], "--batch"),
    "runs zero": (["--runs", "0"], "--runs"),
    "threads zero": (["--threads", "0"], "--threads"),
    "data without test images": (["--data", "shapes:12"], "empty test split"),
    "runtime opens none of the formats": (
        ["--runtime", "ort-cuda", "--format", "tflite,tflite-int8"],
        "nothing to bench: --runtime ort-cuda opens none of the chosen formats",
    ),
    "segments without interleaved": (["--segments", "2"], "--segments applies to --interleaved"),
    "interleaved with runs": (["--interleaved", "--runs", "3"], "drop --runs"),
    "interleaved with data": (["--interleaved", "--data", DATA], "drop --data"),
    "interleaved two batches": (["--interleaved", "--batch", "1,2"], "one batch size"),
    "interleaved calls zero": (["--interleaved", "--calls", "0"], "--calls"),
    "interleaved no cpu file": (
        ["--interleaved", "--runtime", "ort-cuda,keras"],
        "nothing to time side by side",
    ),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_arguments_exit_2(run_dir, tmp_path, capsys, case):
    run = copy_tiny_run(run_dir, tmp_path / "run")
    extra, words = BAD[case]
    assert main(["bench", str(run), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
    assert not [p for p in run.iterdir() if p.name.startswith(("bench", ".bench"))]


FLOAT_OPTIONS = [
    ["bench", "--seconds"],
    ["export", "--format", "tflite-int8", "--max-accuracy-drop"],
    ["verify", "--atol-fp32"],
    ["verify", "--int8-steps"],
]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("argv", FLOAT_OPTIONS, ids=lambda argv: argv[-1])
def test_float_options_refuse_nan_and_inf(tmp_path, capsys, argv, value):
    """nan passes every range check (it compares false both ways): `--seconds nan` never ended."""
    command, *options, option = argv
    assert main([command, str(tmp_path / "run"), *options, f"{option}={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"argument {option}: must be a finite" in err
    assert list(tmp_path.iterdir()) == []


def test_terminal_table_of_no_rows_is_the_header():
    table = terminal_table({"rows": [], "roofline": {"peaks": []}})
    assert table.splitlines()[0].split()[:3] == ["format", "runtime", "batch"]
    assert len(table.splitlines()) == 2


def test_bad_run_folders_exit_2(run_dir, tmp_path, capsys):
    neither = tmp_path / "neither"
    neither.mkdir()
    (neither / "model.onnx").write_bytes(b"")  # model files without their model.json
    cases = {
        tmp_path / "missing": "does not exist",
        _no_export(run_dir, tmp_path): "export",
        neither: "is neither a run folder (no config.json) nor an export folder (no model.json)",
    }
    for path, words in cases.items():
        for mode in ([], ["--interleaved"]):
            assert main(["bench", str(path), *mode]) == 2
            err = capsys.readouterr().err.strip()
            assert words in err and len(err.splitlines()) == 1
    assert not list((tmp_path / "no_export").glob("*bench*"))
    assert [p.name for p in neither.iterdir()] == ["model.onnx"]


def test_demo_bench_step(run_dir, tmp_path, capsys):
    """What `toolkit demo` runs after verify, through the Python API: short runs, quiet, the
    three files returned; the same call as `toolkit bench` with those flags (here on one file:
    the call is the same for each)."""
    from toolkit import bench_run
    from toolkit.cli.demo import BENCH_OPTIONS

    run = copy_tiny_run(run_dir, tmp_path / "run")
    benched = bench_run(run, format="tflite", **BENCH_OPTIONS)
    result, paths = benched.result, benched.files
    assert capsys.readouterr().out == ""  # quiet by default
    assert [p.name for p in paths] == list(BENCH_FILES) and all(p.is_file() for p in paths)
    assert json.loads(paths[0].read_text()) == json.loads(json.dumps(result))
    assert {"--seconds", "1", "--warmup", "20"} <= set(result["command"].split())
    ok = [r for r in result["rows"] if r["status"] == "ok"]
    assert ok and all(r["runs"] >= 20 for r in ok)  # a second of calls of a tiny model
    assert result["protocol"]["seconds"] == 1.0 and result["protocol"]["warmup"] == 20
    assert capsys.readouterr().out == ""


def test_missing_data_leaves_top1_blank(run_dir, tmp_path):
    """The run's data gone (e.g. the shared npz): latency rows still ok, top-1 blank, why said."""
    run = copy_tiny_run(run_dir, tmp_path / "run")
    config = json.loads((run / "config.json").read_text())
    config["options"]["data"] = f"npz:{tmp_path}/gone.npz"
    (run / "config.json").write_text(json.dumps(config))
    argv = ["bench", str(run), "--runtime", "ort-cpu", "--format", "onnx", *SHORT]
    assert main(argv) == 0
    result = json.loads((run / "bench.json").read_text())
    assert [(r["status"], r["top1"]) for r in result["rows"]] == [("ok", None)]
    assert "not found" in result["data"]["error"]


def test_cpu_flags_name_the_simd_sets_that_decide_speed():
    from toolkit.bench.machine import cpu_flags, cpu_text

    info = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_vnni ssse3\n"
    assert cpu_flags(info) == ["avx2", "fma", "avx512f", "avx512_vnni"]
    assert cpu_flags("flags\t: fpu sse2\n") == []
    assert cpu_flags("no flags line") == []
    assert cpu_text({"cpu": "EPYC", "cpu_flags": ["avx2", "fma"]}) == "EPYC (avx2, fma)"
    assert cpu_text({"cpu": "EPYC", "cpu_flags": []}) == "EPYC (no AVX2)"
    assert cpu_text({"cpu": "EPYC"}) == "EPYC"  # a report written before flags were recorded


def test_data_given_is_read_once(run_dir, tmp_path, monkeypatch):
    """--data is loaded once: the class check before timing keeps its test split for top-1."""
    import toolkit.runfiles.data

    calls = []
    real = toolkit.runfiles.data.run_dataset
    monkeypatch.setattr(
        toolkit.runfiles.data, "run_dataset", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    run = copy_tiny_run(run_dir, tmp_path / "run")
    argv = ["bench", str(run), "--runtime", "ort-cpu", "--format", "onnx", "--data", DATA]
    assert main([*argv, *SHORT]) == 0
    result = json.loads((run / "bench.json").read_text())
    assert len(calls) == 1
    assert result["rows"][0]["top1"] is not None and result["data"]["samples"] > 0


# -- toolkit bench --interleaved: ratios from files timed round-robin in one process --


def test_median_ratio_pairs_segments():
    # per-segment ratios 2, 1, 4 -> 2; the ratio of the medians (3 / 2) would differ
    assert interleaved.median_ratio([2.0, 3.0, 8.0], [1.0, 3.0, 2.0]) == 2.0
    with pytest.raises(ValueError):
        interleaved.median_ratio([1.0], [1.0, 2.0])


def test_interleaved_times_every_cpu_file_and_its_ratios(run_dir, tmp_path, capsys):
    """`toolkit bench RUN --interleaved`: every litert/ort-cpu file in the same segments, its
    ratio to its runtime's fp32 file; bench_interleaved.json and .md in RUN, no bench.json."""
    run = copy_tiny_run(run_dir, tmp_path / "run")
    argv = ["bench", str(run), "--interleaved", "--segments", "2", "--calls", "3"]
    assert main([*argv, "--warmup", "1", "--threads", "1"]) == 0
    median_ratio, fp32 = interleaved.median_ratio, interleaved.FP32
    report = json.loads((run / BENCH_INTERLEAVED_FILES[0]).read_text())
    rows = {r["format"]: r for r in report["rows"]}
    assert set(rows) == set(FORMATS.split(","))  # every exported file; no keras, no ort-cuda
    assert {r["runtime"] for r in rows.values()} == {"ort-cpu", "litert"}
    assert all(r["status"] == "ok" and len(r["segment_p50_ms"]) == 2 for r in rows.values())
    assert all(r["p50_ms"] == np.median(r["segment_p50_ms"]) > 0 for r in rows.values())
    assert rows[fp32["litert"]]["vs_fp32"] == rows[fp32["ort-cpu"]]["vs_fp32"] == 1.0
    int8 = rows["tflite-int8"]
    assert int8["vs_fp32"] == median_ratio(rows["tflite"]["segment_p50_ms"], int8["segment_p50_ms"])
    assert report["ort_fp32_over_litert_fp32"] == median_ratio(
        rows["onnx"]["segment_p50_ms"], rows["tflite"]["segment_p50_ms"]
    )
    assert (report["segments"], report["calls"], report["threads"], report["batch"]) == (2, 3, 1, 1)
    assert report["machine"]["cpu_flags"] is not None and report["kind"] == "run folder"
    assert report["command"].startswith(f"toolkit bench {run} --interleaved ")
    md = (run / BENCH_INTERLEAVED_FILES[1]).read_text()
    assert "| `tflite-int8` | litert | model_int8.tflite | ok |" in md and report["command"] in md
    assert "| `tflite-int8` | litert |" in capsys.readouterr().out
    assert not [p for p in run.iterdir() if p.name in BENCH_FILES]


def test_interleaved_keeps_the_table_when_a_file_will_not_open(run_dir, tmp_path):
    """A corrupt file is a failed row with its reason; the others are timed, and a ratio to a
    fp32 file that did not run is blank."""
    run = copy_tiny_run(run_dir, tmp_path / "run")
    (run / "export" / "model_fp32.tflite").write_bytes(b"not a flatbuffer" * 8)
    argv = ["bench", str(run), "--interleaved", "--format", "tflite,tflite-int8,onnx"]
    argv += ["--allow-modified"]  # model.json records the exported file's sha256
    assert main([*argv, "--segments", "1", "--calls", "2", "--warmup", "0"]) == 0
    report = json.loads((run / BENCH_INTERLEAVED_FILES[0]).read_text())
    rows = {r["format"]: r for r in report["rows"]}
    assert rows["tflite"]["status"] == "failed"
    assert "could not be loaded" in rows["tflite"]["reason"]
    assert rows["tflite"]["segment_p50_ms"] == [] and rows["tflite"]["p50_ms"] is None
    assert rows["tflite-int8"]["status"] == "ok" and rows["tflite-int8"]["vs_fp32"] is None
    assert rows["onnx"]["vs_fp32"] == 1.0 and report["ort_fp32_over_litert_fp32"] is None
    assert "- tflite: failed: " in (run / BENCH_INTERLEAVED_FILES[1]).read_text()


def test_round_robin_reverses_every_other_segment(monkeypatch):
    timed = []

    def fake_segment(call, calls):
        timed.append(call)
        return float(len(timed))

    monkeypatch.setattr(interleaved, "time_segment", fake_segment)
    calls = ["a", "b", "c"]
    series = interleaved.time_round_robin(calls, 3, 1)
    assert timed == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert series == [[1.0, 6.0, 7.0], [2.0, 5.0, 8.0], [3.0, 4.0, 9.0]]


# -- toolkit bench EXPORT_DIR: an export folder alone, on a device without TensorFlow --

# what the device lacks: a finder at startup (sitecustomize) that every worker inherits
DEVICE_BLOCKER = blocker_code(
    ("tensorflow", "tf_keras", "keras", "jax", "jaxlib", "tf2onnx", "onnx", "matplotlib")
    + ("mediapipe",)  # not in `.[edge]`: its rows say it is unavailable
)


def _device_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a device: DEVICE_BLOCKER run at the start of every Python process."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(DEVICE_BLOCKER)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def _on_device(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """`toolkit ARGV` where TensorFlow, Keras, JAX, tf2onnx, onnx and matplotlib do not import
    (numpy, pillow, LiteRT and ONNX Runtime do), in this process and in every worker."""
    return subprocess.run(
        [sys.executable, "-m", "toolkit.cli.main", *argv],
        capture_output=True,
        text=True,
        env=_device_env(tmp_path),
    )


def test_export_folder_benches_without_tensorflow_keras_or_jax(run_dir, tmp_path):
    """The export folder alone, copied elsewhere: litert and ort-cpu rows ok (mediapipe's say it
    is not installed); no Keras row; GMAC/s from model.json's MAC count; top-1 and the roofline
    null and said so in bench.md; no bench.png without matplotlib; the interleaved mode too. The
    run folder itself says what it needs, and the way out."""
    device = shutil.copytree(run_dir / "export", tmp_path / "device" / "model")
    for module in ("keras", "tensorflow", "jax", "onnx", "matplotlib"):  # as in any worker
        probe = [sys.executable, "-c", f"import {module}"]
        assert subprocess.run(probe, capture_output=True, env=_device_env(tmp_path)).returncode
    done = _on_device(tmp_path, "bench", str(device), "--seconds", "0.2")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((device / "bench.json").read_text())
    rows = {(r["format"], r["runtime"]): r for r in result["rows"]}
    want = {("onnx", "ort-cpu"), ("tflite", "litert"), ("tflite-int8", "litert")}
    assert want <= set(rows) and not any(r == "keras" for _, r in rows)
    assert rows["tflite", "mediapipe"]["status"] == "unavailable"
    macs = json.loads((device / MANIFEST_FILE).read_text())["macs_per_image"]
    assert macs == count_macs(keras.saving.load_model(run_dir / MODEL_FILE, compile=False))
    for key in want:
        row = rows[key]
        assert row["status"] == "ok", row["reason"]
        assert row["p50_ms"] > 0 and row["top1"] is None
        assert row["macs_per_image"] == macs
        assert row["gmacs"] == pytest.approx(macs * row["batch"] / (row["p50_ms"] * 1e6))
        assert row["roofline_fraction"] is None
    assert result["kind"] == "export folder" and result["model"] == "shiftvit"
    assert result["data"]["not_computed"] and result["roofline"]["not_available"]
    assert result["roofline"]["peaks"] == []
    md = (device / "bench.md").read_text()
    assert "- the roofline: not available: the roofline needs each layer's work" in md
    assert "- top-1: not computed: an export folder has no test data" in md
    assert not (device / "bench.png").exists() and "matplotlib is not installed" in done.stderr
    assert not (device / BENCH_TOP1_FILE).exists()

    done = _on_device(tmp_path, "bench", str(device), "--interleaved", "--segments", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((device / BENCH_INTERLEAVED_FILES[0]).read_text())
    assert {r["format"] for r in report["rows"] if r["status"] == "ok"} == set(FORMATS.split(","))

    run = copy_tiny_run(run_dir, tmp_path / "run")
    for argv, words in (
        ([str(run)], "needs Keras: pip install 'toolkit[tensorflow]', or bench its export "),
        ([str(device), "--data", DATA], "--data needs the run folder"),
        ([str(device), "--format", "keras"], f"export folder {device} has no model.keras"),
    ):
        done = _on_device(tmp_path, "bench", *argv)
        assert done.returncode == 2 and words in done.stderr, done.stderr[-3000:]
        assert len(done.stderr.strip().splitlines()) == 1
    assert f"`toolkit bench {run / 'export'}`" in _on_device(tmp_path, "bench", str(run)).stderr
    assert not [p for p in run.iterdir() if p.name.startswith("bench")]


def test_run_export_folder_is_an_export_folder(run_dir, tmp_path):
    """RUN/export given: its files alone, results in it, no Keras row even where Keras is."""
    run = copy_tiny_run(run_dir, tmp_path / "run")
    argv = ["bench", str(run / "export"), "--runtime", "keras,ort-cpu", "--format", "onnx"]
    assert main([*argv, *SHORT]) == 0
    result = json.loads((run / "export" / "bench.json").read_text())
    assert [(r["format"], r["runtime"], r["status"]) for r in result["rows"]] == [
        ("onnx", "ort-cpu", "ok")
    ]
    assert result["rows"][0]["top1"] is None and result["kind"] == "export folder"
    assert not [p for p in run.iterdir() if p.name.startswith("bench")]


def test_a_fixed_batch_file_is_benched_at_its_batch_only(tmp_path):
    """onnx-mobile's .ort takes batch 1 (its FORMATS row): the batch sweep skips the others
    for it and keeps them for the dynamic-batch files."""
    artifacts = [
        benchmarker.Artifact("onnx", tmp_path / "model.onnx", 1),
        benchmarker.Artifact("onnx-mobile", tmp_path / "model.ort", 1),
        benchmarker.Artifact("keras", tmp_path / "model.keras", 1),
    ]
    plan = benchmarker.Plan(
        tmp_path, artifacts, ["keras", "ort-cpu"], [1, 8], Protocol(1, 2, None), 1, 1
    )
    cells = {(a.format, r, b) for a, r, b in plan.cells()}
    assert cells == {
        ("onnx", "ort-cpu", 1),
        ("onnx", "ort-cpu", 8),
        ("onnx-mobile", "ort-cpu", 1),
        ("keras", "keras", 1),
        ("keras", "keras", 8),
    }


def test_a_cached_top1_is_keyed_on_the_datas_content_not_its_path(run_dir, tmp_path):
    """bench_top1.json kept a top-1 by data spec: after the npz at the same path had its labels
    shuffled, bench still said the old top-1. The key holds the split's hash: new data, new
    score, the file's top-1 on the data as it is now."""
    run = copy_tiny_run(run_dir, tmp_path / "run")
    images, labels = artifact_accuracy.test_split(run)
    data = tmp_path / "data.npz"
    names = np.array((run / "labels.txt").read_text().split("\n")[:-1])
    np.savez(data, x=images.astype(np.uint8), y=labels, class_names=names)
    argv = ["bench", str(run), "--runtime", "ort-cpu", "--format", "onnx", "--data", f"npz:{data}"]
    assert main([*argv, *SHORT]) == 0
    shuffled = np.random.default_rng(0).permutation(labels)
    np.savez(data, x=images.astype(np.uint8), y=shuffled, class_names=names)
    assert main([*argv, *SHORT]) == 0
    (row,) = json.loads((run / "bench.json").read_text())["rows"]
    onnx = run / "export" / "model.onnx"
    now = artifact_accuracy.test_split(run, f"npz:{data}")
    assert row["top1"] == pytest.approx(artifact_accuracy.top1(onnx, *now))
    assert len(json.loads((run / BENCH_TOP1_FILE).read_text())) == 2  # one per data
