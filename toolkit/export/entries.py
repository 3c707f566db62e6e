"""What export puts in model.json: each artifact's entry and the header (how an app feeds the
model), merged across exports; toolkit.runfiles.manifest reads and writes the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from toolkit.common.versions import versions
from toolkit.export.metadata import ModelInfo
from toolkit.export.oplist import op_names
from toolkit.export.signature import INPUT_NAME, OUTPUT_NAME, PROBABILITIES, SIGNATURE_KEY
from toolkit.export.source import ExportSource
from toolkit.export.validate import ArtifactInfo
from toolkit.formats import Format
from toolkit.models.macs import count_macs
from toolkit.runfiles import EXPORT_DIR, MODEL_HASH, Manifest, edit_manifest, find_manifest
from toolkit.runfiles.folder import MODEL_FILE
from toolkit.runfiles.hashes import sha256
from toolkit.runtimes.gpu_check import gpu_acceleration

OUTPUTS = [OUTPUT_NAME, PROBABILITIES]  # what an artifact's `output` may be


@dataclass(frozen=True)
class Extras:
    """What a converter adds for its written file: model.json entry fields, and the text of
    the companion files (the format's `companions`) written beside it."""

    entry: dict = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # companion file name -> text


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
        # what the output holds: "probabilities" (softmax, sum 1) or "logits"
        "output": info.outputs[0]["name"],
        "ops": op_names(info.ops),
        "options": options,
        "export_seconds": round(seconds, 3),
        "exported": _now(),
    }


def app_info(src: ExportSource, fmt: Format) -> ModelInfo:
    """The TFLite Model Metadata of format `fmt`'s file, from the run: model, preset, data,
    the sha256 of model.keras as the version; author and license where config.json's
    options give them (else this toolkit, and none)."""
    config = src.run.config
    model, preset = config.model, config.preset
    digest = src.memo(MODEL_HASH, lambda: sha256(src.run.path / MODEL_FILE))
    return ModelInfo(
        name=f"{model}-{preset}" if preset else str(model),
        description=(
            f"{model} {preset} image classifier trained on {config.data}; "
            f"{fmt.name}: {fmt.description}; RGB pixels 0-255 in, class probabilities out"
        ),
        version=f"model.keras sha256 {digest[:16]}",
        author=str(config.option("author") or f"toolkit {versions().get('toolkit', '')}".strip()),
        license=str(config.option("license", "")),
        class_names=tuple(src.class_names),
    )


def header(src: ExportSource) -> dict:
    """The global part of model.json: source, classes, input contract, versions, date."""
    height, width, channels = src.input_shape
    return {
        "source_run": str(src.run.path.resolve()),
        MODEL_HASH: src.memo(MODEL_HASH, lambda: sha256(src.run.path / MODEL_FILE)),
        "model": src.run.config.model,
        "preset": src.run.config.preset,
        # each artifact's `output` says which: logits (.onnx) or probabilities (.tflite)
        "signature": {"key": SIGNATURE_KEY, "input": INPUT_NAME, "outputs": OUTPUTS},
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
        # what `toolkit bench EXPORT_DIR` divides by for GMAC/s where there is no Keras model
        "macs_per_image": src.memo("macs_per_image", lambda: count_macs(src.model)),
        "versions": versions(),
        "date": _now(),
    }


def update_manifest(out: Path, head: dict, fmt: str, entry: dict) -> Manifest:
    """Merge one artifact into OUT/model.json and write it: the other entries are kept when they
    describe the same model (`same_model`) and their file is still the one recorded."""

    def merged(old: dict) -> dict:
        kept = old.get("artifacts") if same_model(old, head, out) else None
        artifacts = {
            name: entry if name == fmt else e  # a re-exported format keeps its place
            for name, e in (kept if isinstance(kept, dict) else {}).items()
            if name == fmt or (isinstance(e, dict) and _unchanged(out, e))
        }
        artifacts[fmt] = entry
        return {**head, "artifacts": artifacts}

    return edit_manifest(out, merged)


def record_gpu_acceleration(out: Path, formats: list[str]) -> Manifest:
    """Check the `formats`' files in LiteRT's GPU accelerator (toolkit.runtimes.gpu_check) and
    record each result as its entry's `gpu_accelerator`; returns model.json."""
    manifest = find_manifest(out)
    artifacts = manifest.artifacts if manifest is not None else {}
    paths = {fmt: out / artifacts[fmt].file for fmt in formats if fmt in artifacts}
    found = gpu_acceleration(list(paths.values())) if paths else {}

    def change(manifest: dict) -> dict:
        for fmt, path in paths.items():
            manifest["artifacts"][fmt]["gpu_accelerator"] = found[str(path)]
        return manifest

    return edit_manifest(out, change)


def same_model(old: dict, head: dict, out: Path) -> bool:
    """Whether an existing model.json (`old`) in `out` describes artifacts of the model `head`
    describes: the same model.keras bytes, wherever the run was moved or copied.

    A model.json written before the hash was recorded counts as the same when it names the same
    run folder, or when `out` is the run's own export folder (which moves with the run).
    """
    if old.get(MODEL_HASH) is not None:
        return old[MODEL_HASH] == head[MODEL_HASH]
    run = Path(head["source_run"])
    return old.get("source_run") == head["source_run"] or out.resolve() == run / EXPORT_DIR


def _unchanged(out: Path, entry: dict) -> bool:
    """Whether the entry's file exists and, where a sha256 is recorded, still has it."""
    path = out / str(entry.get("file", ""))
    if not entry.get("file") or not path.is_file():
        return False
    return entry.get("sha256") is None or entry["sha256"] == sha256(path)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
