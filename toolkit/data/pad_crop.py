"""The CIFAR recipes' random crop (torchvision's RandomCrop(size, padding=N)): zero-pad N pixels
per side, then take a size x size window; in keras.ops for every backend, with a NumPy
reference. Unlike a resize and crop it shifts the image without rescaling it."""

from __future__ import annotations

import numpy as np
from keras import ops


def pad_crop(images, offsets, padding: int):
    """images (B, H, W, C), each zero-padded by `padding` pixels per side, then its H x W window
    at `offsets` (B, 2) [row, col], each from 0 to 2 * padding."""
    _, height, width, channels = images.shape
    batch = ops.shape(images)[0]
    padded = ops.pad(images, [[0, 0], [padding, padding], [padding, padding], [0, 0]])
    offsets = ops.cast(offsets, "int32")
    rows = offsets[:, 0:1] + ops.arange(height, dtype="int32")  # (B, H)
    rows = ops.broadcast_to(rows[:, :, None, None], (batch, height, width + 2 * padding, channels))
    padded = ops.take_along_axis(padded, rows, axis=1)
    cols = offsets[:, 1:2] + ops.arange(width, dtype="int32")  # (B, W)
    cols = ops.broadcast_to(cols[:, None, :, None], (batch, height, width, channels))
    return ops.take_along_axis(padded, cols, axis=2)


def reference_pad_crop(images: np.ndarray, offsets: np.ndarray, padding: int) -> np.ndarray:
    """NumPy reference of `pad_crop`: a zero canvas, the image in its middle, one window each."""
    batch, height, width, channels = images.shape
    out = np.empty_like(images)
    for i in range(batch):
        canvas = np.zeros((height + 2 * padding, width + 2 * padding, channels), images.dtype)
        canvas[padding : padding + height, padding : padding + width] = images[i]
        row, col = (int(v) for v in offsets[i])
        out[i] = canvas[row : row + height, col : col + width]
    return out


def reference_windows(out: np.ndarray, images: np.ndarray, padding: int) -> list[tuple | None]:
    """For each augmented image in `out`, the offset (row, col) of the padded-crop window of its
    image in `images` that it equals, None where none does: how tests check a random crop."""
    every = [(r, c) for r in range(2 * padding + 1) for c in range(2 * padding + 1)]
    windows = reference_pad_crop(
        np.repeat(images, len(every), axis=0), np.tile(every, (len(images), 1)), padding
    )
    windows = windows.reshape(len(images), len(every), *images.shape[1:])
    return [
        next((every[k] for k, w in enumerate(windows[i]) if np.array_equal(o, w)), None)
        for i, o in enumerate(out)
    ]
