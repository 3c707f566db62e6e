"""Faults and defaults of `toolkit export` (issue 58): a full disk stops export, verify and bench
in one line (exit 1) with every earlier file whole; an int8 export without --calib-samples
calibrates on the data's training images where fewer than the default; a budget above 100 top-1
points is refused."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

import onnx
import pytest
from tiny_runs import DATA as TINY_DATA
from tiny_runs import copy_tiny_run

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.export import export_run
from toolkit.export.calibration import DEFAULT_CALIB_SAMPLES, calib_count
from toolkit.runfiles.folder import EXPORT_DIR, LABELS_FILE, MANIFEST_FILE
from toolkit.runfiles.hashes import modified_files

TRAIN_IMAGES = 240  # the tiny run's training split (shapes:300: 240 / 30 / 30)
FULL = os.strerror(errno.ENOSPC).lower()
AGAIN = "free space and run the same command again"


def _disk_full() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden temps too) with its sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("toolkit: error:")]


# -- how many calibration images: one rule (no model needed) ------------------------------------


def test_without_calib_samples_fewer_training_images_calibrate_all_said_once(capsys):
    assert calib_count(None, TRAIN_IMAGES, "shapes:300") == TRAIN_IMAGES
    err = capsys.readouterr().err
    assert err == (
        f"toolkit: note: calibrating on all {TRAIN_IMAGES} training images of shapes:300 "
        f"(fewer than the default {DEFAULT_CALIB_SAMPLES}; --calib-samples N sets it)\n"
    )
    assert calib_count(None, 50_000, "cifar10") == DEFAULT_CALIB_SAMPLES
    assert calib_count(100, TRAIN_IMAGES, "shapes:300") == 100
    assert capsys.readouterr().err == ""  # nothing lowered: nothing said


def test_calib_samples_given_above_the_training_images_is_still_refused():
    with pytest.raises(UsageError, match="only 240 training images.*lower --calib-samples to 240"):
        calib_count(241, TRAIN_IMAGES, "shapes:300")
    with pytest.raises(UsageError, match="no training images: pass --calib-data"):
        calib_count(None, 0, "npz:empty.npz")


@pytest.mark.parametrize("budget", ["101", "1000000"])
def test_an_accuracy_budget_above_100_points_is_refused_before_work(budget, tmp_path, capsys):
    argv = ["export", str(tmp_path / "no_run"), "--format", "tflite-int8"]
    assert main([*argv, "--max-accuracy-drop", budget]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("toolkit: error: --max-accuracy-drop must be 0 or more top-1 points, ")
    assert (
        f"at most 100 (the most the int8 file may lose against the float model), got {budget}"
        in err
    )
    assert len(err.splitlines()) == 1
    with pytest.raises(UsageError, match="at most 100"):
        export_run(tmp_path / "no_run", "onnx-int8", max_accuracy_drop=100.5)


# -- on the shared tiny run (slow: trained, or exported, once per session) ----------------------


@pytest.fixture
def trained(tiny_runs, tmp_path) -> Path:
    """A copy of the tiny run, not exported: 240 training images, fewer than the default."""
    return copy_tiny_run(tiny_runs.trained("shiftvit"), tmp_path / "run")


@pytest.fixture
def exported(tiny_runs, tmp_path) -> Path:
    """A copy of the tiny run exported to every format."""
    return copy_tiny_run(tiny_runs.exported("shiftvit"), tmp_path / "run")


@pytest.mark.slow
def test_the_default_int8_export_of_a_small_run_calibrates_on_its_training_split(trained, capsys):
    assert main(["export", str(trained), "--format", "tflite-int8,onnx-int8"]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("toolkit: note:")]
    assert notes == [
        f"toolkit: note: calibrating on all {TRAIN_IMAGES} training images of {TINY_DATA} "
        f"(fewer than the default {DEFAULT_CALIB_SAMPLES}; --calib-samples N sets it)"
    ]
    manifest = json.loads((trained / EXPORT_DIR / MANIFEST_FILE).read_text())
    for fmt in ("tflite-int8", "onnx-int8"):  # what the files were made with
        assert manifest["artifacts"][fmt]["options"]["calib_samples"] == TRAIN_IMAGES
    before = _snapshot(trained / EXPORT_DIR)
    argv = ["export", str(trained), "--format", "tflite-int8", "--calib-samples", "241"]
    assert main(argv) == 2  # asked for more than there are: refused, nothing written
    assert _errors(capsys.readouterr().err) == [
        f"toolkit: error: calibration data {TINY_DATA} has only {TRAIN_IMAGES} training images, "
        f"fewer than the 241 asked: lower --calib-samples to {TRAIN_IMAGES} or less"
    ]
    assert _snapshot(trained / EXPORT_DIR) == before


def _fail_path_writes(monkeypatch, method: str, name: str) -> None:
    """Path.`method` (write_bytes or write_text) of a temp file for `name` writes half its data,
    then finds the disk full."""
    real = getattr(Path, method)

    def half_then_full(self, data, *args, **kwargs):
        if self.name.startswith(f".{name}."):
            real(self, data[: len(data) // 2])
            raise _disk_full()
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, method, half_then_full)


def _fail_onnx_save(monkeypatch, name: str) -> None:
    real = onnx.save

    def half_then_full(model, path, *args, **kwargs):
        if Path(path).name.startswith(f".{name}."):
            Path(path).write_bytes(model.SerializeToString()[:1000])
            raise _disk_full()
        return real(model, path, *args, **kwargs)

    monkeypatch.setattr(onnx, "save", half_then_full)


FULL_DISK_CASES = {  # case: (format, the file whose write fails, how it fails)
    "tflite converter": ("tflite", "model_fp32.tflite", "write_bytes"),
    "onnx converter": ("onnx", "model.onnx", "onnx.save"),
    "model.json": ("tflite-fp16", MANIFEST_FILE, "write_text"),
    "labels.txt": ("tflite-dynamic", LABELS_FILE, "write_text"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(FULL_DISK_CASES))
def test_a_full_disk_stops_export_in_one_line_leaving_the_earlier_export(
    case, exported, monkeypatch, capsys
):
    fmt, name, how = FULL_DISK_CASES[case]
    out = exported / EXPORT_DIR
    before = _snapshot(out)
    if how == "onnx.save":
        _fail_onnx_save(monkeypatch, name)
    else:
        _fail_path_writes(monkeypatch, how, name)
    assert main(["export", str(exported), "--format", fmt]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert _errors(err) == [
        f"toolkit: error: {FULL} writing {out / name}: {fmt}'s files and model.json are as they "
        f"were; {AGAIN}"
    ]
    assert _snapshot(out) == before  # no temp file, no byte of the earlier export changed


@pytest.mark.slow
def test_formats_written_before_a_full_disk_are_whole_and_recorded(exported, monkeypatch, capsys):
    out = exported / EXPORT_DIR
    before = _snapshot(out)
    _fail_path_writes(monkeypatch, "write_bytes", "model_fp32.tflite")
    assert main(["export", str(exported), "--format", "tflite-fp16,tflite"]) == 1
    assert _errors(capsys.readouterr().err) == [
        f"toolkit: error: {FULL} writing {out / 'model_fp32.tflite'}: tflite's files and "
        f"model.json are as they were (tflite-fp16 written); {AGAIN}"
    ]
    after = _snapshot(out)
    assert after["model_fp32.tflite"] == before["model_fp32.tflite"]
    assert after["model_fp16.tflite"] != before["model_fp16.tflite"]  # exported again
    assert set(after) == set(before)
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert modified_files(out, manifest, manifest["artifacts"]) == {}  # each file as recorded


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, name",
    [
        (["verify", "{run}", "--models-only", "--runtime", "litert", "--samples", "8"],
         "verify.json"),
        (["bench", "{run}", "--format", "tflite", "--runtime", "litert", "--batch", "1",
          "--runs", "5", "--warmup", "1"], "bench.md"),
    ],
)  # fmt: skip
def test_a_full_disk_stops_verify_and_bench_in_one_line_after_their_results(
    argv, name, exported, monkeypatch, capsys
):
    before = _snapshot(exported)
    _fail_path_writes(monkeypatch, "write_text", name)
    assert main([a.format(run=exported) for a in argv]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert _errors(captured.err) == [
        f"toolkit: error: {FULL} writing {exported / name}: each file is whole, new or as it "
        f"was; {AGAIN}"
    ]
    assert "tflite" in captured.out  # the results were shown before the write
    after = _snapshot(exported)
    assert not (exported / name).exists() and not [p for p in after if p.startswith(".")]
    assert {p: h for p, h in after.items() if p in before} == before  # nothing earlier changed
