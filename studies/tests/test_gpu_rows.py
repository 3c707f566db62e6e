"""`python -m studies.gpu_rows` on a machine without a GPU: the plan fits its minutes, every GPU
row reads "not measured" with why, the JSON is written atomically; slim .onnx copies run once
their weights are filled; with --cpu-check (slow) the rows run on the CPU as labelled checks."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from studies import gpu_rows
from toolkit.bench.machine import nvidia_gpus

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    # the rows are checked here, not timed: XLA's lowest level compiles the train steps in
    # 40% less time
    env["XLA_FLAGS"] = "--xla_backend_optimization_level=0"
    return subprocess.run(
        [sys.executable, "-m", "studies.gpu_rows", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def _image_model(path: Path) -> Path:
    """An NHWC 8x8x3 -> 10 logits ONNX model (Flatten, MatMul, Add) with a 7.5 KiB weight."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((192, 10)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.zeros(10, np.float32), "b")
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"]),
        helper.make_node("MatMul", ["f", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8, 8, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 10])],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _gpu_visible() -> bool:
    return bool(nvidia_gpus())


@pytest.mark.parametrize("minutes", [0.5, 1.0, 12.0, 25.0, 37.3])
@pytest.mark.parametrize("rows", [gpu_rows.ROW_IDS[1:], ("ort-cuda",), ("two-process", "ort-cuda")])
def test_the_plan_budgets_sum_to_at_most_the_minutes(minutes, rows):
    steps = gpu_rows.plan(minutes, rows)
    assert [s["id"] for s in steps] == ["setup", *[r for r in gpu_rows.ROW_IDS if r in rows]]
    assert sum(s["budget_s"] for s in steps) <= minutes * 60
    assert sum(s["budget_s"] for s in steps) >= minutes * 60 - len(steps)  # floors only
    if minutes >= 1:
        assert all(s["budget_s"] > 0 for s in steps)
    assert steps[0]["budget_s"] == min(60, math.floor(minutes * 30))


def test_without_a_gpu_every_gpu_row_reads_not_measured_and_why(tmp_path):
    if _gpu_visible():
        pytest.skip("a GPU is visible: the rows would run")
    folder = tmp_path / "pics" / "c10"
    for name in ("cat", "dog"):
        (folder / name).mkdir(parents=True)
        (folder / name / "0.png").write_bytes(b"not read: the rows never start")
    archive = tmp_path / "pics.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="c10")
    onnx_dir = tmp_path / "onnx"
    _image_model(onnx_dir / "m.onnx")
    out = tmp_path / "out" / "gpu_rows.json"
    argv = ["--minutes", "0.5", "--data", f"tar:{archive}", "--onnx", str(onnx_dir)]
    argv += ["--rows", ",".join(gpu_rows.ROW_IDS[1:])]  # the paper rows too
    proc = _run(*argv, "--json", str(out), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert sorted(p.name for p in out.parent.iterdir()) == ["gpu_rows.json"]  # no temp file left
    assert sum(s["budget_s"] for s in report["plan"]) <= 30
    rows = {r["id"]: r for r in report["rows"]}
    assert list(rows) == list(gpu_rows.ROW_IDS)
    setup = rows.pop("setup")
    assert setup["data"].startswith("folder:") and setup["data"].endswith("c10")
    assert setup["jax_gpus"] == 0
    for row in rows.values():
        assert row["status"] == "not measured", row
        assert "figures" not in row and "check" not in row
    for name in (*gpu_rows.TRAIN_ROWS, "two-process"):
        assert rows[name]["reason"].startswith("no GPU: jax sees cpu")
    assert "ort-cuda is unavailable" in rows["ort-cuda"]["reason"]
    assert report["command"].startswith("python -m studies.gpu_rows --minutes 0.5")
    assert report["machine"]["cpu"] and report["machine"]["versions"]["jax"]
    budget = rows["train-shiftvit"]["budget_s"]
    assert f"| train-shiftvit | {budget} s | - | not measured: no GPU: jax sees cpu" in proc.stdout
    assert "- GPU: none (nvidia-smi lists no GPU)" in proc.stdout


def test_missing_data_and_files_are_named_as_the_reason(tmp_path):
    if _gpu_visible():
        pytest.skip("a GPU is visible: the rows would run")
    out = tmp_path / "r.json"
    proc = _run("--minutes", "0.2", "--data", "tar:nowhere.tar.gz", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["train-shiftvit"]["reason"].endswith("no data: --data tar:nowhere.tar.gz: "
                                                     "nowhere.tar.gz is not a file")  # fmt: skip
    assert rows["ort-cuda"]["reason"].startswith("no .onnx files in (no --onnx DIR)")
    assert _run("--rows", "train-resnet").returncode == 2  # argparse: an unknown row
    with pytest.raises(SystemExit):
        gpu_rows.parse_args(["--ort-seconds", "0"])


def test_keras_epoch_lines_give_seconds_per_step():
    log = "\n".join(
        [
            "Epoch 1/2",
            "157/157 - 41s - 262ms/step - accuracy: 0.2100 - loss: 2.1000",
            "process 0 of 2: something else - 5ms/step",
            "  4/4 - 3s - 1s/step - accuracy: 0.3",
            "157/157 - 12s - 76ms/step - accuracy: 0.3400 - val_accuracy: 0.3500",
        ]
    )
    assert gpu_rows.step_seconds(log) == pytest.approx([0.262, 1.0, 0.076])


def test_a_slim_copy_leaves_its_weights_out_and_runs_once_they_are_filled(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    src = _image_model(tmp_path / "src" / "m.onnx")
    (slim,) = gpu_rows.slim_onnx(src.parent, tmp_path / "slim")
    assert slim.stat().st_size < 2048 < src.stat().st_size  # the 7.5 KiB weight left out
    assert not (slim.parent / gpu_rows.SLIM_DATA).exists()
    assert gpu_rows.restore_weights(src, tmp_path / "x") == (src, 0)  # whole: used as it is
    filled, count = gpu_rows.restore_weights(slim, tmp_path / "filled")
    assert count == 1 and filled.parent == tmp_path / "filled"
    assert (
        gpu_rows.restore_weights(slim, tmp_path / "again")[0].read_bytes()[-64:]
        == (filled.read_bytes()[-64:])
    )  # seeded: the same values every time
    x = np.ones((2, 8, 8, 3), np.float32)
    session = ort.InferenceSession(str(filled), providers=["CPUExecutionProvider"])
    y = session.run(None, {"x": x})[0]
    assert y.shape == (2, 10) and np.all(np.isfinite(y)) and np.ptp(y) > 0
    assert gpu_rows._opset(slim) == 17


@pytest.mark.slow  # trains a tiny preset on the CPU and times ort-cpu workers
def test_cpu_check_runs_the_rows_on_the_cpu_as_labelled_checks(tmp_path):
    if _gpu_visible():
        pytest.skip("a GPU is visible: the rows would be GPU rows")
    pytest.importorskip("jax")
    _image_model(tmp_path / "src" / "m.onnx")
    gpu_rows.slim_onnx(tmp_path / "src", tmp_path / "slim")
    out = tmp_path / "r.json"
    argv = ["--minutes", "4", "--data", "shapes:300", "--preset", "tiny", "--cpu-check"]
    argv += ["--rows", "train-shiftvit,ort-cuda", "--onnx", str(tmp_path / "slim")]
    argv += ["--device-data", "on", "--run-dir", str(tmp_path / "runs")]
    argv += ["--ort-seconds", "0.5"]  # each ort-cpu worker times 0.5 s, not the budget's 3 s
    proc = _run(*argv, "--json", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"setup", "train-shiftvit", "ort-cuda"}
    train, ort = rows["train-shiftvit"], rows["ort-cuda"]
    assert train["status"] == ort["status"] == "not measured"
    assert "ran on the CPU as a check" in train["reason"] and "figures" not in train
    check = train["check"]
    assert check["platform"] == "cpu" and check["precision"] == "mixed_bfloat16"
    assert check["images_per_s"] > 0 and check["steady_steps"] > 0 and check["epochs_run"] >= 1
    assert check["target_top1"] is None  # shapes is not the seed's data
    assert 0 <= check["test_top1"] <= 1 and check["splits"] == [240, 30, 30]
    assert train["elapsed_s"] <= train["budget_s"]
    assert "(ran on ort-cpu as a check)" in ort["reason"] and ort["check"]["seconds_per_row"] == 0.5
    assert [r["status"] for r in ort["check"]["rows"]] == ["ok", "ok"]
    assert {r["weights_filled"] for r in ort["check"]["rows"]} == {1}
    assert "## train-shiftvit (CPU check: not a GPU figure)" in proc.stdout
    assert check["input_path"] == "device" and check["epochs_before"] == 0
    # a second call continues from the state the first saved after its last epoch
    again = tmp_path / "again.json"
    argv = ["--minutes", "2", "--data", "shapes:300", "--preset", "tiny", "--cpu-check"]
    argv += ["--rows", "train-shiftvit", "--device-data", "on", "--run-dir", str(tmp_path / "runs")]
    proc = _run(*argv, "--json", str(again), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = {r["id"]: r for r in json.loads(again.read_text())["rows"]}["train-shiftvit"]["check"]
    assert resumed["epochs_before"] == check["epochs_done"] >= 1
    assert resumed["epochs_done"] == resumed["epochs_before"] + resumed["epochs_run"]
    if resumed["epochs_run"] == 0:  # the first call finished the recipe: the same model scored
        assert resumed["test_top1"] == check["test_top1"]


def test_only_cifar10_data_holds_shiftvit_to_its_seed_figure():
    shiftvit, vit_lsa = (
        gpu_rows.target_of("shiftvit", "seed"),
        gpu_rows.target_of("vit-lsa", "seed"),
    )
    assert gpu_rows._has_target_data(shiftvit, "cifar10-jpeg")
    assert gpu_rows._has_target_data(shiftvit, "CIFAR-10")
    assert not gpu_rows._has_target_data(shiftvit, "cifar100")
    assert not gpu_rows._has_target_data(shiftvit, "shapes")
    assert not gpu_rows._has_target_data(vit_lsa, "cifar10-jpeg")  # its figure is CIFAR-100


def test_the_paper_rows_train_the_paper_presets_to_the_papers_top1():
    """paper-cifar rows: the SPT/LSA paper's CIFAR-10 figures (the ShiftViT: the ViT's); not
    among the default rows, which stay the four that share one call."""
    targets = {
        row: gpu_rows.target_of(*gpu_rows.TRAIN_ROWS[row])
        for row in ("paper-vit-lsa", "paper-vit", "paper-shiftvit")
    }
    assert {row: (t.top1, t.data) for row, t in targets.items()} == {
        "paper-vit-lsa": (0.9453, "CIFAR-10"),
        "paper-vit": (0.9358, "CIFAR-10"),
        "paper-shiftvit": (0.9358, "CIFAR-10"),
    }
    assert targets["paper-shiftvit"].name == "the SPT/LSA paper's ViT"
    assert all(gpu_rows._has_target_data(t, "cifar10-jpeg") for t in targets.values())
    assert {gpu_rows.TRAIN_ROWS[row][1] for row in targets} == {"paper-cifar"}
    assert gpu_rows.parse_args([]).rows == gpu_rows.DEFAULT_ROWS
    assert not set(targets) & set(gpu_rows.DEFAULT_ROWS)


@pytest.mark.slow  # trains a tiny preset on the CPU
def test_a_timed_training_row_ends_its_schedule_within_the_rows_budget(tmp_path):
    """--timed plans the recipe's schedule to end within the row's budget (toolkit train
    --time's planner): the row ends in time with the learning rate decayed to 0."""
    if _gpu_visible():
        pytest.skip("a GPU is visible: the rows would be GPU rows")
    pytest.importorskip("jax")
    out = tmp_path / "r.json"
    argv = ["--minutes", "2.5", "--data", "shapes:300", "--preset", "tiny", "--cpu-check"]
    argv += ["--rows", "train-shiftvit", "--device-data", "on", "--timed"]
    proc = _run(*argv, "--json", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    train = {r["id"]: r for r in json.loads(out.read_text())["rows"]}["train-shiftvit"]
    check = train["check"]
    assert check["schedule"] == "timed" and check["epochs_run"] >= 2
    assert check["final_lr"] < 0.01 * check["lr_max"], check["final_lr"]
    assert check["stopped_by"] == "the recipe's epochs"  # the plan ended it, not the deadline
    assert train["elapsed_s"] <= train["budget_s"]
