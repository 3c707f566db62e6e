"""Class names by one rule (toolkit/runfiles/classnames.py): the file's own metadata, then the
folder that lists it, else the indices; never a labels.txt from elsewhere, never a name
guessed from a data file's name (issue 58). And predict's refusals of a changed file or an
unreadable model.json beside it, naming the folder it was given."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.data import load_data
from toolkit.runfiles.classnames import class_names_of
from toolkit.runfiles.folder import EXPORT_DIR, LABELS_FILE, MANIFEST_FILE

NAMES = ["ant", "bee", "cow"]
OTHER = ["x", "y", "z"]


def _lines(names: list[str]) -> str:
    return "\n".join(names) + "\n"


def _packed_tflite(path: Path, names: list[str] | None) -> Path:
    """A stand-in .tflite: bytes, then (names given) labels.txt packed as a zip after them, as
    the metadata writers pack it; the rule reads only the packed file."""
    archive = io.BytesIO()
    if names is not None:
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr(LABELS_FILE, _lines(names))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x1c\x00\x00\x00TFL3 flatbuffer" + archive.getvalue())
    return path


def _listing(folder: Path, file: str, class_names: list[str] | None = None) -> None:
    """FOLDER/model.json with an entry for `file` (and class_names, where given)."""
    manifest: dict = {"artifacts": {"tflite": {"file": file}}}
    if class_names is not None:
        manifest["class_names"] = class_names
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))


# -- the rule --


def test_packed_names_win_over_every_labels_txt(tmp_path):
    """A .tflite's packed labels first: over its listing folder's model.json and labels.txt,
    and over a labels.txt one folder up."""
    model = _packed_tflite(tmp_path / "export" / "m.tflite", NAMES)
    _listing(model.parent, "m.tflite", OTHER)
    (model.parent / LABELS_FILE).write_text(_lines(OTHER))
    (tmp_path / LABELS_FILE).write_text(_lines(OTHER))
    assert class_names_of(model, 3) == NAMES


def test_labels_txt_of_a_folder_that_does_not_list_the_file_is_never_read(tmp_path):
    """Without names of its own: a labels.txt one folder up, beside it with no model.json, or
    beside it in a folder whose model.json lists other files, gives the indices."""
    model = _packed_tflite(tmp_path / "a" / "b" / "m.tflite", None)
    (tmp_path / "a" / LABELS_FILE).write_text(_lines(OTHER))
    assert class_names_of(model, 3) == ["0", "1", "2"]
    (model.parent / LABELS_FILE).write_text(_lines(OTHER))
    assert class_names_of(model, 3) == ["0", "1", "2"]
    _listing(model.parent, "another.tflite", OTHER)
    assert class_names_of(model, 3) == ["0", "1", "2"]


def test_the_listing_folder_names_a_file_without_names_of_its_own(tmp_path):
    """model.json's class_names, else its folder's labels.txt; a run folder's labels.txt for
    its model.keras (config.json marks the run folder)."""
    model = _packed_tflite(tmp_path / "export" / "m.tflite", None)
    (model.parent / LABELS_FILE).write_text(_lines(OTHER))
    _listing(model.parent, "m.tflite")
    assert class_names_of(model, 3) == OTHER
    _listing(model.parent, "m.tflite", NAMES)
    assert class_names_of(model, 3) == NAMES
    keras_file = tmp_path / "model.keras"
    keras_file.write_bytes(b"a zip")
    (tmp_path / LABELS_FILE).write_text(_lines(NAMES))
    assert class_names_of(keras_file, 3) == ["0", "1", "2"]  # no config.json: no run folder
    (tmp_path / "config.json").write_text("{}")
    assert class_names_of(keras_file, 3) == NAMES


def test_names_of_another_count_are_refused_naming_where_they_came_from(tmp_path):
    model = _packed_tflite(tmp_path / "m.tflite", NAMES)
    with pytest.raises(UsageError, match=r"labels.txt packed in .*m.tflite has 3 class names"):
        class_names_of(model, 10)
    bare = _packed_tflite(tmp_path / "e" / "m.tflite", None)
    _listing(bare.parent, "m.tflite", NAMES)
    with pytest.raises(UsageError, match=r"model.json class_names has 3 class names"):
        class_names_of(bare, 10)


# -- npz data names no class from its file name --


def test_npz_without_class_names_gets_indices_said_once(tmp_path, capsys):
    """`my_cifar10_digits.npz` without class_names got CIFAR-10's names, guessed from the file
    name: it gets 0..9, said in one line however often it loads."""
    rng = np.random.default_rng(0)
    path = tmp_path / "my_cifar10_digits.npz"
    np.savez(path, x=rng.integers(0, 256, (40, 8, 8, 3), dtype=np.uint8), y=np.arange(40) % 10)
    assert load_data(f"npz:{path}").class_names == [str(i) for i in range(10)]
    assert load_data(f"npz:{path}", seed=1).class_names == [str(i) for i in range(10)]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no class_names" in err[0] and "0..9" in err[0]
    named = tmp_path / "named.npz"
    np.savez(named, x=np.zeros((30, 8, 8, 3), np.uint8), y=np.arange(30) % 3, class_names=NAMES)
    assert load_data(f"npz:{named}").class_names == NAMES
    assert capsys.readouterr().err == ""


# -- predict on the files `toolkit export` writes --


@pytest.fixture(scope="module")
def exported(tiny_runs) -> Path:
    """The shared tiny run, exported to every format (read-only: tests copy what they change)."""
    return tiny_runs.exported("shiftvit")


@pytest.fixture(scope="module")
def picture(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pictures") / "photo.png"
    pixels = np.random.default_rng(3).integers(0, 256, (40, 40, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


def _predict(capsys, *argv: str | Path) -> tuple[int, str, str]:
    code = main(["predict", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _tamper(onnx_file: Path) -> None:
    """Change the file's bytes, not its use: a doc_string field (6) appended to the ModelProto
    (protobuf keeps the last), so ONNX Runtime still runs it."""
    onnx_file.write_bytes(onnx_file.read_bytes() + b"\x32\x07changed")


def _top_names(out: str) -> list[str]:
    """The class names of predict's one output line."""
    return [pair.rsplit(" ", 1)[0] for pair in out.strip().split(": ", 1)[1].split(", ")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("file", "runtime"),
    [
        ("model_fp32.tflite", "litert"),
        ("model_fp32.tflite", "mediapipe"),
        ("model.onnx", "ort-cpu"),
        ("model.ort", "ort-cpu"),
    ],
)
def test_a_file_copied_out_of_its_folder_prints_its_own_names(
    exported, picture, tmp_path, capsys, file, runtime
):
    """A lone .tflite printed indices although it packs its labels (MediaPipe names them), and
    an unrelated labels.txt one folder up named its classes: the file's own names, on every
    runtime, as in its export folder."""
    names = (exported / LABELS_FILE).read_text().splitlines()
    lone = tmp_path / "device" / "models"
    lone.mkdir(parents=True)
    shutil.copy(exported / EXPORT_DIR / file, lone / file)
    (lone.parent / LABELS_FILE).write_text(_lines([f"wrong{i}" for i in range(len(names))]))
    argv = (picture, "--top-k", str(len(names)), "--runtime", runtime)
    code, out, err = _predict(capsys, lone / file, *argv)
    assert code == 0, err
    assert sorted(_top_names(out)) == sorted(names)
    _, in_folder, _ = _predict(capsys, exported / EXPORT_DIR / file, *argv)
    assert out.split(": ", 1)[1] == in_folder.split(": ", 1)[1]


@pytest.mark.slow
def test_a_changed_file_in_a_copied_run_names_the_copy(exported, picture, tmp_path, capsys):
    """The way out named the original run (`toolkit export ORIGINAL --format onnx --out
    COPY/export`); bench and verify name the copy, and so does predict."""
    copy = shutil.copytree(exported, tmp_path / "copy")
    changed = copy / EXPORT_DIR / "model.onnx"
    _tamper(changed)
    code, out, err = _predict(capsys, changed, picture)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"(`toolkit export {copy} --format onnx`)" in err
    assert str(exported) not in err


@pytest.mark.slow
def test_an_unreadable_model_json_beside_the_file_is_refused(exported, picture, tmp_path, capsys):
    """A truncated model.json skipped the sha256 check (a changed model.onnx predicted without a
    word): refused in one line naming the file and the export command, as bench refuses it."""
    copy = shutil.copytree(exported, tmp_path / "copy")
    manifest = copy / EXPORT_DIR / MANIFEST_FILE
    manifest.write_text(manifest.read_text()[:200])
    changed = copy / EXPORT_DIR / "model.onnx"
    _tamper(changed)
    alone = Path(shutil.copy(changed, tmp_path / "model.onnx"))
    assert _predict(capsys, alone, picture)[0] == 0  # it runs: only the check refuses it
    code, out, err = _predict(capsys, changed, picture)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{manifest} is unreadable" in err
    assert f"`toolkit export {copy} --format all`" in err
    assert "Traceback" not in err
