"""`toolkit predict`: top-k output, image decoding and resizing, labels lookup, errors."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import keras
import numpy as np
import onnx
import pytest
import tensorflow as tf
import tf2onnx
from blockers import blocker_code

from toolkit.common.errors import UsageError
from toolkit.data.images import load_image
from toolkit.export.onnx_mobile import fix_batch, optimized
from toolkit.models import build_model, get_preset
from toolkit.predict import add_arguments, run, softmax
from toolkit.runfiles.hashes import sha256
from toolkit.training.options import TrainOptions

NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^(?P<image>\S+): (?P<top>\S+ \d\.\d\d(, \S+ \d\.\d\d)*)$")


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> tuple[keras.Model, Path]:
    """RUN/model.keras, RUN/labels.txt, RUN/export/model.{tflite,onnx,ort} (no metadata: their
    names come from RUN/export/model.json's labels.txt) and a few images."""
    keras.utils.set_random_seed(1)
    model = build_model(get_preset("shiftvit", "tiny"), (32, 32, 3), len(NAMES))
    root = tmp_path_factory.mktemp("run")
    model.save(root / "model.keras")
    (root / "labels.txt").write_text("\n".join(NAMES) + "\n")
    (root / "config.json").write_text(json.dumps(run_config(len(NAMES))))  # a run folder
    (root / "export").mkdir()
    (root / "export" / "labels.txt").write_text("\n".join(NAMES) + "\n")
    listed = {fmt: {"file": f"model.{fmt}"} for fmt in ("tflite", "onnx", "ort")}
    (root / "export" / "model.json").write_text(json.dumps({"artifacts": listed}))
    tflite = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    (root / "export" / "model.tflite").write_bytes(tflite)
    signature = [tf.TensorSpec((None, 32, 32, 3), tf.float32, name="image")]
    tf2onnx.convert.from_keras(
        model, input_signature=signature, opset=17, output_path=str(root / "export/model.onnx")
    )
    # an ONNX Runtime format file at batch 1, as onnx-mobile writes (predict calls it per image)
    fixed = onnx.load(str(root / "export/model.onnx"))
    fix_batch(fixed)
    onnx.save(fixed, str(root / "model_b1.onnx"))
    optimized(root / "model_b1.onnx", root / "export/model.ort", "ORT")
    rng = np.random.default_rng(0)
    images = {  # name: (height, width, channels); decoded to RGB and resized to 32x32
        "rgb.png": (32, 32, 3),
        "gray.png": (50, 40, 1),
        "rgba.png": (20, 24, 4),
        "photo.jpg": (64, 48, 3),
    }
    for name, shape in images.items():
        pixels = rng.integers(0, 256, shape, dtype=np.uint8)
        encode = tf.io.encode_jpeg if name.endswith(".jpg") else tf.io.encode_png
        tf.io.write_file(str(root / name), encode(pixels))
    return model, root


def run_config(classes: int) -> dict:
    """config.json of a tiny ShiftViT run of `classes` classes on 32x32 images."""
    return {
        "options": asdict(TrainOptions("shiftvit", "tiny", "shapes")),
        "preset": get_preset("shiftvit", "tiny").to_dict(),
        "dataset": {"image_shape": [32, 32, 3], "num_classes": classes},
    }


def predict(*argv: str | Path) -> None:
    """Parse like the CLI will, then run; UsageError propagates."""
    parser = argparse.ArgumentParser(prog="toolkit predict")
    add_arguments(parser)
    assert run(parser.parse_args([str(a) for a in argv])) == 0


def parse(out: str) -> dict[str, list[tuple[str, float]]]:
    """{image: [(class, probability), ...]} from predict's stdout, checking every line."""
    result = {}
    for line in out.splitlines():
        match = LINE.match(line)
        assert match, line
        pairs = [item.rsplit(" ", 1) for item in match["top"].split(", ")]
        result[match["image"]] = [(name, float(p)) for name, p in pairs]
    return result


def images_of(root: Path) -> list[Path]:
    return sorted(root.glob("*.png")) + sorted(root.glob("*.jpg"))


@pytest.mark.parametrize(
    "artifact", ["model.keras", "export/model.tflite", "export/model.onnx", "export/model.ort"]
)
def test_predict_top_k_with_labels(run_folder, artifact, capsys):
    """Every artifact gives the Keras model's top classes, named by the folder that lists it."""
    model, root = run_folder
    images = images_of(root)
    predict(root / artifact, *images, "--top-k", "3")
    result = parse(capsys.readouterr().out)
    assert list(result) == [str(p) for p in images]
    x = np.stack([load_image(p, 32) for p in images]).astype(np.float32)
    expected = softmax(model.predict_on_batch(x))
    for path, probabilities in zip(images, expected, strict=True):
        top = result[str(path)]
        assert [name for name, _ in top] == [NAMES[i] for i in np.argsort(-probabilities)[:3]]
        np.testing.assert_allclose([p for _, p in top], np.sort(probabilities)[::-1][:3], atol=6e-3)


def test_predict_without_labels_prints_indices_and_clips_k(run_folder, tmp_path, capsys):
    alone = tmp_path / "a" / "b"
    alone.mkdir(parents=True)
    shutil.copy(run_folder[1] / "export" / "model.tflite", alone / "model.tflite")
    image = run_folder[1] / "gray.png"
    predict(alone / "model.tflite", image, "--top-k", "50", "--runtime", "litert")
    top = parse(capsys.readouterr().out)[str(image)]
    assert sorted(name for name, _ in top) == sorted(str(i) for i in range(10))
    assert [p for _, p in top] == sorted((p for _, p in top), reverse=True)
    assert abs(sum(p for _, p in top) - 1) < 0.05


def test_predict_default_top_k_is_five(run_folder, capsys):
    predict(run_folder[1] / "export" / "model.onnx", run_folder[1] / "rgb.png")
    assert len(next(iter(parse(capsys.readouterr().out).values()))) == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["TMP/missing.onnx", "RUN/rgb.png"], "missing.onnx not found"),
        (["TMP/model.txt", "RUN/rgb.png"], "model.txt is not a .keras, .tflite, .onnx, .ort file"),
        (["TMP/bad.tflite", "RUN/rgb.png"], "bad.tflite could not be loaded by litert"),
        (["TMP/bad.onnx", "RUN/rgb.png"], "bad.onnx could not be loaded by ort-cpu"),
        (["RUN/export/model.onnx", "TMP/bad.png"], "cannot decode image .*bad.png"),
        (["RUN/export/model.onnx", "RUN/rgb.png", "TMP/no.jpg"], "cannot read image .*no.jpg"),
        (["RUN/model.keras", "RUN/rgb.png", "--top-k", "0"], "--top-k must be at least 1"),
        (["RUN/model.keras", "RUN/rgb.png", "--runtime", "litrt"], "did you mean 'litert'"),
        (["RUN/export/model.onnx", "RUN/rgb.png", "--runtime", "keras"], "keras opens .keras"),
    ],
)
def test_predict_errors(run_folder, tmp_path, argv, message, capsys):
    """One-line UsageErrors naming the file, and nothing printed on stdout."""
    for name in ("model.txt", "bad.tflite", "bad.onnx", "bad.png"):
        (tmp_path / name).write_bytes(b"\x89PNG garbage")
    folders = {"TMP": str(tmp_path), "RUN": str(run_folder[1])}
    argv = [re.sub(r"^(TMP|RUN)", lambda m: folders[m[1]], a) for a in argv]
    with pytest.raises(UsageError, match=message) as info:
        predict(*argv)
    assert "\n" not in str(info.value)
    assert capsys.readouterr().out == ""


def test_predict_rejects_labels_of_another_model(run_folder, tmp_path):
    shutil.copy(run_folder[1] / "export" / "model.onnx", tmp_path / "model.onnx")
    (tmp_path / "labels.txt").write_text("cat\ndog\n")
    listing = {"artifacts": {"onnx": {"file": "model.onnx"}}}  # the folder lists the file
    (tmp_path / "model.json").write_text(json.dumps(listing))
    with pytest.raises(UsageError, match="labels.txt has 2 class names but the model has 10"):
        predict(tmp_path / "model.onnx", run_folder[1] / "rgb.png")


# -- on a device: numpy, pillow and the runtimes, no TensorFlow, Keras or JAX --

DEVICE_LACKS = ("tensorflow", "tf_keras", "keras", "jax", "jaxlib", "tf2onnx", "onnx")


def test_predict_runs_the_exported_files_where_keras_cannot_import(run_folder, tmp_path):
    """`toolkit predict` of a .tflite or .onnx on a machine without TensorFlow, Keras or JAX
    gives the classes it gives here; a .keras file is refused in one line naming the way out."""
    _, root = run_folder
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(blocker_code(DEVICE_LACKS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}

    def on_device(*argv: Path | str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "toolkit.cli.main", "predict", *map(str, argv)]
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)

    probe = subprocess.run([sys.executable, "-c", "import keras"], capture_output=True, env=env)
    assert probe.returncode != 0  # the blocker holds in a fresh interpreter
    for name in ("model.tflite", "model.onnx"):
        device = on_device(root / "export" / name, root / "rgb.png", "--top-k", "3")
        assert device.returncode == 0, device.stderr[-2000:]
        here = subprocess.run(
            [sys.executable, "-m", "toolkit.cli.main", "predict", str(root / "export" / name)]
            + [str(root / "rgb.png"), "--top-k", "3"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert device.stdout == here.stdout and LINE.match(device.stdout.strip())
    refused = on_device(root / "model.keras", root / "rgb.png")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "needs Keras and a backend" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_predict_refuses_a_file_changed_after_export(run_folder, tmp_path, capsys):
    """A file whose sha256 is not the one model.json beside it records (changed after export)
    gave other classes without a word: refused in one line naming the export command that
    rewrites it; --allow-modified runs it with one warning."""
    folder = tmp_path / "export"
    folder.mkdir()
    onnx_file = Path(shutil.copy(run_folder[1] / "export" / "model.onnx", folder / "model.onnx"))
    entry = {"file": "model.onnx", "format": "onnx", "sha256": sha256(onnx_file)}
    manifest = {"source_run": str(tmp_path), "artifacts": {"onnx": entry}}
    (folder / "model.json").write_text(json.dumps(manifest))
    image = run_folder[1] / "rgb.png"
    predict(onnx_file, image)  # as exported
    assert capsys.readouterr().err == ""
    entry["sha256"] = "0" * 64  # model.json recorded other bytes than the file holds now
    (folder / "model.json").write_text(json.dumps(manifest))
    with pytest.raises(UsageError) as caught:
        predict(onnx_file, image)
    message = str(caught.value)
    assert message.startswith(f"{onnx_file} was changed after export") and "\n" not in message
    assert f"(`toolkit export {tmp_path} --format onnx`)" in message
    assert message.endswith("or pass --allow-modified to use it as it is")
    assert capsys.readouterr().out == ""
    predict(onnx_file, image, "--allow-modified")
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{image}: ")
    assert captured.err.startswith(f"toolkit: warning: {onnx_file} was changed after export")
    assert len(captured.err.strip().splitlines()) == 1


def test_predict_refuses_a_file_its_model_json_does_not_record(run_folder, tmp_path, capsys):
    """A model.json beside the file that does not list it (emptied to `{}`, or the file put
    there by hand) cannot vouch for its bytes: refused as a changed file is, in one line;
    --allow-modified runs it with one warning."""
    folder = tmp_path / "export"
    folder.mkdir()
    onnx_file = Path(shutil.copy(run_folder[1] / "export" / "model.onnx", folder / "model.onnx"))
    (folder / "model.json").write_text("{}")
    image = run_folder[1] / "rgb.png"
    with pytest.raises(UsageError) as caught:
        predict(onnx_file, image)
    message = str(caught.value)
    assert message.startswith(f"{onnx_file} is not among the files model.json beside it records")
    assert "its sha256 cannot be checked" in message and "\n" not in message
    assert message.endswith("or pass --allow-modified to use it as it is")
    predict(onnx_file, image, "--allow-modified")
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{image}: ")
    assert captured.err.startswith(f"toolkit: warning: {onnx_file} is not among the files")
    assert len(captured.err.strip().splitlines()) == 1


def test_predict_refuses_a_run_model_that_is_not_the_runs(run_folder, tmp_path):
    """RUN/model.keras is the model its config.json describes, or predict refuses it as eval
    and export do (here config.json says 11 classes, the model has 10)."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(run_folder[1] / "model.keras", run / "model.keras")
    (run / "labels.txt").write_text("\n".join([*NAMES, "extra"]) + "\n")
    (run / "config.json").write_text(json.dumps(run_config(len(NAMES) + 1)))
    with pytest.raises(UsageError, match="is not the shiftvit model config.json describes"):
        predict(run / "model.keras", run_folder[1] / "rgb.png")
