"""The state a run resumes from, and its history, each written atomically.

`Checkpoint` saves at the end of every epoch the model's and the optimizer's variables and the
number of epochs done, all in one file, RUN/checkpoint/state.npz, written to a temp file in
the same folder and then renamed onto it (toolkit.common.atomic): a run killed, or stopped by a full
disk, at any moment leaves the state of its last complete epoch, which `--resume` continues.
Keras' BackupAndRestore wrote its weights in place (h5py; a full disk left them truncated and
the run lost) and the epoch in a second file; a run folder it wrote still resumes.

`HistoryLog` rewrites history.csv the same way after every epoch, before the checkpoint, and
drops the rows of the epochs training starts again at: on resume, those past the checkpoint.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np

from toolkit.common import atomic
from toolkit.common.errors import UsageError, first_line
from toolkit.training.device_data import stored

STATE_FILE = "state.npz"  # in the run's checkpoint folder
EPOCH_KEY = "epochs_done"
# a timed run's (`--time`) clock at the checkpoint: the seconds its processes spent, its budget
CLOCK_KEYS = ("seconds_spent", "budget_seconds")
# what Keras' BackupAndRestore wrote (toolkit before state.npz): weights, {"epoch": N}
LEGACY_WEIGHTS, LEGACY_METADATA = "latest.weights.h5", "training_metadata.json"


def _variables(model: keras.Model) -> list:
    """Every variable a resumed run needs: the model's, then its optimizer's."""
    optimizer = model.optimizer
    weights = [v for v in model.weights if not stored(v)]  # not the device-resident split
    return [*weights, *(optimizer.variables if optimizer is not None else [])]


def _write_array(stream: object, value: np.ndarray) -> None:
    np.lib.format.write_array(stream, value, allow_pickle=False)


def save_state(
    path: Path, model: keras.Model, epochs_done: int, clock: dict[str, float] | None = None
) -> None:
    """Write `model`'s training state after `epochs_done` epochs to `path` atomically: the
    variables one at a time (memory holds one of them, not a copy of the model), and a timed
    run's `clock` (CLOCK_KEYS)."""
    with atomic.atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w") as archive:
        for index, variable in enumerate(_variables(model)):
            with archive.open(f"v{index}.npy", "w", force_zip64=True) as stream:
                _write_array(stream, np.asarray(keras.ops.convert_to_numpy(variable)))
        with archive.open(f"{EPOCH_KEY}.npy", "w") as stream:
            _write_array(stream, np.asarray(epochs_done, np.int64))
        for key, value in (clock or {}).items():
            with archive.open(f"{key}.npy", "w") as stream:
                _write_array(stream, np.asarray(value, np.float64))


def read_clock(folder: Path) -> dict[str, float]:
    """A timed run's clock at its checkpoint in `folder` (CLOCK_KEYS); {} without one."""
    state = folder / STATE_FILE
    if not state.is_file():
        return {}
    try:
        with np.load(state) as saved:
            return {key: float(saved[key]) for key in CLOCK_KEYS if key in saved.files}
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise _unreadable(state, exc) from None


def epochs_done(folder: Path) -> int:
    """Epochs the checkpoint in `folder` holds (0 without one): where a resumed run starts."""
    state = folder / STATE_FILE
    if state.is_file():
        try:
            with np.load(state) as saved:
                return int(saved[EPOCH_KEY])
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise _unreadable(state, exc) from None
    legacy = folder / LEGACY_METADATA
    if legacy.is_file() and (folder / LEGACY_WEIGHTS).is_file():
        try:
            return int(json.loads(legacy.read_text())["epoch"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise _unreadable(legacy, exc) from None
    return 0


def _unreadable(path: Path, exc: BaseException) -> UsageError:
    return UsageError(
        f"checkpoint {path} cannot be read ({first_line(exc)}): delete {path.parent} to "
        "train the run again from its first epoch"
    )


def load_state(folder: Path, model: keras.Model) -> int:
    """Restore the checkpoint in `folder` into `model` (compiled, built); the epochs it holds
    (0, nothing restored, without one). UsageError when it is not this model's."""
    state = folder / STATE_FILE
    optimizer = model.optimizer
    if optimizer is not None and not optimizer.built:  # its variables exist before assigning
        optimizer.build(model.trainable_variables)
    if not state.is_file():
        done = epochs_done(folder)
        if done:  # Keras' BackupAndRestore's checkpoint
            model.load_weights(folder / LEGACY_WEIGHTS)
        return done
    variables = _variables(model)
    try:
        with np.load(state) as saved:
            names = [f"v{i}" for i in range(len(variables))]
            kept = [name for name in saved.files if name not in CLOCK_KEYS]
            if sorted(kept) != sorted([*names, EPOCH_KEY]):
                raise ValueError(f"{len(saved.files) - 1} variables, the model has {len(names)}")
            values = [saved[name] for name in names]
            for variable, value in zip(variables, values, strict=True):
                if tuple(value.shape) != tuple(variable.shape):
                    raise ValueError(f"{variable.path} is {value.shape}, not {variable.shape}")
            done = int(saved[EPOCH_KEY])
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise _unreadable(state, exc) from None
    for variable, value in zip(variables, values, strict=True):
        variable.assign(value)
    return done


class Checkpoint(keras.callbacks.Callback):
    """Restore the run's checkpoint (if any) when fit starts; with `write`, save one after
    every epoch (process 0 of a multi-process run; the others only restore). The folder is
    left for `toolkit train` to delete once the run folder is complete."""

    def __init__(
        self,
        folder: str | Path,
        write: bool = True,
        clock: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        super().__init__()
        self.folder = Path(folder)
        self.write = write
        self.clock = clock  # a timed run's: its CLOCK_KEYS at each save

    def on_train_begin(self, logs=None) -> None:
        """Continue from the checkpoint's epoch."""
        if self.write:  # a killed save's temp file
            atomic.remove_stale_temps(self.folder / STATE_FILE)
        done = load_state(self.folder, self.model)
        if done:
            self.model._initial_epoch = done  # what fit starts at (as BackupAndRestore does)

    def on_epoch_end(self, epoch, logs=None) -> None:
        """Save the state after `epoch` (0-based): epoch + 1 done."""
        if self.write:
            self.folder.mkdir(parents=True, exist_ok=True)
            clock = None if self.clock is None else self.clock()
            save_state(self.folder / STATE_FILE, self.model, epoch + 1, clock)


class HistoryLog(keras.callbacks.Callback):
    """history.csv as Keras' CSVLogger writes it (epoch, then the logs' keys sorted), one row
    per epoch, rewritten atomically after each; an epoch trained again replaces its row."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self.fields: list[str] | None = None
        self.rows: list[dict] = []

    def on_train_begin(self, logs=None) -> None:
        """Read the rows a resumed run already has."""
        self.fields, self.rows = None, []
        if self.path.is_file():
            with self.path.open(newline="") as f:
                reader = csv.DictReader(f)
                self.rows = list(reader)
                self.fields = list(reader.fieldnames or []) or None

    def on_epoch_begin(self, epoch, logs=None) -> None:
        """Drop rows of this epoch and later (logged after the last checkpoint)."""
        self.rows = [row for row in self.rows if int(row["epoch"]) < epoch]

    def on_epoch_end(self, epoch, logs=None) -> None:
        """Add the epoch's row and write the file."""
        logs = logs or {}
        if self.fields is None:
            self.fields = ["epoch", *sorted(logs)]
        self.rows.append({"epoch": epoch, **{key: logs.get(key, "NA") for key in self.fields[1:]}})
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=self.fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(self.rows)
        atomic.write_text(self.path, text.getvalue())
