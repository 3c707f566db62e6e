"""The run folder: what `toolkit train` writes and every later stage reads."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import keras

from toolkit.errors import UsageError, first_line

MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
HISTORY_FILE = "history.csv"
METRICS_FILE = "metrics.json"
LABELS_FILE = "labels.txt"
CHECKPOINT_DIR = "checkpoint"


@dataclass(frozen=True)
class Run:
    """A finished run folder on disk."""

    path: Path
    config: dict

    @property
    def class_names(self) -> list[str]:
        return (self.path / LABELS_FILE).read_text().splitlines()

    def load_model(self) -> keras.Model:
        """Load model.keras with safe_mode=True; a corrupt file is a UsageError."""
        return load_keras_model(self.path / MODEL_FILE)


def load_keras_model(path: Path) -> keras.Model:
    """Load a `.keras` file safely (no arbitrary code), with a one-line error when it's bad."""
    import toolkit  # noqa: F401  (registers the custom layers)

    if not path.is_file():
        raise UsageError(f"{path} not found: train a model first with `toolkit train`")
    if not zipfile.is_zipfile(path):
        raise UsageError(f"{path} is not a valid .keras file (corrupt or truncated): retrain it")
    try:
        return keras.saving.load_model(path, safe_mode=True, compile=False)
    except Exception as exc:  # noqa: BLE001  (any loader failure means the file is unusable)
        first = first_line(exc)
        raise UsageError(f"{path} could not be loaded ({first}): retrain it") from exc


def read_json(path: Path) -> dict:
    """Parse a JSON file of a run folder; invalid JSON is a UsageError."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc.msg}): retrain the run") from exc


def open_run(path: str | Path) -> Run:
    """Open a finished run folder, checking the files every later stage needs."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"run folder {path} does not exist: pass the --out of `toolkit train`")
    if not path.is_dir():
        raise UsageError(f"{path} is not a run folder: pass the folder `toolkit train` wrote")
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        raise UsageError(f"{path} has no {CONFIG_FILE}: it is not a run folder of `toolkit train`")
    config = read_json(config_path)
    if not (path / MODEL_FILE).is_file():
        raise UsageError(
            f"{path} has no {MODEL_FILE}: the run did not finish; continue it with "
            f"`toolkit train --out {path} --resume`"
        )
    return Run(path=path, config=config)
