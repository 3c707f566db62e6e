"""A run's Keras model: loaded safely (custom objects registered by keras_setup), checked
against what config.json describes, and scored on a test split (`toolkit eval`).

Above the run folder's readers (toolkit.runfiles.folder, toolkit.runfiles), which need no Keras;
importing it imports no Keras either (it loads on first use)."""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.common.argtypes import path_arg
from toolkit.common.errors import UsageError, first_line
from toolkit.runfiles.folder import CONFIG_FILE, MODEL_FILE, Run, open_run

if TYPE_CHECKING:
    import keras

FRONT_LAYERS = {"rescale": "Rescaling", "normalize": "Normalization"}  # preprocessing -> layer


def load_keras_model(path: Path) -> keras.Model:
    """Load a `.keras` file safely (no arbitrary code), with a one-line error when it's bad."""
    try:  # only a stage that loads the model needs Keras and its backend: imported quietly
        from toolkit.keras_setup import setup_keras

        setup_keras()  # before `import keras`, which would import TensorFlow with its log lines
        import keras
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


def load_run_model(run: Run | str | Path) -> keras.Model:
    """RUN/model.keras loaded with safe_mode=True and checked to be the model config.json
    describes; a corrupt file or another program's model is a UsageError."""
    run = run if isinstance(run, Run) else open_run(run)
    model = load_keras_model(run.path / MODEL_FILE)
    check_model(run, model)
    return model


def _model_problem(run: Run, model: keras.Model) -> str | None:
    """How `model` differs from the toolkit model the run's config describes, or None."""
    from toolkit.models import MODELS

    config = run.config
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        return f"it has {len(model.inputs)} inputs and {len(model.outputs)} outputs, not 1 and 1"
    shape = config.image_shape
    if tuple(model.input_shape[1:]) != shape:
        return f"it takes input {tuple(model.input_shape[1:])}, {CONFIG_FILE} says {shape}"
    if tuple(model.output_shape[1:]) != (config.num_classes,):
        return f"it outputs {tuple(model.output_shape[1:])}, not {config.num_classes} class logits"
    kind = config.preprocessing or MODELS[config.model].preprocessing
    import keras

    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    front = layers[0] if layers else None
    wanted = FRONT_LAYERS.get(kind)
    if front is None or front.name != kind or type(front).__name__ != wanted:
        found = f"{type(front).__name__} '{front.name}'" if front is not None else "nothing"
        return f"its first layer is {found}, not the toolkit's {wanted} '{kind}'"
    size = config.image_size
    if shape[:2] != (size, size) and not any(layer.name == "resize" for layer in layers):
        return f"it has no Resizing layer from {shape[0]}x{shape[1]} to {size}x{size}"
    return None


def check_model(run: Run, model: keras.Model) -> None:
    """UsageError unless `model` is the toolkit model the run's config.json describes: same
    input shape and class count, and the toolkit's in-model preprocessing front."""
    problem = _model_problem(run, model)
    if problem is not None:
        config = run.config
        raise UsageError(
            f"{run.path / MODEL_FILE} is not the {config.model} model {CONFIG_FILE} "
            f"describes ({problem}): use a model trained by `toolkit train`, e.g. "
            f"`toolkit train --model {config.model} --preset {config.preset} "
            f"--data {config.data}`"
        )


def evaluate_run(run_dir: str | Path, data_spec: str | None = None, batch_size: int = 256) -> dict:
    """Evaluate RUN/model.keras on the test split of `data_spec` (default: the run's data)."""
    from toolkit.data import check_labels  # the data loaders and scoring import Keras
    from toolkit.evaluate import evaluate_model
    from toolkit.runfiles.data import load_run_data

    run = open_run(run_dir)
    data, spec = load_run_data(run, data_spec)
    model = load_run_model(run)
    expected = tuple(model.input_shape[1:])
    if tuple(data.image_shape) != expected:
        raise UsageError(
            f"{spec} has {data.image_shape[0]}x{data.image_shape[1]} images but the model takes "
            f"{expected[0]}x{expected[1]}: use data of the run's resolution"
        )
    check_labels(data, int(model.output_shape[-1]))
    result = evaluate_model(model, data.x_test, data.y_test, batch_size)
    return {"run": str(run.path), "data": spec, **result}


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `toolkit eval`."""
    p.add_argument("run", type=path_arg, help="run folder written by `toolkit train`")
    p.add_argument("--data", help="data spec (default: the run's data); its test split is used")


def run_eval(args: argparse.Namespace) -> int:
    """`toolkit eval`: top-1 and top-5 of a run's model on a test split."""
    result = evaluate_run(args.run, args.data)
    print(
        f"{result['run']} on {result['data']} (test split, {result['samples']} images): "
        f"top-1 {result['top1']:.2%}  top-5 {result['top5']:.2%}"
    )
    return 0
