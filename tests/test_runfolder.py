"""The run folder: config.json must describe a toolkit model, and model.keras must be that model."""

import json

import keras
import numpy as np
import pytest
from PIL import Image

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.data import load_data
from toolkit.models import MODELS, build_model, get_preset
from toolkit.runfiles.data import load_split, run_dataset
from toolkit.runfiles.folder import open_run
from toolkit.runmodel import load_run_model

DATA = "shapes:300"


def _config(model: str = "shiftvit") -> dict:
    """What `toolkit train` writes for a tiny run on DATA (the keys later stages read)."""
    data = load_data(DATA)
    return {
        "options": {"model": model, "preset": "tiny", "data": DATA, "seed": 0},
        "preset": get_preset(model, "tiny").to_dict(),
        "dataset": {"image_shape": list(data.image_shape), "num_classes": data.num_classes},
        "preprocessing": MODELS[model].preprocessing,
    }, data


def _run_folder(path, model: keras.Model, config: dict, class_names: list[str]):
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    (path / "labels.txt").write_text("\n".join(class_names) + "\n")
    model.save(path / "model.keras")
    return path


@pytest.fixture(scope="module")
def foreign_run(tmp_path_factory):
    """A Flatten + Dense model.keras of another program, beside a valid config.json."""
    config, data = _config()
    foreign = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Flatten(),
            keras.layers.Dense(data.num_classes),
        ]
    )
    root = tmp_path_factory.mktemp("foreign")
    return _run_folder(root / "run", foreign, config, data.class_names)


def test_a_toolkit_model_opens_and_loads(tmp_path):
    config, data = _config("vit-lsa")
    preset = get_preset("vit-lsa", "tiny")
    model = build_model(preset, data.image_shape, data.num_classes)
    run = open_run(_run_folder(tmp_path / "run", model, config, data.class_names))
    assert load_run_model(run).output_shape == (None, data.num_classes)


def test_another_programs_model_is_refused_naming_why(foreign_run):
    run = open_run(foreign_run)  # config.json itself is fine
    with pytest.raises(UsageError) as caught:
        load_run_model(run)
    message = str(caught.value)
    assert "not the shiftvit model config.json describes" in message
    assert "Flatten" in message and "Rescaling 'rescale'" in message
    assert "toolkit train --model shiftvit" in message and "\n" not in message


def test_a_model_of_other_classes_is_refused(tmp_path):
    config, data = _config("vit-lsa")
    model = build_model(get_preset("vit-lsa", "tiny"), data.image_shape, data.num_classes + 1)
    run = open_run(_run_folder(tmp_path / "run", model, config, data.class_names))
    with pytest.raises(UsageError, match=rf"not {data.num_classes} class logits"):
        load_run_model(run)


@pytest.mark.parametrize(
    "command", (["eval"], ["export", "--format", "onnx"], ["verify"], ["bench"])
)
def test_commands_refuse_another_programs_model_in_one_line(foreign_run, command, capsys):
    argv = [command[0], str(foreign_run), *command[1:]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("toolkit: error: ") and "\n" not in err
    assert "not the shiftvit model" in err
    assert not (foreign_run / "export").exists()


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda c: c.pop("dataset"), "no dataset.image_shape"),
        (lambda c: c["options"].pop("preset"), "no options.preset"),
        (lambda c: c["options"].update(model="resnet"), "'resnet' is not one of"),
        (lambda c: c["dataset"].update(image_shape=[32, 32]), "not [height, width, channels]"),
        (lambda c: c["dataset"].update(num_classes=0), "not a positive integer"),
    ],
)
def test_a_config_that_does_not_describe_a_toolkit_model_is_refused(
    foreign_run, tmp_path, edit, named
):
    config = json.loads((foreign_run / "config.json").read_text())
    edit(config)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(config))
    (run / "model.keras").write_bytes((foreign_run / "model.keras").read_bytes())
    with pytest.raises(UsageError, match="does not describe a toolkit model") as caught:
        open_run(run)
    assert named in str(caught.value) and "toolkit train" in str(caught.value)


def test_load_split_is_the_runs_split_as_float32_and_refuses_other_classes(foreign_run, tmp_path):
    run = open_run(foreign_run)
    data = load_data(DATA, seed=run.seed)
    for split in ("train", "val", "test"):
        images, labels, spec = load_split(run, split)
        assert spec == DATA and images.dtype == np.float32
        np.testing.assert_array_equal(images, getattr(data, f"x_{split}"))
        np.testing.assert_array_equal(labels, getattr(data, f"y_{split}"))
    other = tmp_path / "other.npz"
    names = np.array(["a", "b", "c"])
    np.savez(other, x=np.zeros((30, 32, 32, 3), np.uint8), y=np.arange(30) % 3, class_names=names)
    with pytest.raises(UsageError, match="has 3 classes"):
        load_split(run, "test", f"npz:{other}")
    assert run_dataset(run, f"npz:{other}")[0].class_names == ["a", "b", "c"]  # calibration


def _pixel_model(classes: int) -> keras.Model:
    """A model of the toolkit's shape (a Rescaling 'rescale' front, logits out) that tells the
    classes apart: logit j = 40 j v - 400 j^2 = v^2 - (v - 20 j)^2 for mean pixel v, so it
    predicts class round(v / 20): an image of value 20 * i is class i."""
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Rescaling(1.0, name="rescale")(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    dense = keras.layers.Dense(classes)
    model = keras.Model(inputs, dense(x))
    j = np.arange(classes, dtype=np.float32)
    kernel = np.zeros((3, classes), np.float32)
    kernel[0] = 40 * j
    dense.set_weights([kernel, -400 * j**2])
    return model


def test_a_folder_of_the_runs_classes_is_relabelled_by_name_and_scored(tmp_path, capsys):
    """A folder lists the run's classes sorted, not in the run's order: its labels are mapped
    by name, so a model that tells the classes apart scores 100% (an untrained model, which
    predicts one class for every image, scored the same whether they were mapped or not)."""
    config, data = _config("shiftvit")
    model = _pixel_model(data.num_classes)
    run = _run_folder(tmp_path / "run", model, config, data.class_names)
    assert data.class_names != sorted(data.class_names)  # a folder lists them otherwise
    folder = tmp_path / "folder"
    for index, name in enumerate(data.class_names):  # each image's value: its run index
        (folder / name).mkdir(parents=True)
        for i in range(3):
            image = np.full((32, 32, 3), 20 * index, np.uint8)
            Image.fromarray(image).save(folder / name / f"{i}.png")
    images, labels, _ = load_split(open_run(run), "test", f"folder:{folder}")
    np.testing.assert_array_equal(images[:, 0, 0, 0], 20 * labels)
    predicted = np.argmax(load_run_model(open_run(run)).predict(images, verbose=0), axis=1)
    assert len(set(predicted)) == data.num_classes  # not a model of one answer
    np.testing.assert_array_equal(predicted, labels)  # image by image, by class name
    as_listed = load_data(f"folder:{folder}", seed=0).y_test  # the folder's sorted order
    assert np.mean(predicted == as_listed) < 0.5  # unmapped labels would not score 100%
    assert main(["eval", str(run), "--data", f"folder:{folder}"]) == 0
    out = capsys.readouterr().out
    assert "test split, 10 images" in out and "top-1 100.00%" in out
    (folder / data.class_names[0]).rename(folder / "other")  # a name differs: refused
    with pytest.raises(UsageError, match="has classes other where the run has circle"):
        load_split(open_run(run), "test", f"folder:{folder}")


def test_labels_txt_is_read_line_by_line_and_checked_as_train_checks_names(tmp_path):
    """Only a newline ends a line (a CR inside a name split it in two: 11 names for 10 classes);
    a name with a control character, or another count, is refused naming the way out."""
    from toolkit.runfiles.folder import labels_text, read_labels

    path = tmp_path / "labels.txt"
    path.write_text(labels_text(["a b", "c"]))
    assert read_labels(path, 2, "retrain") == ["a b", "c"]
    path.write_bytes(b"a\nc")  # no final newline: the same names
    assert read_labels(path, 2, "retrain") == ["a", "c"]
    for content, words in (
        (b"cir\rcle\nc\n", "class 0 name 'cir\\rcle' holds control character U+000D"),
        (b"a\r\nc\r\n", "class 0 name 'a\\r' holds control character U+000D"),
        (b"a\nb\x0bc\n", "class 1 name 'b\\x0bc' holds control character U+000B"),
        (b"a\n", "has 1 class names but the model has 2 classes"),
        (b"a\nb\nc\n", "has 3 class names but the model has 2 classes"),
        (b"a\n\xff\n", "cannot be read"),
    ):
        path.write_bytes(content)
        with pytest.raises(UsageError) as caught:
            read_labels(path, 2, "retrain the run")
        assert words in str(caught.value) and str(caught.value).endswith("or retrain the run")


def test_a_file_is_hashed_once_per_command_until_it_changes(tmp_path, monkeypatch):
    """bench hashes a file to check it against model.json and again for its top-1 cache key:
    the bytes are read once; a change (new mtime, or a file changed just now) is read again."""
    import hashlib
    import os

    from toolkit.runfiles import hashes as manifest

    reads, real = [], hashlib.sha256
    monkeypatch.setattr(manifest.hashlib, "sha256", lambda: reads.append(1) or real())
    path = tmp_path / "model.tflite"
    path.write_bytes(b"a" * 100)
    os.utime(path, ns=(10**18, 10**18))  # settled long ago
    first = manifest.sha256(path)
    assert manifest.sha256(path) == first == real(b"a" * 100).hexdigest()
    assert len(reads) == 1
    path.write_bytes(b"b" * 100)  # same size, changed just now: read every time
    assert manifest.sha256(path) == manifest.sha256(path) == real(b"b" * 100).hexdigest()
    assert len(reads) == 3
