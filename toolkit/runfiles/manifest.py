"""model.json, the manifest of an export folder, and its one reader and writer.

`toolkit export` composes each artifact's entry and merges it in; `toolkit verify` adds parity
records to the entries; both go through `edit_manifest` (`toolkit ship` writes a bundle's whole
file with `write_manifest`), which reads the file, applies a change
and replaces the file atomically, so no stage writes model.json its own way. Readers get a
`Manifest`: `read_manifest` for a stage that needs the files listed, `find_manifest` where a
folder without one is normal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.common.errors import UsageError
from toolkit.runfiles import jsonfile
from toolkit.runfiles.jsonfile import integer, number, numeric, section, text

MANIFEST_FILE = "model.json"  # in every export folder
EXPORT_DIR = "export"  # a run's default export folder
EXPORT_ALL = "run `toolkit export RUN --format all` first"
MODEL_HASH = "source_model_sha256"  # model.keras's sha256: the run's identity wherever copied


@dataclass(frozen=True)
class ArtifactEntry:
    """One exported file's entry in model.json; `raw` is the entry as written."""

    format: str
    file: str  # "" in an entry that names no file
    runtime: str | None = None
    sha256: str | None = None  # None: exported before hashes were recorded
    size_bytes: int | None = None
    output: str | None = None  # "logits" or "probabilities"
    exported: str | None = None  # ISO date of the export
    export_seconds: float | None = None
    quantization_search: Mapping[str, object] | None = None  # the int8 recipe search's record
    options: Mapping[str, object] = field(default_factory=dict)
    parity: Mapping[str, object] | None = None  # `toolkit verify`'s record (sha256, verified...)
    gpu_accelerator: object = None  # LiteRT GPU check (export --gpu-check)
    # the file's input and output tensors (name, dtype, shape, scale, zero point)
    inputs: tuple[Mapping[str, object], ...] = ()
    outputs: tuple[Mapping[str, object], ...] = ()
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, fmt: str, data: Mapping) -> ArtifactEntry:
        """The entry of format `fmt` (tolerant: a key older exports lacked is None)."""
        return cls(
            format=fmt,
            file=str(data.get("file") or ""),
            runtime=text(data.get("runtime")),
            sha256=text(data.get("sha256")) or None,
            size_bytes=integer(data.get("size_bytes")),
            output=text(data.get("output")),
            exported=text(data.get("exported")),
            export_seconds=number(data.get("export_seconds")),
            quantization_search=_object(data.get("quantization_search")),
            options=section(data, "options"),
            parity=_object(data.get("parity")),
            gpu_accelerator=data.get("gpu_accelerator"),
            inputs=_objects(data.get("inputs")),
            outputs=_objects(data.get("outputs")),
            raw=dict(data),
        )

    def to_json(self) -> dict:
        """The entry's object as model.json holds it."""
        return dict(self.raw)


@dataclass(frozen=True)
class Manifest:
    """model.json: the model the files were converted from, its input contract and classes,
    and an entry per exported format (in export order)."""

    artifacts: Mapping[str, ArtifactEntry]
    source_run: str | None = None
    source_model_sha256: str | None = None
    model: str | None = None
    preset: str | None = None
    # what the files do to the pixels (app_input, in_model, summary): the app's contract
    preprocessing: Mapping[str, object] = field(default_factory=dict)
    signature: Mapping[str, object] = field(default_factory=dict)  # the SavedModel signature
    class_names: tuple[str, ...] | None = None  # None: not recorded (or not a list of names)
    num_classes: int | None = None
    macs_per_image: int | float | None = None
    date: str | None = None
    input: Mapping[str, object] = field(default_factory=dict)
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(
        cls, data: Mapping, where: str = MANIFEST_FILE, how: str = EXPORT_ALL
    ) -> Manifest:
        """The manifest in `data`; an `artifacts` that is not an object is a UsageError."""
        artifacts = data.get("artifacts", {})
        if not isinstance(artifacts, dict):
            kind = type(artifacts).__name__
            raise UsageError(f"{where} is unreadable (artifacts is a {kind}, not an object): {how}")
        names = data.get("class_names")
        listed = isinstance(names, list) and all(isinstance(n, str) for n in names)
        return cls(
            artifacts={
                f: ArtifactEntry.from_json(f, e if isinstance(e, dict) else {})
                for f, e in artifacts.items()
            },
            source_run=text(data.get("source_run")),
            source_model_sha256=text(data.get(MODEL_HASH)),
            model=text(data.get("model")),
            preset=text(data.get("preset")),
            preprocessing=section(data, "preprocessing"),
            signature=section(data, "signature"),
            class_names=tuple(names) if listed else None,
            num_classes=integer(data.get("num_classes")),
            macs_per_image=numeric(data.get("macs_per_image")),
            date=text(data.get("date")),
            input=section(data, "input"),
            raw=dict(data),
        )

    def to_json(self) -> dict:
        """The object model.json holds."""
        return dict(self.raw)

    def formats_of(self, file_name: str) -> list[str]:
        """The formats whose entry is the file `file_name` ([] when none lists it)."""
        return [f for f, e in self.artifacts.items() if e.file and e.file == file_name]

    def export_command(self, folder: Path, fmt: str) -> str:
        """The `toolkit export` command that writes format `fmt` into `folder` again (from the
        run this manifest names as its source, where it names one)."""
        run = self.source_run
        if run and Path(run) / EXPORT_DIR == Path(folder).resolve():
            return f"toolkit export {run} --format {fmt}"
        return f"toolkit export {run or 'RUN'} --format {fmt} --out {folder}"


def _object(value: object) -> dict | None:
    return value if isinstance(value, dict) else None


def _objects(value: object) -> tuple[dict, ...]:
    """The objects of a list (a tensor list); () for anything else."""
    return tuple(v for v in value if isinstance(v, dict)) if isinstance(value, list) else ()


def manifest_path(folder: Path) -> Path:
    """Where an export folder's model.json is."""
    return Path(folder) / MANIFEST_FILE


def has_manifest(folder: Path) -> bool:
    """Whether `folder` has a model.json (is an export folder)."""
    return manifest_path(folder).is_file()


def read_manifest(folder: Path, how: str = EXPORT_ALL, missing: str | None = None) -> Manifest:
    """FOLDER/model.json for a stage that uses its files: missing, unreadable or listing no
    artifacts is a UsageError ending in `how` (the way out; `missing`: the missing file's text)."""
    path = manifest_path(folder)
    manifest = Manifest.from_json(jsonfile.load(path, how, missing), str(path), how)
    if not manifest.artifacts:
        raise UsageError(f"{path} lists no artifacts: {how}")
    return manifest


def find_manifest(folder: Path, how: str = EXPORT_ALL) -> Manifest | None:
    """FOLDER/model.json, or None when the folder has none; unreadable is a UsageError."""
    path = manifest_path(folder)
    data = jsonfile.find(path, how)
    return None if data is None else Manifest.from_json(data, str(path), how)


def write_manifest(folder: Path, data: Mapping | Manifest) -> Manifest:
    """Write a whole model.json into FOLDER (a bundle's: the run's, with the shipped entries),
    atomically; returns it."""
    path = manifest_path(folder)
    new = data.to_json() if isinstance(data, Manifest) else dict(data)
    jsonfile.write(path, new)
    return Manifest.from_json(new, str(path))


def _old_object(path: Path) -> dict:
    """The model.json an edit starts from: {} when missing or unreadable (it is rebuilt)."""
    try:
        return jsonfile.parse(path, EXPORT_ALL) if path.is_file() else {}
    except UsageError:
        return {}


def edit_manifest(folder: Path, change: Callable[[dict], dict | None]) -> Manifest:
    """Apply `change` to FOLDER/model.json's object ({} when absent or unreadable: it is
    rebuilt) and write the result atomically; `change` returns the new object, or None to leave
    the file untouched. Returns the manifest now on disk."""
    path = manifest_path(folder)
    old = _old_object(path)
    new = change(old)
    if new is None:
        return Manifest.from_json(old, str(path))
    jsonfile.write(path, new)
    return Manifest.from_json(new, str(path))
