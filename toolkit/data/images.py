"""Decode one image file of any format/mode into a square uint8 RGB array."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import tensorflow as tf

from toolkit.errors import UsageError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")


def load_image(path: str | Path, size: int = 32) -> np.ndarray:
    """(size, size, 3) uint8 RGB: decoded (gray/RGBA/16-bit -> RGB), bilinear antialiased resize."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read image {path} ({e.strerror}): fix or remove the file") from e
    try:
        image = tf.io.decode_image(data, channels=3, dtype=tf.uint8, expand_animations=False)
    except (tf.errors.OpError, ValueError) as e:
        raise UsageError(
            f"cannot decode image {path}: not a valid PNG, JPEG, BMP, GIF or WebP; "
            "fix or remove the file"
        ) from e
    if image.shape[0] == size and image.shape[1] == size:
        return image.numpy()
    resized = tf.image.resize(image, (size, size), method="bilinear", antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8).numpy()


def load_images(paths: Iterable[str | Path], size: int = 32) -> np.ndarray:
    """(N, size, size, 3) uint8 stack of `load_image` for every path."""
    images = [load_image(p, size) for p in paths]
    if not images:
        return np.zeros((0, size, size, 3), np.uint8)
    return np.stack(images)
