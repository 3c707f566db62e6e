"""Calibration images for int8 formats: seeded draws from the TRAINING split of a data spec.

`calib_count` is the one rule for how many: the number asked, or when none was asked the
default, lowered (in one line on stderr) to the training images the data has.
"""

from __future__ import annotations

import sys

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.formats import DEFAULT_CALIB_SAMPLES
from toolkit.runfiles.data import run_dataset
from toolkit.runfiles.folder import Run


def calib_count(asked: int | None, available: int, spec: str) -> int:
    """Calibration images to draw from `available` training images of `spec`: `asked` (a
    UsageError when the data has fewer), or, not asked, the default or all of them if fewer."""
    if available < 1:
        raise UsageError(
            f"calibration data {spec} has no training images: pass --calib-data with some"
        )
    if asked is None:
        if available < DEFAULT_CALIB_SAMPLES:
            print(
                f"toolkit: note: calibrating on all {available} training images of {spec} "
                f"(fewer than the default {DEFAULT_CALIB_SAMPLES}; --calib-samples N sets it)",
                file=sys.stderr,
            )
        return min(available, DEFAULT_CALIB_SAMPLES)
    if available < asked:
        raise UsageError(
            f"calibration data {spec} has only {available} training images, fewer than the "
            f"{asked} asked: lower --calib-samples to {available} or less"
        )
    return asked


def calibration_images(
    run: Run, input_shape: tuple[int, int, int], spec: str | None, samples: int | None
) -> np.ndarray:
    """float32 0-255 (N, H, W, 3) train images of `spec` (default: the run's data), N by
    `calib_count` (`samples` None: not asked)."""
    # calibration uses no labels: other classes are fine
    data, spec = run_dataset(run, spec, "--calib-data")
    if tuple(data.image_shape) != tuple(input_shape):
        raise UsageError(
            f"calibration data {spec} has images of shape {data.image_shape} but the model "
            f"takes {tuple(input_shape)}: pass --calib-data with images of the model's size"
        )
    available = len(data.x_train)
    count = calib_count(samples, available, spec)
    rng = np.random.default_rng(run.seed)
    index = np.sort(rng.choice(available, size=count, replace=False))
    return data.x_train[index].astype(np.float32)
