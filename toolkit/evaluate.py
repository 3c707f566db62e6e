"""`toolkit eval`: top-1/top-5 of a run's model on a test split."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np

from toolkit.data import check_labels, eval_dataset, stream_errors
from toolkit.errors import UsageError
from toolkit.rundata import load_run_data
from toolkit.runfolder import open_run


def evaluate_model(model: keras.Model, x: np.ndarray, y: np.ndarray, batch_size: int) -> dict:
    """Top-1 and top-5 accuracy of `model` (which returns logits) on uint8 images."""
    images = eval_dataset(x, None, batch_size)
    with stream_errors(x):  # a streamed folder that changed: its one-line UsageError
        logits = np.asarray(model.predict(images, verbose=0))[: len(y)]  # without any padding
    order = np.argsort(-logits, axis=1)
    k = min(5, logits.shape[1])
    return {
        "top1": float(np.mean(order[:, 0] == y)),
        "top5": float(np.mean(np.any(order[:, :k] == y[:, None], axis=1))),
        "samples": int(len(y)),
    }


def evaluate_compiled(model: keras.Model, x: np.ndarray, y: np.ndarray, batch_size: int) -> dict:
    """Top-1 and top-5 of `model` from its compiled `accuracy` and `top5` metrics (padding
    weighted 0). In a multi-process run every process passes its part of each batch and gets
    the whole split's result, where `evaluate_model`'s predictions could not be gathered."""
    result = model.evaluate(eval_dataset(x, y, batch_size), verbose=0, return_dict=True)
    return {
        "top1": float(result["accuracy"]),
        "top5": float(result["top5"]),
        "samples": int(len(y)),
    }


def evaluate_run(run_dir: str | Path, data_spec: str | None = None, batch_size: int = 256) -> dict:
    """Evaluate RUN/model.keras on the test split of `data_spec` (default: the run's data)."""
    run = open_run(run_dir)
    data, spec = load_run_data(run, data_spec)
    model = run.load_model()
    expected = tuple(model.input_shape[1:])
    if tuple(data.image_shape) != expected:
        raise UsageError(
            f"{spec} has {data.image_shape[0]}x{data.image_shape[1]} images but the model takes "
            f"{expected[0]}x{expected[1]}: use data of the run's resolution"
        )
    check_labels(data, int(model.output_shape[-1]))
    result = evaluate_model(model, data.x_test, data.y_test, batch_size)
    return {"run": str(run.path), "data": spec, **result}
