"""Random erasing (Zhong et al. 2017, arXiv:1708.04896): with probability p, a random rectangle
of each image is replaced by uniform noise or by the mean pixel (`Augmentation.erasing_fill`).
One keras.ops implementation serves the tf.data pipeline and the in-step RandomAugment layer;
a NumPy reference written from the paper sits beside it."""

from __future__ import annotations

import math

import numpy as np
from keras import ops

# the paper's CIFAR settings: erased area s_e in [0.02, 0.4] of the image, aspect r_e in
# (0.3, 1 / 0.3), drawn log-uniform as torchvision and timm do; fill: uniform noise in 0-255
# or the mean pixel (augment.ERASING_FILLS)
AREA = (0.02, 0.4)
ASPECT = 0.3
DRAWS = 5  # uniforms per image: apply?, area, aspect, top, left


def mean_pixel(images):
    """(1, 1, 1, C) float32: the per-channel mean pixel of a batch (B, H, W, C), the fill of
    erasing_fill="mean". Taken before any augmentation, it estimates the data's mean pixel
    (the SPT/LSA paper's code fills its dataset's mean) with no statistics passed in."""
    return ops.mean(ops.cast(images, "float32"), axis=(0, 1, 2), keepdims=True)


def erase(images, draws, fill, probability: float):
    """images (B, H, W, C) float 0-255 with each image's rectangle replaced by `fill`.

    draws (B, 5) uniform [0, 1): whether (draw < probability), the area, the aspect and the
    top-left corner of the rectangle; fill broadcast to the images' shape: uniform noise
    (B, H, W, C) 0-255, or a pixel (1, 1, 1, C) (`mean_pixel`). A rectangle larger than the
    image is clipped to it (the paper redraws it; clipping keeps the op branch-free).
    """
    _, height, width, _ = images.shape
    draws = ops.cast(draws, "float32")
    area = (AREA[0] + (AREA[1] - AREA[0]) * draws[:, 1]) * (height * width)
    log_aspect = math.log(ASPECT) + 2.0 * math.log(1.0 / ASPECT) * draws[:, 2]
    aspect = ops.exp(log_aspect)
    rows = ops.clip(ops.round(ops.sqrt(area * aspect)), 1.0, float(height))
    cols = ops.clip(ops.round(ops.sqrt(area / aspect)), 1.0, float(width))
    top = ops.floor(draws[:, 3] * (height - rows + 1.0))
    left = ops.floor(draws[:, 4] * (width - cols + 1.0))
    y = ops.arange(height, dtype="float32")[None, :, None]
    x = ops.arange(width, dtype="float32")[None, None, :]
    inside = (
        (y >= top[:, None, None])
        & (y < (top + rows)[:, None, None])
        & (x >= left[:, None, None])
        & (x < (left + cols)[:, None, None])
        & (draws[:, 0] < probability)[:, None, None]
    )
    return ops.where(inside[..., None], ops.cast(fill, images.dtype), images)


def reference_erase(
    images: np.ndarray, draws: np.ndarray, fill: np.ndarray, probability: float
) -> np.ndarray:
    """NumPy reference of `erase`, one image at a time, as the paper's Algorithm 1 reads."""
    out = images.copy()
    fill = np.broadcast_to(fill, images.shape)
    height, width = images.shape[1:3]
    for i, (u_apply, u_area, u_aspect, u_top, u_left) in enumerate(draws.astype(np.float64)):
        if u_apply >= probability:
            continue
        s_e = (AREA[0] + (AREA[1] - AREA[0]) * u_area) * height * width
        r_e = ASPECT ** (1.0 - 2.0 * u_aspect)  # log-uniform in (r1, 1 / r1)
        h_e = int(min(max(np.round(np.sqrt(s_e * r_e)), 1), height))
        w_e = int(min(max(np.round(np.sqrt(s_e / r_e)), 1), width))
        y_e = int(np.floor(u_top * (height - h_e + 1)))
        x_e = int(np.floor(u_left * (width - w_e + 1)))
        out[i, y_e : y_e + h_e, x_e : x_e + w_e] = fill[i, y_e : y_e + h_e, x_e : x_e + w_e]
    return out
