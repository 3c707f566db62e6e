"""The `keras` runtime: a `.keras` file loaded with safe_mode=True, run by TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from toolkit.runtimes.base import RuntimeOptions, TensorSpec, only, run_images


def _spec(tensor) -> TensorSpec:
    return TensorSpec(tensor.name, tuple(tensor.shape), str(tensor.dtype))


class KerasSession:
    """A Keras model run with `predict_on_batch` (compiled once per batch shape)."""

    runtime = "keras"

    def __init__(self, model, path: Path):
        import tensorflow as tf

        self.model = model
        self.input = _spec(only(model.inputs, "input", path))
        self.output = _spec(only(model.outputs, "output", path))
        gpus = tf.config.list_logical_devices("GPU")
        self.providers = [f"TensorFlow {gpus[0].name}" if gpus else "TensorFlow CPU"]

    def run(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) float32 0-255 -> (N, classes) float32 logits."""
        return run_images(self.model.predict_on_batch, images, self.input, self.output)


def open_keras(path: Path, options: RuntimeOptions) -> KerasSession:
    """Load `path` safely (custom layers registered by `import toolkit`); threads are TF's own."""
    from toolkit.runfolder import load_keras_model

    return KerasSession(load_keras_model(path), path)
