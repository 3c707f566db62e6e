"""The report's predictions, computed once per ship: every picked file and a float reference
run on the run's test split with the runtimes the files ship to (LiteRT, ONNX Runtime). The
float reference is the float32 .tflite or .onnx, which `toolkit verify` compares with the Keras
model, so no model runs in Keras here (unless no such file was exported)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfiles import ArtifactEntry, VerifyCell
from toolkit.runfiles.folder import MODEL_FILE
from toolkit.runfiles.hashes import modified_files
from toolkit.ship.picks import PASSED
from toolkit.ship.shipment import Shipment

# float32 files of any batch that run without TensorFlow, in the order tried as the float
# reference (LiteRT's first: the runtime the apps embed)
FLOAT_REFERENCES = tuple(
    sorted(
        (n for n, f in FORMATS.items() if f.precision == "fp32" and f.batch is None),
        key=lambda n: FORMATS[n].runtime != "litert",
    )
)
CHUNK = 256  # images per runtime call


@dataclass(frozen=True)
class Predicted:
    """One file's predicted classes on the test split, and how they were computed."""

    file: str
    format: str
    runtime: str
    classes: np.ndarray

    def top1(self, labels: np.ndarray) -> float:
        """The share of `labels` this file predicted."""
        return float(np.mean(self.classes == labels))


@dataclass(frozen=True)
class Predictions:
    """The test split and what each file predicted on it: the float reference first."""

    images: np.ndarray  # float32 0-255, NHWC
    labels: np.ndarray
    names: list[str]  # the run's class names
    spec: str  # the data spec the split was drawn from
    reference: Predicted  # the float model's stand-in
    note: str  # why `reference` may stand for the float model (HTML)
    files: dict[str, Predicted]  # file -> its predictions, the reference's first

    def top1(self, file: str) -> float:
        """`file`'s test top-1."""
        return self.files[file].top1(self.labels)


def predict(s: Shipment) -> Predictions:
    """Run the float reference and each picked file on the test split verify.json scored."""
    from toolkit.runfiles.data import load_split  # the data loaders: only when a report is written

    models = s.measurements.verify.models
    split, data = (models.split or "test", models.data) if models else ("test", None)
    images, labels, spec = load_split(s.run, split, data, option=None)
    reference, note = float_reference(s, images)
    files = {reference.file: reference}
    for pick in s.picks.values():
        if pick.file not in files:
            files[pick.file] = predict_file(s, pick.format, images)
    return Predictions(images, labels, s.run.class_names, spec, reference, note, files)


def _classes(path: Path, runtime: str, images: np.ndarray) -> np.ndarray:
    """The arg max of the file at `path` in `runtime` on every image."""
    from toolkit.runtimes import open_artifact, run_in_chunks
    from toolkit.runtimes.base import close_session

    session = open_artifact(path, runtime)
    try:
        return run_in_chunks(session.run, images, CHUNK).argmax(axis=1)
    finally:
        close_session(session)


def predict_file(s: Shipment, fmt: str, images: np.ndarray) -> Predicted:
    """The exported file of `fmt` on `images`, in the runtime of its format."""
    entry = s.manifest.artifacts.get(fmt)
    run = s.run
    if entry is None or not entry.file:
        raise UsageError(
            f"{run.export_dir} has no {fmt} file: run `toolkit export {run.path} --format {fmt}`"
        )
    runtime = FORMATS[fmt].runtime
    classes = _classes(run.export_dir / entry.file, runtime, images)
    return Predicted(entry.file, fmt, runtime, classes)


def _verify_cell(s: Shipment, fmt: str, runtime: str) -> VerifyCell | None:
    for cell in s.measurements.cells:
        if cell.format == fmt and cell.runtime == runtime:
            return cell
    return None


def tolerance_text(cell: VerifyCell) -> str:
    """A verify cell's tolerance as `name value, ...`."""
    parts = [f"{k} {v:g}" for k, v in cell.tolerance.items() if isinstance(v, int | float)]
    return ", ".join(parts) or "-"


def _why(entry: ArtifactEntry, runtime: str, cell: VerifyCell | None) -> str:
    """The page's sentence on why the file may stand for the float model (verify's figures)."""
    if cell and cell.status == PASSED:
        m = cell.metrics
        return (
            f"computed with {entry.file} in {runtime}, which <code>toolkit verify</code> "
            f"found equal to the Keras model on these images (top-1 agreement "
            f"{m['top1_agreement']:.1%}, max |difference| {m['max_abs']:.2g}, tolerance "
            f"{tolerance_text(cell)}; Keras top-1 {m['reference_top1_accuracy']:.2%})"
        )
    status = cell.status if cell else "not verified"
    return f"computed with {entry.file} in {runtime} (verify: {status})"


def float_reference(s: Shipment, images: np.ndarray) -> tuple[Predicted, str]:
    """The float model's predictions, from a float32 file that runs without TensorFlow where
    there is one (else model.keras in Keras), and the sentence on why it may stand for it."""
    run = s.run
    changed = modified_files(run.export_dir, s.manifest, FLOAT_REFERENCES)
    for fmt in FLOAT_REFERENCES:
        entry = s.manifest.artifacts.get(fmt)
        if entry is None or not entry.file or fmt in changed:
            continue
        if not (run.export_dir / entry.file).is_file():
            continue
        runtime = FORMATS[fmt].runtime
        why = _why(entry, runtime, _verify_cell(s, fmt, runtime))
        classes = _classes(run.export_dir / entry.file, runtime, images)
        return Predicted(entry.file, fmt, runtime, classes), why
    classes = _classes(run.path / MODEL_FILE, "keras", images)
    why = f"computed with {MODEL_FILE} in Keras (no float32 .tflite or .onnx file was exported)"
    return Predicted(MODEL_FILE, "keras", "keras", classes), why
