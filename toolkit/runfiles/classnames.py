"""The class names of a model file, by the one rule `toolkit predict` and `toolkit ship` share.

1. The file's own metadata: the labels.txt packed in a `.tflite` (its TFLite Model Metadata,
   which MediaPipe reads too), the `labels` metadata_props of an `.onnx` or `.ort` file.
2. The folder that lists the file: an export folder (or a bundle) whose model.json has an entry
   for it (model.json's class_names, else that folder's labels.txt), or a run folder for its
   model.keras (the run's labels.txt).
3. Else the indices 0..N-1.

A labels.txt anywhere else (a parent folder, a folder whose model.json does not list the file)
is never read, and no name is guessed.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

from toolkit.common.errors import UsageError, first_line
from toolkit.runfiles import find_manifest, has_config, manifest_path
from toolkit.runfiles.folder import (
    LABELS_FILE,
    MODEL_FILE,
    check_labels,
    parse_labels,
    read_labels,
)

ONNX_LABELS_KEY = "labels"  # the metadata_props key `toolkit export` writes (a JSON list)
EXPORT_AGAIN = "export it again with `toolkit export`"


def packed_files(data: bytes) -> dict[str, bytes]:
    """The associated files packed after a .tflite's flatbuffer, as the TFLite metadata writers
    pack them (a zip appended to the model); {} when there are none."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return {name: zf.read(name) for name in zf.namelist()}
    except zipfile.BadZipFile:
        return {}


def _tflite_labels(path: Path, num_classes: int) -> list[str] | None:
    """The labels.txt packed in a .tflite file, or None when it packs none."""
    packed = packed_files(path.read_bytes()).get(LABELS_FILE)
    if packed is None:
        return None
    where = f"the {LABELS_FILE} packed in {path}"
    try:
        text = packed.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where} is not UTF-8 ({first_line(exc)}): {EXPORT_AGAIN}") from exc
    return parse_labels(text, num_classes, where, EXPORT_AGAIN)


def _onnx_labels(path: Path, num_classes: int) -> list[str] | None:
    """The `labels` metadata_props of an .onnx or .ort file, or None when it has none (or no
    ONNX Runtime is installed to read it)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    from toolkit.common.native_logs import captured_native_stderr

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # read, not run
    try:
        with captured_native_stderr():
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001  (a file ORT cannot load has no names to read)
        return None
    text = session.get_modelmeta().custom_metadata_map.get(ONNX_LABELS_KEY)
    if text is None:
        return None
    where = f"the {ONNX_LABELS_KEY} metadata of {path}"
    try:
        names = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{where} is not JSON ({first_line(exc)}): {EXPORT_AGAIN}") from exc
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UsageError(f"{where} is not a list of class names: {EXPORT_AGAIN}")
    return check_labels(names, num_classes, where, EXPORT_AGAIN)


# file suffix -> the reader of the class names the file itself holds
OWN_LABELS: dict[str, Callable[[Path, int], list[str] | None]] = {
    ".tflite": _tflite_labels,
    ".onnx": _onnx_labels,
    ".ort": _onnx_labels,
}


def listing_folder_labels(artifact: Path, num_classes: int) -> list[str] | None:
    """The class names the folder that lists `artifact` records for it: an export folder's
    model.json (class_names, else its labels.txt) when it has an entry for the file, a run
    folder's labels.txt for its model.keras; None when no folder lists it or none is recorded."""
    folder = artifact.parent
    labels = folder / LABELS_FILE
    if artifact.name == MODEL_FILE and has_config(folder):  # a run folder's model
        fix = f"retrain the run (`toolkit train` writes {LABELS_FILE})"
        return read_labels(labels, num_classes, fix) if labels.is_file() else None
    manifest = find_manifest(folder, EXPORT_AGAIN)
    if manifest is None or not manifest.formats_of(artifact.name):
        return None
    if manifest.class_names is not None:
        where = f"{manifest_path(folder)} class_names"
        return check_labels(list(manifest.class_names), num_classes, where, EXPORT_AGAIN)
    return read_labels(labels, num_classes, f"remove {labels}") if labels.is_file() else None


def class_names_of(artifact: Path, num_classes: int) -> list[str]:
    """The `num_classes` class names of the model file `artifact` by the module's rule: its own
    metadata, then the folder that lists it, else "0".."N-1". Names of another count, or with
    control characters, are a UsageError naming where they came from."""
    artifact = Path(artifact)
    own = OWN_LABELS.get(artifact.suffix.lower())
    names = own(artifact, num_classes) if own is not None else None
    if names is None:
        names = listing_folder_labels(artifact, num_classes)
    return names if names is not None else [str(i) for i in range(num_classes)]
