"""`toolkit train`: the run folder, resume, precision, mirrored strategy, real-data accuracy."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from tiny_runs import copy_tiny_run

from toolkit.cli.main import main
from toolkit.data import load_data
from toolkit.models import preset_from_dict
from toolkit.runfiles.data import load_split
from toolkit.runfiles.folder import (
    CONFIG_FILE,
    HISTORY_FILE,
    LABELS_FILE,
    METRICS_FILE,
    MODEL_FILE,
    open_run,
)
from toolkit.training import checkpoint as checkpoint_module
from toolkit.training.checkpoint import epochs_done
from toolkit.training.options import TrainOptions
from toolkit.training.train import train

pytestmark = pytest.mark.slow  # every test here trains
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "cifar10_train_sample.npz"
RUN_FILES = (MODEL_FILE, CONFIG_FILE, HISTORY_FILE, METRICS_FILE, LABELS_FILE)


def test_train_writes_a_complete_run_folder(tmp_path):
    """... with a validation share of its own: recorded, and the split every later command
    reads (a quarter of the 360 non-test images where the data's own split holds 40)."""
    options = TrainOptions("shiftvit", "tiny", "shapes:400", epochs=1, recipe="val_fraction=0.25")
    out = train(options, out=tmp_path / "run")
    for name in RUN_FILES:
        assert (out / name).is_file(), name
    assert not (out / "checkpoint").exists()
    config = json.loads((out / "config.json").read_text())
    assert preset_from_dict(config["preset"]).arch.dim == 32
    assert preset_from_dict(config["preset"]).train.val_fraction == 0.25
    held = load_data("shapes:400", seed=0, val_fraction=0.25)
    x_val, y_val, _ = load_split(open_run(out), "val")
    assert len(y_val) == 90 and len(load_data("shapes:400").y_val) == 40
    np.testing.assert_array_equal(x_val, held.x_val)
    np.testing.assert_array_equal(load_split(open_run(out), "test")[1], held.y_test)
    assert config["options"]["data"] == "shapes:400"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) >= {"test_top1", "test_top5", "parameters", "macs_per_image"}
    assert metrics["epochs_run"] == 1
    for record in (config["backend"], metrics["backend"]):  # what trained it, and its version
        assert record == {"name": "tensorflow", "version": metadata.version("tensorflow")}
    assert (out / "labels.txt").read_text().splitlines() == load_data("shapes:400").class_names

    model = keras.saving.load_model(out / "model.keras", safe_mode=True)
    assert model.count_params() == metrics["parameters"]
    x = load_data("shapes:400").x_test[:8].astype("float32")
    again = keras.saving.load_model(out / "model.keras", safe_mode=True)
    np.testing.assert_array_equal(model.predict(x, verbose=0), again.predict(x, verbose=0))


def test_eval_command_reports_the_run_accuracy(tiny_runs, tmp_path, capsys):
    out = copy_tiny_run(tiny_runs.trained("shiftvit"), tmp_path / "run")
    assert main(["eval", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert f"top-1 {metrics['test_top1']:.2%}" in capsys.readouterr().out


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_a_run_folder_another_train_holds_is_refused_until_that_process_dies(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    lock = out / ".train.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        argv = ["train", "--model", "shiftvit", "--data", "shapes:200", "--epochs", "1"]
        assert main([*argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("toolkit: error: run folder") and "\n" not in err
        assert "being written by another `toolkit train`" in err and "another --out" in err
        assert [p.name for p in out.iterdir()] == [lock.name]  # nothing written, lock kept
    finally:
        holder.kill()  # as a killed run: its lock file stays, its flock goes
        holder.wait()
    assert lock.is_file()
    assert main([*argv, "--out", str(out)]) == 0
    assert (out / "metrics.json").is_file() and not lock.exists()


def test_mixed_precision_keeps_float32_logits(tmp_path):
    out = train(
        TrainOptions("vit-lsa", "tiny", "shapes:400", epochs=1, precision="mixed_float16"),
        out=tmp_path / "run",
    )
    assert keras.mixed_precision.global_policy().name == "float32"
    model = keras.saving.load_model(out / "model.keras", safe_mode=True)
    logits = model.predict(np.zeros((2, 32, 32, 3), "float32"), verbose=0)
    assert logits.dtype == np.float32 and np.all(np.isfinite(logits))


@pytest.mark.skipif(
    len(tf.config.list_logical_devices("GPU")) > 1, reason="2+ GPUs: mirrored has devices"
)
def test_mirrored_strategy_on_one_device_is_refused_before_anything_is_written(tmp_path, capsys):
    argv = ["train", "--model", "vit", "--data", "shapes:200", "--strategy", "mirrored"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--strategy mirrored splits each batch across 2 or more devices" in err
    assert "sees 1" in err and "use --strategy default" in err and "\n" not in err
    assert list(tmp_path.iterdir()) == []


def test_mirrored_strategy_trains_on_two_logical_cpus(tmp_path):
    script = textwrap.dedent(f"""
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from toolkit.training.strategies import make_placement
        print("replicas", make_placement("mirrored").replicas)
        from toolkit.cli.main import main
        raise SystemExit(main(["train", "--model", "shiftvit", "--data", "shapes:400",
                               "--epochs", "1", "--strategy", "mirrored",
                               "--out", r"{tmp_path / "run"}"]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "replicas 2" in proc.stdout
    assert (tmp_path / "run" / "model.keras").is_file()


@pytest.mark.skipif(not SAMPLE.is_file(), reason="shared CIFAR-10 sample not present")
@pytest.mark.parametrize("model", ["shiftvit", "vit-lsa"])
def test_tiny_preset_learns_real_cifar10_well_above_chance(model, tmp_path):
    """Chance is 0.10; after 2 epochs ShiftViT reached 0.33 and ViT-LSA 0.40 (509 images)."""
    out = train(TrainOptions(model, "tiny", f"npz:{SAMPLE}", epochs=2), out=tmp_path / "run")
    history = (out / "history.csv").read_text().strip().splitlines()
    header = history[0].split(",")
    val_acc = float(history[-1].split(",")[header.index("val_accuracy")])
    assert val_acc > 0.25, f"{model}: validation accuracy {val_acc:.3f} after 2 epochs"


# --- a disk that fills --------------------------------------------------------------------------


def test_a_disk_full_at_a_checkpoint_stops_in_one_line_keeping_the_last_one(
    tmp_path, monkeypatch, capsys
):
    out = tmp_path / "run"
    argv = ["train", "--model", "shiftvit", "--data", "shapes:400", "--epochs", "2"]
    write_array = checkpoint_module._write_array

    def full_in_epoch_2s_checkpoint(stream, value):  # its last entry: the file is nearly whole
        if value.ndim == 0 and int(value) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write_array(stream, value)

    monkeypatch.setattr(checkpoint_module, "_write_array", full_in_epoch_2s_checkpoint)
    assert main([*argv, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"toolkit: error: no space left on device writing {out / 'checkpoint' / 'state.npz'}: "
        f"free space and resume with `toolkit train --out {out} --resume` (it continues from "
        "the last complete epoch)"
    )
    assert [p.name for p in (out / "checkpoint").iterdir()] == ["state.npz"]  # no temp file
    assert epochs_done(out / "checkpoint") == 1  # epoch 1's, whole
    assert not (out / "metrics.json").exists() and not (out / "model.keras").exists()
    monkeypatch.undo()
    assert main(["train", "--out", str(out), "--resume"]) == 0
    logged = capsys.readouterr().out
    assert "Epoch 2/2" in logged and "Epoch 1/2" not in logged  # from the checkpoint
    rows = (out / "history.csv").read_text().strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["0", "1"]  # epoch 2's row once
    assert json.loads((out / "metrics.json").read_text())["epochs_run"] == 2
    keras.saving.load_model(out / "model.keras", safe_mode=True)


FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from toolkit.cli.main import main
raise SystemExit(main(sys.argv[2:]))
"""


def test_a_file_size_limit_hit_by_the_first_checkpoint_is_one_line_and_the_run_resumes(tmp_path):
    # a real failing write (RLIMIT_FSIZE, as a full disk does): the checkpoint (~3 MB) does not
    # fit under 1 MB, the files before it do; then, without the limit, --resume finishes
    out = tmp_path / "run"
    argv = ["train", "--model", "shiftvit", "--data", "shapes:300", "--epochs", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    limited = [sys.executable, "-c", FILE_SIZE_LIMIT, str(1_000_000), *argv, "--out", str(out)]
    proc = subprocess.run(limited, capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("toolkit: error:")]
    assert errors == [proc.stderr.strip().splitlines()[-1]]
    assert f"file too large writing {out / 'checkpoint' / 'state.npz'}" in errors[0]
    assert f"`toolkit train --out {out} --resume`" in errors[0]
    assert list((out / "checkpoint").iterdir()) == []  # the partial file removed
    assert len((out / "history.csv").read_text().strip().splitlines()) == 2  # epoch 1 logged
    assert main(["train", "--out", str(out), "--resume"]) == 0
    rows = (out / "history.csv").read_text().strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["0"]  # trained again, logged once
    assert json.loads((out / "metrics.json").read_text())["epochs_run"] == 1
