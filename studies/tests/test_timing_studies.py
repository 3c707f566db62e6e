"""The timing studies (`python -m studies.NAME`) on a tiny exported run: interleaved's
`--before`, kernel_profile and product_threads. Lab code: these run with `make test`, not in
the product's tests."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from studies import interleaved as interleaved_study
from studies import kernel_profile, product_threads
from toolkit.bench import interleaved, roofline
from toolkit.runtimes import open_artifact

pytestmark = pytest.mark.slow  # every test here times a runtime on the shared tiny run


@pytest.fixture(scope="module")
def run_dir(tiny_runs, tmp_path_factory) -> Path:
    """A copy of the shared tiny shiftvit run (1 epoch on synthetic shapes) with onnx,
    tflite and tflite-int8 exported."""
    return copy_run(tiny_runs.bench_ready("shiftvit"), tmp_path_factory.mktemp("studies") / "run")


def copy_run(run_dir: Path, dest: Path) -> Path:
    """A copy of the run folder without any earlier bench outputs."""
    shutil.copytree(run_dir, dest, ignore=shutil.ignore_patterns("bench*"))
    return dest


def _no_export(run_dir: Path, tmp: Path) -> Path:
    run = copy_run(run_dir, tmp / "no_export")
    shutil.rmtree(run / "export")
    return run


def test_study_before_times_a_second_export_in_the_same_segments(run_dir, tmp_path, monkeypatch):
    """`python -m studies.interleaved --before RUN0`, built on bench/interleaved.py: RUN0's file
    right after RUN's of the same format, every other segment reversed, and its ratios."""
    timed = []
    real = interleaved.time_segment

    def recording(call, calls):
        timed.append(call)
        return real(call, calls)

    monkeypatch.setattr(interleaved, "time_segment", recording)
    before = copy_run(run_dir, tmp_path / "before")
    out = tmp_path / "il.json"
    argv = [str(run_dir), "--before", str(before), "--format", "tflite,tflite-int8"]
    argv += ["--segments", "3", "--calls", "2", "--json", str(out)]
    assert interleaved_study.main(argv) == 0
    first, second, third = timed[:4], timed[4:8], timed[8:]
    assert len(set(first)) == 4 and second == first[::-1] and third == first
    report = json.loads(out.read_text())
    assert report["before"] == str(before)
    for row in report["rows"]:
        assert len(row["before_segment_p50_ms"]) == len(row["segment_p50_ms"]) == 3
        assert row["vs_before"] == interleaved.median_ratio(
            row["before_segment_p50_ms"], row["segment_p50_ms"]
        )
    assert "before / now" in interleaved_study.markdown(report)
    assert not list(run_dir.glob("bench_interleaved*"))  # the study prints, it writes no RUN file


def test_study_bad_input_exits_2(run_dir, tmp_path, capsys):
    folder = tmp_path / "taken"
    folder.mkdir()
    no_export = _no_export(run_dir, tmp_path)
    cases = {
        "no export": ([str(no_export)], "export"),
        "json is a folder": ([str(run_dir), "--json", str(folder)], "--json"),
        "unknown format": ([str(run_dir), "--format", "tflite-int4"], "unknown format"),
        "no cpu file": ([str(run_dir), "--format", "tflite-fp16"], "none of tflite-fp16"),
        "threads zero": ([str(run_dir), "--threads", "0"], "--threads"),
        "before not exported": ([str(run_dir), "--before", str(no_export)], "export"),
    }
    for argv, words in cases.values():
        assert interleaved_study.main([*argv, "--segments", "1", "--calls", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1
    assert list(folder.iterdir()) == []


# -- studies.kernel_profile: native kernels of a file's calls, sampled by perf --

PERF_REPORT = (
    "# Samples: 325K of event 'cpu-clock'\n"
    "#\n"
    "# Overhead\tShared Object      \tSymbol\n"
    " 57.21% \tlibpywrap_litert_common.so \t[.] xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_3x8c8__avx2\n"
    " 0.63%  \t[kernel.kallsyms]  \t[k] _raw_spin_unlock_irqrestore\n"
    " 12.05% \tlibpywrap_litert_common.so \t[.] thread_main\n"
    "\n"
)


def test_kernel_profile_parses_perf_report_largest_first():
    rows = kernel_profile.parse_report(PERF_REPORT)
    assert [r.share for r in rows] == pytest.approx([0.5721, 0.1205, 0.0063])
    assert [(r.library, r.symbol) for r in rows] == [
        ("libpywrap_litert_common.so", "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_3x8c8__avx2"),
        ("libpywrap_litert_common.so", "thread_main"),
        ("[kernel.kallsyms]", "_raw_spin_unlock_irqrestore"),
    ]
    table = kernel_profile.markdown(Path("m.tflite"), rows, 2, 10, 2.0, 1)
    assert table.startswith("m.tflite: 10 batch-1 calls in 2.0 s (200.000 ms a call), 1 s of")
    assert "| 57.2% | libpywrap_litert_common.so |" in table
    assert table.splitlines()[-1] == "| 0.6% | | 1 other symbols |"


def test_kernel_profile_without_perf_exits_2(run_dir, monkeypatch, capsys):
    monkeypatch.setattr(kernel_profile.shutil, "which", lambda name: None)
    file = run_dir / "export" / "model_int8.tflite"
    assert kernel_profile.main([str(file), "--seconds", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "perf not found" in captured.err


def test_kernel_profile_perf_that_cannot_sample_exits_2(run_dir, tmp_path, monkeypatch, capsys):
    fake = tmp_path / "perf"
    fake.write_text("#!/bin/sh\necho 'Error: no access to perf_event_open' >&2\nexit 255\n")
    fake.chmod(0o755)
    monkeypatch.setattr(kernel_profile.shutil, "which", lambda name: str(fake))
    file = run_dir / "export" / "model_int8.tflite"
    assert kernel_profile.main([str(file), "--seconds", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no access to perf_event_open" in err


def _perf_usable() -> bool:
    try:
        kernel_profile.perf_binary()
    except kernel_profile.UsageError:  # no perf, or no permission to sample
        return False
    return True


@pytest.mark.skipif(not _perf_usable(), reason="perf is not installed or cannot sample here")
def test_kernel_profile_samples_xnnpack_kernels(run_dir, capsys):
    file = run_dir / "export" / "model_int8.tflite"
    assert kernel_profile.main([str(file), "--seconds", "1", "--threads", "1", "--top", "5"]) == 0
    rows, calls, seconds = kernel_profile.profile(file, None, 1, 1, kernel_profile.perf_binary())
    assert (
        calls > 0 and seconds >= 1.0 and 0.95 < sum(r.share for r in rows) < 1.05
    )  # rows are rounded
    assert any(r.symbol.startswith("xnn_") for r in rows)  # XNNPACK ran the calls
    assert "| share | library | symbol |" in capsys.readouterr().out


# -- studies.product_threads: one product per runtime and precision, 1 and 2 threads --


def test_product_threads_int8_onnx_product_is_the_default_recipes(tmp_path):
    """ONNX Runtime's int8 product is the fp32 MatMul quantized as `onnx-int8` is: int8 weights,
    activations quantized per call (standard ops), and it computes that matmul."""
    import onnx
    from onnx import numpy_helper

    small = dataclasses.replace(product_threads.KERNELS["ort-cpu", "int8"], shape=(4, 32, 16))
    path = roofline.kernel_file(small, tmp_path)
    graph = onnx.load(str(path)).graph
    assert {n.op_type for n in graph.node} >= {"DynamicQuantizeLinear", "MatMulInteger"}
    assert all(n.domain in ("", "ai.onnx") for n in graph.node)  # builtin ops only
    fp32 = roofline.onnx_matmul(False, small.shape)
    w = numpy_helper.to_array(fp32.graph.initializer[0]).astype(np.float64)
    a = np.random.default_rng(1).integers(0, 256, (4, 32)).astype(np.float32)
    want = a @ w
    got = open_artifact(path, "ort-cpu").run(a)
    np.testing.assert_allclose(got, want, atol=0.03 * np.abs(want).max())


def test_product_threads_times_each_product_at_each_thread_count(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "report.json"
    argv = ["--shapes", "4x32x16", "--threads", "1,2", "--runtimes", "ort-cpu", "--runs", "5"]
    assert product_threads.main([*argv, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [(r["runtime"], r["precision"]) for r in report["rows"]] == [
        ("ort-cpu", "fp32"),
        ("ort-cpu", "int8"),
    ]
    for row in report["rows"]:
        assert row["shape"] == [4, 32, 16] and set(row["us"]) == {"1", "2"}
        assert all(us > 0 for us in row["us"].values())
    table = capsys.readouterr().out
    assert "| 4x32x16 | ort-cpu | int8 |" in table and "2 threads vs 1" in table
    assert report["machine"]["cpu"] and report["command"].endswith("--json " + str(out))


def test_product_threads_bad_input_exits_2(tmp_path, capsys):
    folder = tmp_path / "taken"
    folder.mkdir()
    cases = {
        "two dimensions": (["--shapes", "4x8"], "ROWSxDEPTHxCOLUMNS"),
        "zero rows": (["--shapes", "0x8x8"], "ROWSxDEPTHxCOLUMNS"),
        "zero threads": (["--threads", "1,0"], "--threads"),
        "unknown runtime": (["--runtimes", "litert,tpu"], "--runtimes"),
        "json is a folder": (["--json", str(folder)], "--json"),
    }
    for argv, words in cases.values():
        assert product_threads.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1
    assert list(folder.iterdir()) == []
