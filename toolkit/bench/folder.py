"""What `toolkit bench PATH` measures: a run folder (its model.keras and RUN/export), or an export
folder copied to a device without its run (model.json, labels.txt and the files it lists), which
is benched with LiteRT and ONNX Runtime alone: no TensorFlow, Keras or JAX.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from toolkit.bench.roofline import KERAS_FORMAT
from toolkit.common.errors import UsageError
from toolkit.runfiles import (
    CONFIG_FILE,
    EXPORT_DIR,
    MANIFEST_FILE,
    Manifest,
    has_config,
    has_manifest,
    read_manifest,
)
from toolkit.runfiles.folder import MODEL_FILE, Run, open_run
from toolkit.runfiles.hashes import check_unmodified, modified_files


@dataclass(frozen=True)
class BenchFolder:
    """A folder to bench, and its run (None for an export folder alone, which has no Keras
    model and no data)."""

    path: Path  # the folder given: its results are written here
    run: Run | None = None

    @property
    def export_dir(self) -> Path:
        """Where model.json and the files it lists are."""
        return self.run.export_dir if self.run is not None else self.path

    @cached_property
    def manifest(self) -> Manifest:
        """model.json, read when first needed (a run's own model is checked before it)."""
        if self.run is not None:
            return self.run.manifest()
        how = f"export again with `toolkit export RUN --format all --out {self.path}`"
        return read_manifest(self.path, how)

    @property
    def kind(self) -> str:
        return "run folder" if self.run is not None else "export folder"

    @property
    def model(self) -> str | None:
        """The model's name (config.json's, or what model.json recorded at export)."""
        return self.run.config.model if self.run is not None else self.manifest.model

    @property
    def preset(self) -> str | None:
        return self.run.config.preset if self.run is not None else self.manifest.preset

    def files(self) -> dict[str, Path]:
        """Format name -> file: model.keras (a run folder's) first, then model.json's files."""
        files = {KERAS_FORMAT: self.path / MODEL_FILE} if self.run is not None else {}
        exported = self.manifest.artifacts.items()
        return files | {fmt: self.export_dir / e.file for fmt, e in exported}

    def check_unmodified(self, formats: list[str], allow_modified: bool) -> None:
        """Refuse before any timing (or with allow_modified, warn of) each of the `formats`'
        files changed after export: its sha256 is not the one model.json records."""
        exported = [f for f in formats if f != KERAS_FORMAT]
        changed = modified_files(self.export_dir, self.manifest, exported)
        check_unmodified(changed, allow_modified, self.export_command)

    def export_command(self, fmt: str) -> str:
        """The `toolkit export` command that adds format `fmt` to this folder."""
        if self.run is not None:
            return f"toolkit export {self.path} --format {fmt}"
        return f"toolkit export RUN --format {fmt} --out {self.path}"


def open_folder(path: str | Path) -> BenchFolder:
    """A run folder (config.json, model.keras, export/model.json), or an export folder (a folder
    with model.json and no model.keras, RUN/export included); anything else is a UsageError."""
    path = Path(path)
    way = f"pass a run folder of `toolkit train` or an export folder (with {MANIFEST_FILE})"
    if not path.exists():
        raise UsageError(f"{path} does not exist: {way}")
    if not path.is_dir():
        raise UsageError(f"{path} is not a folder: {way}")
    if has_manifest(path) and not (path / MODEL_FILE).is_file():
        folder = BenchFolder(path)
        folder.manifest  # noqa: B018  (an unreadable model.json is refused now)
        return folder
    if not has_config(path):
        raise UsageError(
            f"{path} is neither a run folder (no {CONFIG_FILE}) nor an export folder (no "
            f"{MANIFEST_FILE}): {way}"
        )
    require_keras(path)
    return BenchFolder(path, open_run(path))


def require_keras(run_dir: Path) -> None:
    """A run folder is read with Keras (its model registry, its model.keras): a UsageError
    naming the way out where Keras or its backend is not installed (its export folder alone
    needs neither)."""
    from toolkit.common.backend import installed, require_backend

    alone = "or bench its export folder alone, which needs neither: "
    alone += f"`toolkit bench {run_dir / EXPORT_DIR}`"
    if not installed("keras"):
        raise UsageError(
            f"toolkit bench of run folder {run_dir} needs Keras: pip install "
            f"'toolkit[tensorflow]', {alone}"
        )
    try:
        require_backend()
    except UsageError as exc:
        raise UsageError(f"{exc}; {alone}") from None
