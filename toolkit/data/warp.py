"""Per-image affine warp of NHWC images in keras.ops: the resize-crop, rotation and zoom of the
training augmentation on every backend, with TensorFlow's ImageProjectiveTransformV3 semantics
(bilinear, "nearest" or "reflect" fill) and a NumPy reference."""

from __future__ import annotations

import numpy as np
from keras import ops

FILL_MODES = ("nearest", "reflect")


def _fold(coords, size: int, fill_mode: str):
    """Map a source coordinate outside [0, size - 1] inside it, as TF's fill modes do."""
    if fill_mode == "reflect" and size > 1:
        period = 2.0 * size
        coords = ops.mod(coords, period)  # reflect about the pixel edges: dcba|abcd|dcba
        coords = ops.where(coords >= size, period - coords - 1.0, coords)
    return ops.clip(coords, 0.0, size - 1.0)


def affine_warp(images, transforms, fill_mode: str = "nearest"):
    """Bilinear warp: output (x, y) of image i reads input (a0 x + a1 y + a2, b0 x + b1 y + b2).

    images (B, H, W, C) float; transforms (B, 6) rows [a0, a1, a2, b0, b1, b2] in pixel
    coordinates (TF's projective transform without the last two terms).
    """
    if fill_mode not in FILL_MODES:
        raise ValueError(f"fill_mode must be one of {FILL_MODES}, got {fill_mode!r}")
    _, height, width, channels = images.shape
    batch = ops.shape(images)[0]
    ys, xs = ops.meshgrid(
        ops.arange(height, dtype="float32"), ops.arange(width, dtype="float32"), indexing="ij"
    )
    t = ops.cast(transforms, "float32")[:, :, None, None]
    src_x = _fold(t[:, 0] * xs + t[:, 1] * ys + t[:, 2], width, fill_mode)
    src_y = _fold(t[:, 3] * xs + t[:, 4] * ys + t[:, 5], height, fill_mode)
    x0, y0 = ops.floor(src_x), ops.floor(src_y)
    wx = ops.expand_dims(ops.reshape(src_x - x0, (batch, height * width)), -1)
    wy = ops.expand_dims(ops.reshape(src_y - y0, (batch, height * width)), -1)
    x0 = ops.cast(x0, "int32")
    y0 = ops.cast(y0, "int32")
    x1 = ops.minimum(x0 + 1, width - 1)
    y1 = ops.minimum(y0 + 1, height - 1)
    flat = ops.reshape(images, (batch, height * width, channels))

    def tap(rows, cols):
        index = ops.reshape(rows * width + cols, (batch, height * width, 1))
        index = ops.broadcast_to(index, (batch, height * width, channels))
        return ops.take_along_axis(flat, index, axis=1)

    dtype = flat.dtype
    wx, wy = ops.cast(wx, dtype), ops.cast(wy, dtype)
    top = tap(y0, x0) * (1 - wx) + tap(y0, x1) * wx
    bottom = tap(y1, x0) * (1 - wx) + tap(y1, x1) * wx
    return ops.reshape(top * (1 - wy) + bottom * wy, (batch, height, width, channels))


def reference_affine_warp(
    images: np.ndarray, transforms: np.ndarray, fill_mode: str = "nearest"
) -> np.ndarray:
    """NumPy reference of `affine_warp`, pixel by pixel in float64."""
    batch, height, width, _ = images.shape
    out = np.zeros(images.shape, np.float64)

    def fold(c: float, size: int) -> float:
        if fill_mode == "reflect" and size > 1:
            c = c % (2 * size)
            if c >= size:
                c = 2 * size - c - 1
        return min(max(c, 0.0), size - 1.0)

    for i in range(batch):
        a0, a1, a2, b0, b1, b2 = (float(v) for v in transforms[i])
        for y in range(height):
            for x in range(width):
                sx = fold(a0 * x + a1 * y + a2, width)
                sy = fold(b0 * x + b1 * y + b2, height)
                x0, y0 = int(np.floor(sx)), int(np.floor(sy))
                x1, y1 = min(x0 + 1, width - 1), min(y0 + 1, height - 1)
                fx, fy = sx - x0, sy - y0
                img = images[i].astype(np.float64)
                top = img[y0, x0] * (1 - fx) + img[y0, x1] * fx
                bottom = img[y1, x0] * (1 - fx) + img[y1, x1] * fx
                out[i, y, x] = top * (1 - fy) + bottom * fy
    return out


def crop_transforms(offsets, scale: float):
    """Transforms of resize-by-1/scale then crop at integer `offsets` (B, 2) [row, col]:
    output pixel j reads resized pixel j + o, i.e. input (j + o + 0.5) * scale - 0.5."""
    offsets = ops.cast(offsets, "float32")
    rows, cols = offsets[:, 0], offsets[:, 1]
    zeros = ops.zeros_like(rows)
    s = ops.full_like(rows, scale)
    return ops.stack(
        [s, zeros, (cols + 0.5) * scale - 0.5, zeros, s, (rows + 0.5) * scale - 0.5], axis=1
    )


def rotate_zoom_transforms(angles, zoom_x, zoom_y, height: int, width: int):
    """Transforms of a zoom (zoom_x, zoom_y) then a rotation by `angles` about the centre:
    keras RandomRotation followed by RandomZoom as one warp."""
    angles, zoom_x, zoom_y = (ops.convert_to_tensor(v, "float32") for v in (angles, zoom_x, zoom_y))
    cos, sin = ops.cos(angles), ops.sin(angles)
    cx, cy = (width - 1.0) / 2.0, (height - 1.0) / 2.0
    a0, a1 = cos * zoom_x, -sin * zoom_y
    b0, b1 = sin * zoom_x, cos * zoom_y
    return ops.stack([a0, a1, cx - a0 * cx - a1 * cy, b0, b1, cy - b0 * cx - b1 * cy], axis=1)
