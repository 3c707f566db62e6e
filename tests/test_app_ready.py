"""App-ready .tflite files (issue 36): every file loads and classifies in MediaPipe Tasks'
ImageClassifier, the client Android, iOS and the web share, with the run's class names and
probabilities; the full-int8 file takes the uint8 pixels a camera gives.

MediaPipe is the proof: it refuses a float file without NormalizationOptions metadata and an
int8 input or output, so a file it loads carries the metadata and the app's types.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tiny_runs import PROVENANCE

from toolkit.export.metadata import (
    FILE_IDENTIFIER,
    LABELS_FILE,
    METADATA_NAME,
    packed_files,
    read_metadata,
)
from toolkit.export.tflite import packed_model
from toolkit.formats import FORMATS
from toolkit.runfiles.hashes import sha256
from toolkit.runfiles.manifest import read_manifest
from toolkit.runtimes import open_artifact
from toolkit.runtimes.base import close_session

vision = pytest.importorskip("mediapipe.tasks.python.vision")
mp = pytest.importorskip("mediapipe")
from mediapipe.tasks.metadata.metadata_schema_py_generated import ModelMetadata  # noqa: E402
from mediapipe.tasks.python import BaseOptions  # noqa: E402  (after the skip)

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT.parent / "shared" / "data" / "cifar10_train_sample.npz"
MODELS = ("shiftvit", "vit-lsa")
IMAGES = 64  # real images classified per file (the issue asks for >= 50)
# every format an app loads (a .tflite): the .onnx ones have their own tests (test_export.py)
APP_FORMATS = ",".join(n for n, f in FORMATS.items() if f.filename.endswith(".tflite"))
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not SAMPLE.is_file(), reason="shared CIFAR-10 sample not present"),
]


@pytest.fixture(scope="module", params=MODELS)
def app_export(request, tiny_runs) -> tuple[Path, dict, np.ndarray]:
    """The shared tiny run's export folder (read-only: 1 epoch on synthetic shapes, with
    PROVENANCE, every format exported), its model.json, and IMAGES uint8 images of the real
    sample (what an app's camera gives, whatever the model learned)."""
    folder = tiny_runs.exported(request.param) / "export"
    return folder, read_manifest(folder).to_json(), np.load(SAMPLE)["x"][-IMAGES:]


def _tflite_entries(manifest: dict) -> dict[str, dict]:
    return {f: e for f, e in manifest["artifacts"].items() if e["file"].endswith(".tflite")}


def _classifier(path: Path):
    options = vision.ImageClassifierOptions(
        base_options=BaseOptions(model_asset_path=str(path)), max_results=-1
    )
    return vision.ImageClassifier.create_from_options(options)


def _mediapipe_scores(path: Path, images: np.ndarray, names: list[str]) -> np.ndarray:
    """(N, classes) scores MediaPipe gives, ordered by class index via category_name."""
    scores = np.full((len(images), len(names)), np.nan)
    with _classifier(path) as classifier:
        for i, pixels in enumerate(images):
            image = mp.Image(image_format=mp.ImageFormat.SRGB, data=np.ascontiguousarray(pixels))
            categories = classifier.classify(image).classifications[0].categories
            assert sorted(c.category_name for c in categories) == sorted(names)
            for c in categories:
                scores[i, names.index(c.category_name)] = c.score
    return scores


def test_every_tflite_file_classifies_in_mediapipe_as_the_litert_adapter_does(app_export):
    folder, manifest, images = app_export
    names = manifest["class_names"]
    entries = _tflite_entries(manifest)
    assert len(entries) == 5
    for fmt, entry in entries.items():
        path = folder / entry["file"]
        scores = _mediapipe_scores(path, images, names)
        np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=0.01, err_msg=fmt)
        litert = open_artifact(path, "litert").run(images.astype(np.float32))
        # float32 scores everywhere (issue 42): the task's are the adapter's, so is every top-1
        np.testing.assert_allclose(scores, litert, atol=1e-6, err_msg=fmt)
        np.testing.assert_array_equal(scores.argmax(axis=1), litert.argmax(axis=1), err_msg=fmt)


def test_tflite_files_say_probabilities_and_the_int8_one_takes_uint8_pixels(app_export):
    """The old contract was int8 pixels (q = pixel - 128) and logits out; an app now feeds the
    camera's uint8 pixels as they are and reads float32 probabilities (issue 42: a uint8
    output, q / 256, tied the top two classes on low-margin images)."""
    folder, manifest, _ = app_export
    for fmt, entry in manifest["artifacts"].items():
        expected = "probabilities" if entry["file"].endswith(".tflite") else "logits"
        assert entry["output"] == expected == entry["outputs"][0]["name"], fmt
    int8 = manifest["artifacts"]["tflite-int8"]
    image, scores = int8["inputs"][0], int8["outputs"][0]
    assert (image["dtype"], image["scale"], image["zero_point"]) == ("uint8", 1.0, 0)
    assert (scores["dtype"], scores["scale"], scores["zero_point"]) == ("float32", None, None)
    float_io = manifest["artifacts"]["tflite-int8-float-io"]
    assert float_io["inputs"][0]["dtype"] == float_io["outputs"][0]["dtype"] == "float32"


def test_metadata_is_the_standard_one_and_changes_nothing_computed(app_export, tmp_path):
    """Each file holds an M001 TFLITE_METADATA buffer and labels.txt packed after it; the same
    file without them computes bit-identical probabilities, and MediaPipe refuses it."""
    folder, manifest, images = app_export
    names = manifest["class_names"]
    x = images[:16].astype(np.float32)
    for fmt, entry in _tflite_entries(manifest).items():
        data = (folder / entry["file"]).read_bytes()
        metadata = read_metadata(data)
        assert metadata is not None and metadata[4:8] == FILE_IDENTIFIER, fmt
        fields = ModelMetadata.GetRootAs(metadata, 0)
        assert fields.Author().decode() == PROVENANCE["author"], fmt
        assert fields.License().decode() == PROVENANCE["license"], fmt
        assert fields.Name().decode() == f"{manifest['model']}-tiny", fmt
        assert packed_files(data) == {LABELS_FILE: ("\n".join(names) + "\n").encode()}
        bare = _strip_metadata(folder / entry["file"], tmp_path / f"bare_{entry['file']}")
        with_metadata = open_artifact(folder / entry["file"], "litert").run(x)
        without = open_artifact(bare, "litert").run(x)
        np.testing.assert_array_equal(with_metadata, without, err_msg=fmt)
        if entry["inputs"][0]["dtype"] == "float32":
            with pytest.raises(Exception, match="NormalizationOptions"):  # noqa: B017
                _classifier(bare)


def test_labels_and_model_json_agree(app_export):
    folder, manifest, _ = app_export
    labels = (folder / "labels.txt").read_text().splitlines()
    assert (
        labels
        == manifest["class_names"]
        == json.loads((folder / "model.json").read_text())["class_names"]
    )


def _strip_metadata(path: Path, out: Path) -> Path:
    """`path` without its TFLITE_METADATA entry (and packed labels), as another program writes
    a .tflite."""
    from ai_edge_litert import schema_py_generated as schema

    data = path.read_bytes()
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    model.metadata = [m for m in model.metadata if m.name.decode() != METADATA_NAME]
    out.write_bytes(packed_model(model, len(data)))
    return out


def _toolkit(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "toolkit.cli.main", *argv], capture_output=True, text=True, cwd=ROOT
    )


def test_the_mediapipe_runtime_is_the_task_itself(app_export):
    """`--runtime mediapipe` gives exactly the scores MediaPipe's ImageClassifier gives, for
    every .tflite file, through the same adapter interface predict and bench use."""
    folder, manifest, images = app_export
    names = manifest["class_names"]
    for fmt, entry in _tflite_entries(manifest).items():
        path = folder / entry["file"]
        session = open_artifact(path, "mediapipe")
        try:
            got = session.run(images.astype(np.float32))
        finally:
            close_session(session)
        want = _mediapipe_scores(path, images, names).astype(np.float32)
        np.testing.assert_array_equal(got, want, err_msg=fmt)
        assert session.input.dtype == "uint8" and session.output.name == "probabilities"


def test_predict_and_bench_run_mediapipe_and_refuse_a_file_without_metadata(app_export, tmp_path):
    """predict and bench with --runtime mediapipe: the same top-k as litert; a .tflite without
    metadata (another program's) gets one line and exit 2, and bench writes nothing."""
    folder, manifest, images = app_export
    device = shutil.copytree(folder, tmp_path / "device")
    pictures = []
    for i, pixels in enumerate(images[:4]):
        pictures.append(str(tmp_path / f"image{i}.png"))
        Image.fromarray(pixels).save(pictures[-1])
    model = str(device / manifest["artifacts"]["tflite"]["file"])
    litert = _toolkit("predict", model, *pictures, "--runtime", "litert")
    mediapipe = _toolkit("predict", model, *pictures, "--runtime", "mediapipe")
    assert litert.returncode == mediapipe.returncode == 0, mediapipe.stderr[-2000:]
    assert mediapipe.stdout == litert.stdout and "Traceback" not in mediapipe.stderr

    done = _toolkit("bench", str(device), "--runtime", "mediapipe", "--seconds", "0.2")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((device / "bench.json").read_text())["rows"]
    assert {r["format"] for r in rows} == set(_tflite_entries(manifest))
    assert all(r["status"] == "ok" and r["p50_ms"] > 0 for r in rows), rows

    bare = _strip_metadata(device / "model_fp32.tflite", device / "model_fp32.tflite")
    # listed in model.json as its file: else it is refused as changed after export
    listed = json.loads((device / "model.json").read_text())
    listed["artifacts"]["tflite"]["sha256"] = sha256(bare)
    (device / "model.json").write_text(json.dumps(listed))
    for name in ("bench.json", "bench.md", "bench.png"):
        (device / name).unlink(missing_ok=True)
    for argv in (
        ("predict", str(bare), pictures[0], "--runtime", "mediapipe"),
        ("bench", str(device), "--runtime", "mediapipe", "--format", "tflite"),
    ):
        done = _toolkit(*argv)
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.count("\n") == 1 and "has no TFLite Model Metadata" in done.stderr
    assert not [p for p in device.iterdir() if p.name.startswith("bench")]


def test_the_readme_mediapipe_snippet_runs_as_written(app_export, tmp_path):
    """README's "Embed in an app" Python block, run on model_int8.tflite and a real photo.jpg:
    it prints the 3 most probable (class name, score) pairs."""
    folder, manifest, images = app_export
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    snippet = next(b for b in blocks if "vision.ImageClassifier" in b)
    shutil.copy(folder / manifest["artifacts"]["tflite-int8"]["file"], tmp_path)
    Image.fromarray(images[0]).save(tmp_path / "photo.jpg", quality=95)
    done = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert len(printed) == 3 and all(name in manifest["class_names"] for name, _ in printed)
    assert [score for _, score in printed] == sorted((s for _, s in printed), reverse=True)
