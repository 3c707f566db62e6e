"""model.json: what each exported artifact is and how an app feeds it, merged across exports."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from export.oplist import op_names
from export.signature import INPUT_NAME, OUTPUT_NAME, SIGNATURE_KEY
from export.source import ExportSource
from export.validate import ArtifactInfo
from toolkit import atomic
from toolkit.runfolder import MANIFEST_FILE
from toolkit.versions import versions

LABELS_FILE = "labels.txt"


def sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def artifact_entry(
    fmt: str,
    filename: str,
    runtime: str,
    path: Path,
    info: ArtifactInfo,
    seconds: float,
    options: dict,
) -> dict:
    """The manifest entry of one artifact; `path` is the file as it will be named `filename`."""
    return {
        "file": filename,
        "format": fmt,
        "runtime": runtime,
        "sha256": sha256(path),
        "size_bytes": path.stat().st_size,
        "inputs": info.inputs,
        "outputs": info.outputs,
        "ops": op_names(info.ops),
        "options": options,
        "export_seconds": round(seconds, 3),
        "exported": _now(),
    }


def header(src: ExportSource) -> dict:
    """The global part of model.json: source, classes, input contract, versions, date."""
    height, width, channels = src.input_shape
    options = src.run.config.get("options", {})
    return {
        "source_run": str(src.run.path.resolve()),
        "model": options.get("model"),
        "preset": options.get("preset"),
        "signature": {"key": SIGNATURE_KEY, "input": INPUT_NAME, "output": OUTPUT_NAME},
        "input": {
            "layout": "NHWC",
            "height": height,
            "width": width,
            "channels": channels,
            "range": "RGB 0-255",
        },
        "preprocessing": src.preprocessing,
        "class_names": src.class_names,
        "num_classes": src.num_classes,
        "versions": versions(),
        "date": _now(),
    }


def read_manifest(path: Path) -> dict:
    """An existing model.json, or {} when it is missing or unreadable (it is rebuilt)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def update_manifest(out: Path, head: dict, fmt: str, entry: dict) -> dict:
    """Merge one artifact into OUT/model.json (others kept while their files exist); write it."""
    old = read_manifest(out / MANIFEST_FILE)
    same_source = old.get("source_run") == head["source_run"]
    artifacts = {
        name: e
        for name, e in (old.get("artifacts", {}) if same_source else {}).items()
        if isinstance(e, dict) and (out / str(e.get("file", ""))).is_file()
    }
    artifacts[fmt] = entry
    manifest = {**head, "artifacts": artifacts}
    atomic.write_text(out / LABELS_FILE, "\n".join(head["class_names"]) + "\n")
    atomic.write_json(out / MANIFEST_FILE, manifest)
    return manifest


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
