"""Bad input that used to break (issue 11): one line, exit code 2, nothing written."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.data import load_data
from toolkit.data.shapes import CLASS_NAMES as SHAPES_CLASSES
from toolkit.models import build_model, get_preset
from toolkit.training import train as train_module
from toolkit.training.checkpoint import Checkpoint, epochs_done
from toolkit.training.options import TrainOptions
from toolkit.training.train import train

DATA = "shapes:200"


def _png(path: Path, seed: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = np.random.default_rng(seed).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    path.write_bytes(tf.io.encode_png(image).numpy())


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    """An untrained tiny ShiftViT's model.keras, for run folders whose model is only loaded."""
    path = tmp_path_factory.mktemp("model") / "model.keras"
    build_model(get_preset("shiftvit", "tiny"), (32, 32, 3), len(SHAPES_CLASSES)).save(path)
    return path


def _fake_run(
    folder: Path,
    model: Path | None = None,
    finished: bool = True,
    epochs_run: int = 0,
    data: str = DATA,
) -> Path:
    """A run folder as `toolkit train` leaves it (an untrained `model`), without training."""
    folder.mkdir(parents=True)
    config = {
        "options": asdict(TrainOptions("shiftvit", "tiny", data)),
        "preset": get_preset("shiftvit", "tiny").to_dict(),
        "dataset": {"image_shape": [32, 32, 3], "num_classes": len(SHAPES_CLASSES)},
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "labels.txt").write_text("\n".join(SHAPES_CLASSES) + "\n")
    if epochs_run:
        rows = [f"{i},0.1,2.0" for i in range(epochs_run)]
        (folder / "history.csv").write_text("\n".join(["epoch,accuracy,loss", *rows]) + "\n")
        (folder / "checkpoint").mkdir()  # what resumes: the epochs its state holds
        np.savez(folder / "checkpoint" / "state.npz", epochs_done=np.int64(epochs_run))
    if finished:
        shutil.copy(model, folder / "model.keras")
        (folder / "export").mkdir()
        manifest = {"artifacts": {"tflite": {"file": "model_fp32.tflite"}}}
        (folder / "export" / "model.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture
def read_only(tmp_path, monkeypatch) -> Path:
    """A folder whose file system refuses new files (EROFS), as a read-only mount does."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).resolve().is_relative_to(folder.resolve()):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(dir))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    return folder


@pytest.fixture
def cases(tmp_path, read_only, model_file) -> dict[str, tuple[list[str], str]]:
    """case -> (argv, text the one-line error must hold)."""
    run = str(_fake_run(tmp_path / "run", model_file))
    three = tmp_path / "three"
    for i, name in enumerate(("airplane", "cat", "ship")):
        for j in range(4):
            _png(three / name / f"{j}.png", seed=10 * i + j)
    permuted = tmp_path / "permuted.npz"
    names = np.array(["dots", *SHAPES_CLASSES[::-1][1:]])  # reordered and one renamed
    np.savez(
        permuted, x=np.zeros((40, 32, 32, 3), np.uint8), y=np.arange(40) % 10, class_names=names
    )
    gaps = tmp_path / "gaps.npz"
    np.savez(gaps, x=np.zeros((48, 32, 32, 3), np.uint8), y=5 + np.arange(48) % 12)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    verify_dir = _fake_run(tmp_path / "verify_dir", model_file)
    (verify_dir / "verify.json").mkdir()
    bench_dir = _fake_run(tmp_path / "bench_dir", model_file)
    (bench_dir / "bench.json").mkdir()
    tflite_dir = _fake_run(tmp_path / "tflite_dir", model_file)
    (tflite_dir / "export" / "model_fp32.tflite").mkdir()
    ro_run = str(_fake_run(read_only / "run", model_file))
    unfinished = str(_fake_run(tmp_path / "unfinished", finished=False, epochs_run=3))
    cr_labels = _fake_run(tmp_path / "cr_labels", model_file)  # what train refuses in a name
    (cr_labels / "labels.txt").write_bytes(b"cir\rcle\n" + "\n".join(SHAPES_CLASSES[1:]).encode())
    changed = _fake_run(tmp_path / "changed", model_file)  # a file edited after export
    (changed / "export" / "model_fp32.tflite").write_bytes(b"edited")
    entry = {"file": "model_fp32.tflite", "sha256": hashlib.sha256(b"exported").hexdigest()}
    (changed / "export" / "model.json").write_text(json.dumps({"artifacts": {"tflite": entry}}))
    edited = f"{changed / 'export' / 'model_fp32.tflite'} was changed after export"
    short_labels = _fake_run(tmp_path / "short_labels", model_file)
    (short_labels / "labels.txt").write_text("\n".join(SHAPES_CLASSES[:-1]) + "\n")
    train = ["train", "--model", "shiftvit", "--data", DATA]
    gone = str(_fake_run(tmp_path / "gone", model_file, data=f"npz:{tmp_path / 'moved.npz'}"))
    gone_line = f"npz file {tmp_path / 'moved.npz'} not found (the run's data, as "
    gone_line += f"{gone}/config.json names it): put it back there"
    return {
        # 11: the run's own data gone: named as the run's, with the command's way out
        "eval run's data gone": (["eval", gone], gone_line + ", or pass --data with data"),
        "export int8 run's data gone": (
            ["export", gone, "--format", "tflite-int8"],
            gone_line + ", or pass --calib-data with data",
        ),
        "verify run's data gone": (["verify", gone, "--models-only"], gone_line),
        "ship run's data gone": (["ship", gone, "--target", "android"], gone_line),
        # 1: data whose classes are not the run's is refused, not scored
        "eval other classes": (["eval", run, "--data", f"folder:{three}"], "3 classes"),
        "eval other order": (["eval", run, "--data", f"npz:{permuted}"], "has classes dots where"),
        "bench other classes": (["bench", run, "--data", f"folder:{three}"], "3 classes"),
        # 2: the report cannot be written: fail before the work
        "verify report is a folder": (["verify", str(verify_dir)], "it is a folder"),
        "bench report is a folder": (["bench", str(bench_dir)], "bench.json: it is a folder"),
        "verify read-only run": (["verify", ro_run], "Read-only file system"),
        "bench read-only run": (["bench", ro_run], "Read-only file system"),
        # 3: unusable output paths
        "train out under a file": ([*train, "--out", f"{a_file}/run"], "is a file, not a folder"),
        "train out read-only": ([*train, "--out", f"{read_only}/new"], "Read-only file system"),
        "export out under a file": (
            ["export", run, "--format", "tflite", "--out", f"{a_file}/exp"],
            "is a file, not a folder",
        ),
        "export out read-only": (
            ["export", run, "--format", "tflite", "--out", f"{read_only}/exp"],
            "Read-only file system",
        ),
        "export artifact is a folder": (
            ["export", str(tflite_dir), "--format", "tflite"],
            "model_fp32.tflite: it is a folder",
        ),
        # labels.txt that train would not write: refused before any conversion
        "export labels with a control character": (
            ["export", str(cr_labels), "--format", "tflite"],
            "labels.txt: class 0 name 'cir\\rcle' holds control character U+000D",
        ),
        "export labels of another count": (
            ["export", str(short_labels), "--format", "tflite,onnx"],
            "labels.txt has 9 class names but the model has 10 classes",
        ),
        # a file whose sha256 is not model.json's: refused before it is served or timed
        "bench file changed after export": (["bench", str(changed)], edited),
        "predict file changed after export": (
            ["predict", str(changed / "export" / "model_fp32.tflite"), "photo.png"],
            edited,
        ),
        "verify file changed after export": (["verify", str(changed), "--models-only"], edited),
        "verify layers file changed after export": (["verify", str(changed), "--layers"], edited),
        "demo out under a file": (["demo", "--out", f"{a_file}/demo"], "is a file, not a folder"),
        "demo out read-only": (["demo", "--out", f"{read_only}/demo"], "Read-only file system"),
        # 5: a resumed run keeps its settings but the total epochs
        "resume other batch size": (
            ["train", "--out", unfinished, "--resume", "--batch-size", "7"],
            "keeps the run's --batch-size 64",
        ),
        "resume other model": (
            ["train", "--out", unfinished, "--resume", "--model", "vit"],
            "keeps the run's --model shiftvit",
        ),
        "resume fewer epochs": (
            ["train", "--out", unfinished, "--resume", "--epochs", "2"],
            "fewer than the 3 epochs",
        ),
        "new run without model": (["train", "--data", DATA], "--model is required"),
        # 7: labels that skip values without class_names
        "npz labels with gaps": (
            ["train", "--model", "shiftvit", "--data", f"npz:{gaps}"],
            "no image of 5 of the labels 0..16",
        ),
        # 8, 10: argument checks
        "presets zero classes": (["presets", "--classes", "0"], "--classes: must be a positive"),
        "presets negative resolution": (["presets", "--resolution", "-32"], "positive integer"),
        "presets zero resolution": (["presets", "--resolution", "0"], "positive integer"),
        "train option typo": (["train", "--epochz", "3"], "see `toolkit train --help`"),
    }


CASES = [
    "eval run's data gone", "export int8 run's data gone", "verify run's data gone",
    "ship run's data gone", "eval other classes",
    "eval other order", "bench other classes",
    "verify report is a folder", "bench report is a folder", "verify read-only run",
    "bench read-only run", "train out under a file", "train out read-only",
    "export out under a file", "export out read-only", "export artifact is a folder",
    "export labels with a control character", "export labels of another count",
    "bench file changed after export", "predict file changed after export",
    "verify file changed after export", "verify layers file changed after export",
    "demo out under a file", "demo out read-only", "resume other batch size",
    "resume other model", "resume fewer epochs", "new run without model",
    "npz labels with gaps", "presets zero classes", "presets negative resolution",
    "presets zero resolution", "train option typo",
]  # fmt: skip


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in root.rglob("*")
    }


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, cases, tmp_path, capsys,
                                                         monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    argv, needle = cases[case]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("toolkit: error:")
    assert needle in err
    assert _tree(tmp_path) == before


# -- 5: resume without --model, --epochs as the new total; a real run for 1 and 9 -------------


class _Interrupt(Checkpoint):
    """Checkpoint that stops the run after its first epoch is saved, as a kill would."""

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        raise KeyboardInterrupt


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> tuple[Path, str]:
    """A 1-epoch run killed after its epoch, resumed by `toolkit train --out RUN --resume
    --epochs 2` (no --model); returns the run folder and what the resume printed. The killed
    run left its epoch's checkpoint, no model, and no lock held (resuming to the same total:
    tests/test_train.py's disk-full test)."""
    out = tmp_path_factory.mktemp("resume") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_module, "Checkpoint", _Interrupt)
        with pytest.raises(KeyboardInterrupt):
            train(TrainOptions("shiftvit", "tiny", DATA, epochs=1), out=out)
    assert epochs_done(out / "checkpoint") == 1 and not (out / "model.keras").exists()
    assert not (out / ".train.lock").exists()  # released by the interrupted run
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["train", "--out", str(out), "--resume", "--epochs", "2"])
    assert code == 0
    return out, printed.getvalue()


def test_resume_takes_the_model_from_the_run_and_epochs_as_the_new_total(resumed):
    out, printed = resumed
    assert "resuming" in printed and "shiftvit tiny" in printed
    assert "2 epochs in total (1 run)" in printed
    epochs = [row.split(",")[0] for row in (out / "history.csv").read_text().splitlines()[1:]]
    assert epochs == ["0", "1"]
    config = json.loads((out / "config.json").read_text())
    assert config["options"]["epochs"] == 2 and config["preset"]["train"]["epochs"] == 2
    assert json.loads((out / "metrics.json").read_text())["epochs_run"] == 2
    assert not (out / ".train.lock").exists()


def test_eval_on_data_with_the_run_classes_still_scores(resumed, capsys):
    out, _ = resumed
    assert main(["eval", str(out), "--data", "shapes:100"]) == 0
    assert "on shapes:100 (test split, 10 images): top-1" in capsys.readouterr().out


# -- 9: temp files of a killed export -----------------------------------------------------------


def test_export_removes_stale_temps_of_every_format(resumed):
    out, _ = resumed
    export = out / "export"
    export.mkdir(exist_ok=True)
    stale = [export / ".model_fp32.tflite.abcd_123.tflite", export / ".model.json.x1y2z3w4.json"]
    stale.append(export / ".model_fp16.tflite.abcd_123.tflite")  # a format not exported now
    kept = [export / ".model_fp16.tflite.abcd_12.tflite", export / ".notes.txt"]
    for path in stale + kept:
        path.write_bytes(b"left by a killed export")
    assert main(["export", str(out), "--format", "tflite"]) == 0
    assert (export / "model_fp32.tflite").stat().st_size > 1000
    assert [p.name for p in stale if p.exists()] == []
    assert [p.name for p in kept if p.exists()] == [p.name for p in kept]


# -- 6: folder data: hidden folders, undecodable images -------------------------------------------


def test_folder_skips_hidden_folders_and_names_undecodable_images_at_once(tmp_path, capsys):
    for name in ("a", "b"):
        for i in range(6):
            _png(tmp_path / name / f"{i}.png", seed=i)
    _png(tmp_path / "a" / ".ipynb_checkpoints" / "0-checkpoint.png")  # valid, but hidden
    (tmp_path / "b" / ".cache").mkdir()
    (tmp_path / "b" / ".cache" / "x.png").write_bytes(b"hidden junk")
    (tmp_path / "a" / "broken.png").write_bytes(b"not a png")
    (tmp_path / "b" / "sub").mkdir()
    (tmp_path / "b" / "sub" / "junk.jpg").write_bytes(b"not a jpeg")
    data = load_data(f"folder:{tmp_path}")
    assert len(data.y_train) + len(data.y_val) + len(data.y_test) == 12
    hidden, bad = capsys.readouterr().err.strip().splitlines()  # one line per kind
    assert hidden.startswith(f"toolkit: warning: skipped 2 hidden images in {tmp_path}")
    assert "a/.ipynb_checkpoints/0-checkpoint.png" in hidden and "b/.cache/x.png" in hidden
    assert bad.startswith("toolkit: warning: skipped 2 of 14 images")
    assert "a/broken.png" in bad and "b/sub/junk.jpg" in bad and ".cache" not in bad


def test_folder_warns_of_a_hidden_class_folder(tmp_path, capsys):
    """A class folder renamed `.c` (or a `.ipynb_checkpoints/` beside the classes) is skipped
    with one warning naming it and the count, not dropped unnoticed."""
    for name in ("a", "b", ".c", ".d"):
        for i in range(6):
            _png(tmp_path / name / f"{i}.png", seed=i)
    assert load_data(f"folder:{tmp_path}").class_names == ["a", "b"]
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"toolkit: warning: skipped 2 hidden class folders in {tmp_path}")
    assert ": .c, .d (rename them" in err and "\n" not in err


def test_folder_size_over_the_bound_is_refused_before_anything_is_written(tmp_path, capsys):
    """`folder:DIR@100000` (1800 GB decoded) stalled for minutes in a half-made run folder."""
    for name in ("a", "b"):
        for i in range(6):
            _png(tmp_path / "data" / name / f"{i}.png", seed=i)
    before = _tree(tmp_path)
    argv = ["train", "--model", "shiftvit", "--preset", "tiny", "--out", str(tmp_path / "run")]
    assert main([*argv, "--data", f"folder:{tmp_path / 'data'}@100000"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("toolkit: error: folder image size 100000 is too large") and (
        "use at most 4096" in err and "\n" not in err
    )
    assert _tree(tmp_path) == before
    assert load_data(f"folder:{tmp_path / 'data'}@4096,stream").image_shape == (4096, 4096, 3)


def test_folder_class_without_a_decodable_image_is_refused(tmp_path):
    for i in range(10):
        _png(tmp_path / "a" / f"{i}.png", seed=i)
        (tmp_path / "b").mkdir(exist_ok=True)
        (tmp_path / "b" / f"{i}.png").write_bytes(b"junk")
    with pytest.raises(UsageError, match="class folder .*b has no image that can be decoded"):
        load_data(f"folder:{tmp_path}")


# -- 7: npz labels with gaps are fine when class_names names every index --------------------------


def test_npz_labels_with_gaps_load_when_class_names_are_given(tmp_path):
    path = tmp_path / "named.npz"
    names = np.array([f"c{i}" for i in range(17)])
    np.savez(
        path, x=np.zeros((48, 32, 32, 3), np.uint8), y=5 + np.arange(48) % 12, class_names=names
    )
    assert load_data(f"npz:{path}").num_classes == 17
