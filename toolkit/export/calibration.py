"""Calibration images for int8 formats: seeded draws from the TRAINING split of a data spec."""

from __future__ import annotations

import numpy as np

from toolkit.errors import UsageError
from toolkit.rundata import run_dataset
from toolkit.runfolder import Run

DEFAULT_CALIB_SAMPLES = 500


def calibration_images(
    run: Run, input_shape: tuple[int, int, int], spec: str | None, samples: int
) -> np.ndarray:
    """`samples` float32 0-255 (N, H, W, 3) train images of `spec` (default: the run's data)."""
    data, spec = run_dataset(run, spec)  # calibration uses no labels: other classes are fine
    if tuple(data.image_shape) != tuple(input_shape):
        raise UsageError(
            f"calibration data {spec} has images of shape {data.image_shape} but the model "
            f"takes {tuple(input_shape)}: pass --calib-data with images of the model's size"
        )
    available = len(data.x_train)
    if available < samples:
        raise UsageError(
            f"calibration data {spec} has only {available} training images, fewer than the "
            f"{samples} asked: lower --calib-samples to {available} or less"
        )
    rng = np.random.default_rng(run.seed)
    index = np.sort(rng.choice(available, size=samples, replace=False))
    return data.x_train[index].astype(np.float32)
