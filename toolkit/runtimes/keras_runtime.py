"""The `keras` runtime: a `.keras` file loaded with safe_mode=True, run by the Keras backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from toolkit.runtimes.base import PreparedRun, RuntimeOptions, TensorSpec, only, run_images


def _spec(tensor) -> TensorSpec:
    return TensorSpec(tensor.name, tuple(tensor.shape), str(tensor.dtype))


class KerasSession:
    """A Keras model run with `predict_on_batch` (compiled once per batch shape)."""

    runtime = "keras"

    def __init__(self, model, path: Path):
        self.model = model
        self.input = _spec(only(model.inputs, "input", path))
        self.output = _spec(only(model.outputs, "output", path))
        self.providers = [_device()]

    def run(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) float32 0-255 -> (N, classes) float32 logits."""
        return run_images(self.model.predict_on_batch, images, self.input, self.output)

    def bind(self, images: np.ndarray) -> PreparedRun:
        """`images` as a float32 batch once; `run()` is one `predict_on_batch`."""
        return PreparedRun(self.model.predict_on_batch, images, self.input, self.output)


_BACKEND_NAMES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}


def _device() -> str:
    """The backend and the device it runs the model on, e.g. "JAX gpu:0"."""
    import keras

    backend = keras.backend.backend()
    if backend == "torch":  # keras.distribution has no torch implementation
        import torch

        device = "cuda:0" if torch.cuda.is_available() else "cpu:0"
    else:
        device = keras.distribution.list_devices()[0]
    return f"{_BACKEND_NAMES.get(backend, backend)} {device}"


def open_keras(path: Path, options: RuntimeOptions) -> KerasSession:
    """Load `path` safely (load_keras_model registers the custom layers); threads are TF's own."""
    from toolkit.runmodel import load_keras_model

    return KerasSession(load_keras_model(path), path)
