"""Top-1/top-5 of a Keras model on images (training's evaluation; `toolkit eval` scores a run
with it in toolkit.runmodel)."""

from __future__ import annotations

import keras
import numpy as np

from toolkit.data import eval_dataset, stream_errors


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
