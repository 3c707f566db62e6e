"""The run folder: what `toolkit train` writes and every later stage reads."""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.errors import UsageError, first_line
from toolkit.manifest import EXPORT_DIR, MANIFEST_FILE, load_manifest

if TYPE_CHECKING:
    import keras

MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
HISTORY_FILE = "history.csv"
HISTORY_PLOT_FILE = "history.png"
METRICS_FILE = "metrics.json"
LABELS_FILE = "labels.txt"
CHECKPOINT_DIR = "checkpoint"
LOCK_FILE = ".train.lock"  # flock-ed by the `toolkit train` writing the folder; see hold_run_folder
# what `toolkit verify` and `toolkit bench` write into the run folder
VERIFY_FILE = "verify.json"
VERIFY_LAYERS_PLOT = "verify_layers.png"
BENCH_FILES = ("bench.json", "bench.md", "bench.png")
BENCH_TOP1_FILE = "bench_top1.json"  # each file's top-1 by data spec and sha256: a cache
# `toolkit bench --interleaved`: every CPU file timed side by side in one process
BENCH_INTERLEAVED_FILES = ("bench_interleaved.json", "bench_interleaved.md")


def labels_text(class_names: list[str] | tuple[str, ...]) -> str:
    """LABELS_FILE's content: class i on line i (train, export and the packed .tflite labels)."""
    return "\n".join(class_names) + "\n"


def read_labels(path: Path, num_classes: int, fix: str) -> list[str]:
    """LABELS_FILE's class names, line i class i, checked as `toolkit train` checks class names
    (no control characters: a \\r would split a name in the packed .tflite labels) and against
    the model's `num_classes`; any other file is a UsageError ending in `or FIX`."""
    try:
        text = path.read_bytes().decode("utf-8")  # not read_text: it turns \r into \n
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"{path} cannot be read ({first_line(exc)}): save it as UTF-8, or {fix}"
        ) from exc
    return parse_labels(text, num_classes, str(path), fix)


def parse_labels(text: str, num_classes: int, where: str, fix: str) -> list[str]:
    """The class names of LABELS_FILE content `text` (from `where`: a file, or the labels packed
    in a .tflite), checked by `check_labels`."""
    names = text.split("\n")  # as labels_text joins them: only \n ends a line
    if names[-1] == "":
        names.pop()
    return check_labels(names, num_classes, where, fix)


def check_labels(names: list[str], num_classes: int, where: str, fix: str) -> list[str]:
    """`names` (from `where`), checked as `read_labels` checks a LABELS_FILE's lines: no control
    characters, one per model output; else a UsageError ending in `or FIX`."""
    from toolkit.data.dataset import check_class_name_characters  # train's rule

    check_class_name_characters(names, where, f"write the names without them, or {fix}")
    if len(names) != num_classes:
        raise UsageError(
            f"{where} has {len(names)} class names but the model has {num_classes} classes: "
            f"write one name per line (line i: class i), or {fix}"
        )
    return names


# config.json keys `toolkit train` writes that every later stage relies on: (path, what it is)
REQUIRED_CONFIG = (
    (("options", "model"), "the model name"),
    (("options", "preset"), "the preset name"),
    (("options", "data"), "the training data spec"),
    (("options", "seed"), "the split seed"),
    (("preset", "arch", "image_size"), "the model's image size"),
    (("dataset", "image_shape"), "the input shape"),
    (("dataset", "num_classes"), "the class count"),
)
FRONT_LAYERS = {"rescale": "Rescaling", "normalize": "Normalization"}  # preprocessing -> layer


@dataclass(frozen=True)
class Run:
    """A finished run folder on disk."""

    path: Path
    config: dict

    @property
    def class_names(self) -> list[str]:
        """The run's classes from labels.txt (`read_labels`: one per model output, no control
        characters); a missing or bad labels.txt is a UsageError."""
        path = self.path / LABELS_FILE
        if not path.is_file():
            raise UsageError(
                f"{self.path} has no {LABELS_FILE}: the run's classes are unknown; retrain the run"
            )
        fix = f"retrain the run (`toolkit train` writes {LABELS_FILE})"
        return read_labels(path, int(self.config["dataset"]["num_classes"]), fix)

    @property
    def seed(self) -> int:
        """The seed `toolkit train` split the data with: every later split and draw uses it."""
        return int(self.config["options"]["seed"])

    @property
    def val_fraction(self) -> float | None:
        """The share of the training images `toolkit train` held out for validation (its
        preset's `val_fraction`; None: the data's own split): every later split uses it."""
        value = self.config["preset"].get("train", {}).get("val_fraction")  # train writes "preset"
        return None if value is None else float(value)

    @property
    def export_dir(self) -> Path:
        """RUN/export: where `toolkit export` writes by default."""
        return self.path / EXPORT_DIR

    def load_model(self) -> keras.Model:
        """Load model.keras with safe_mode=True and check it is the model config.json
        describes; a corrupt file or another program's model is a UsageError."""
        model = load_keras_model(self.path / MODEL_FILE)
        check_model(self, model)
        return model

    def manifest(self) -> dict:
        """RUN/export/model.json; UsageError saying how to create it when missing or unreadable."""
        path = self.export_dir / MANIFEST_FILE
        how = f"run `toolkit export {self.path} --format all` first"
        if not path.is_file():
            raise UsageError(f"{self.path} has no exported models ({path} not found): {how}")
        return load_manifest(path, how)


@contextmanager
def hold_run_folder(out: Path) -> Iterator[Path]:
    """Hold an exclusive flock on OUT/.train.lock (creating OUT) so that one `toolkit train`
    at a time writes a run folder; a second one is a UsageError. Yields the lock file. POSIX
    only: where there is no flock (Windows), the folder is not guarded.

    The OS drops a flock when its process dies, so a lock file a killed run left blocks
    nothing. On leaving, the lock file goes, and so do the folders this call created when
    nothing else was written into them (a refusal leaves no trace).
    """
    out = Path(out)
    created = [folder for folder in (out, *out.parents) if not folder.exists()]
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_FILE
    fd = _lock(lock, out)
    try:
        yield lock
    finally:
        lock.unlink(missing_ok=True)  # while held: a waiting opener re-checks the inode
        os.close(fd)
        for folder in created:  # deepest first; a folder with files in it stays
            try:
                folder.rmdir()
            except OSError:
                break


def _lock(lock: Path, out: Path) -> int:
    """An fd holding the flock of `lock`; UsageError when another process holds it."""
    try:
        import fcntl  # POSIX: Linux and macOS
    except ImportError:  # Windows: no flock; the folder is not guarded there
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(
                f"run folder {out} is being written by another `toolkit train` (it holds "
                f"{lock}): wait for it to finish, or pass another --out"
            ) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:  # else its holder removed it between our open and flock: take the new one
            return fd
        os.close(fd)


def load_keras_model(path: Path) -> keras.Model:
    """Load a `.keras` file safely (no arbitrary code), with a one-line error when it's bad."""
    try:
        import keras  # only a stage that loads the model needs Keras and its backend

        from toolkit.keras_setup import setup_keras

        setup_keras()
    except ImportError as exc:
        raise UsageError(
            f"{path} needs Keras and a backend to load: pip install 'toolkit[tensorflow]' (or "
            "[jax]); without them, use the exported .tflite or .onnx files"
        ) from exc
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
    check_config(config_path, config)
    return Run(path=path, config=config)


def _lookup(config: object, keys: tuple[str, ...]) -> object:
    for key in keys:
        if not isinstance(config, dict) or key not in config:
            return None
        config = config[key]
    return config


def _config_problem(config: dict) -> str | None:
    """What keeps `config` from describing a toolkit model, or None."""
    from toolkit.models import MODELS

    for keys, what in REQUIRED_CONFIG:
        if _lookup(config, keys) is None:
            return f"no {'.'.join(keys)} ({what})"
    model = config["options"]["model"]
    if model not in MODELS:
        return f"options.model '{model}' is not one of the toolkit's models ({', '.join(MODELS)})"
    shape = config["dataset"]["image_shape"]
    if not (isinstance(shape, list) and len(shape) == 3 and all(isinstance(d, int) for d in shape)):
        return f"dataset.image_shape {shape!r} is not [height, width, channels]"
    classes = config["dataset"]["num_classes"]
    if not isinstance(classes, int) or classes < 1:
        return f"dataset.num_classes {classes!r} is not a positive integer"
    return None


def check_config(config_path: Path, config: dict) -> None:
    """UsageError unless config.json holds what `toolkit train` writes about the run's model:
    the model name (one of the registry's), preset, data and seed, input shape and classes."""
    problem = _config_problem(config)
    if problem is not None:
        raise UsageError(
            f"{config_path} does not describe a toolkit model ({problem}): use a run folder "
            "written by `toolkit train`, or train one with `toolkit train --model NAME`"
        )


def _model_problem(config: dict, model: keras.Model) -> str | None:
    """How `model` differs from the toolkit model `config` describes, or None."""
    from toolkit.models import MODELS

    if len(model.inputs) != 1 or len(model.outputs) != 1:
        return f"it has {len(model.inputs)} inputs and {len(model.outputs)} outputs, not 1 and 1"
    shape = tuple(config["dataset"]["image_shape"])
    if tuple(model.input_shape[1:]) != shape:
        return f"it takes input {tuple(model.input_shape[1:])}, config.json says {shape}"
    classes = config["dataset"]["num_classes"]
    if tuple(model.output_shape[1:]) != (classes,):
        return f"it outputs {tuple(model.output_shape[1:])}, not {classes} class logits"
    kind = config.get("preprocessing") or MODELS[config["options"]["model"]].preprocessing
    import keras

    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    front = layers[0] if layers else None
    wanted = FRONT_LAYERS.get(kind)
    if front is None or front.name != kind or type(front).__name__ != wanted:
        found = f"{type(front).__name__} '{front.name}'" if front is not None else "nothing"
        return f"its first layer is {found}, not the toolkit's {wanted} '{kind}'"
    size = int(config["preset"]["arch"]["image_size"])
    if shape[:2] != (size, size) and not any(layer.name == "resize" for layer in layers):
        return f"it has no Resizing layer from {shape[0]}x{shape[1]} to {size}x{size}"
    return None


def check_model(run: Run, model: keras.Model) -> None:
    """UsageError unless `model` is the toolkit model the run's config.json describes: same
    input shape and class count, and the toolkit's in-model preprocessing front."""
    problem = _model_problem(run.config, model)
    if problem is not None:
        options = run.config["options"]
        raise UsageError(
            f"{run.path / MODEL_FILE} is not the {options['model']} model {CONFIG_FILE} "
            f"describes ({problem}): use a model trained by `toolkit train`, e.g. "
            f"`toolkit train --model {options['model']} --preset {options['preset']} "
            f"--data {options['data']}`"
        )
