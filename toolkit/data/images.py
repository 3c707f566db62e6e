"""Decode one image file of any format/mode into a square uint8 RGB array (Pillow, no TF)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from toolkit.common.errors import UsageError


def first_sentence(exc: Exception) -> str:
    """The first sentence of an exception's message (Pillow's run on for several)."""
    return str(exc).split(". ")[0].rstrip(".")


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N", "I")  # 16-bit gray: keep the high byte


def load_image(path: str | Path, size: int = 32) -> np.ndarray:
    """(size, size, 3) uint8 RGB: decoded (gray/RGBA/16-bit -> RGB, first frame of a GIF),
    turned upright by its Exif Orientation (a phone photo's, as browsers and MediaPipe do),
    then a bilinear resize that averages over the footprint when shrinking (antialiased)."""
    path = Path(path)
    try:
        with open(path, "rb") as f, Image.open(f) as image:
            image.load()
            rgb = _to_rgb(ImageOps.exif_transpose(image))
    except Image.DecompressionBombError as e:  # Pillow's guard against huge pixel counts
        raise UsageError(
            f"cannot decode image {path}: {first_sentence(e)}; shrink it below "
            f"{Image.MAX_IMAGE_PIXELS:,} pixels, or remove it"
        ) from e
    except OSError as e:
        if isinstance(e, UnidentifiedImageError) or e.strerror is None:
            raise UsageError(
                f"cannot decode image {path}: not a valid PNG, JPEG, BMP, GIF or WebP; "
                "fix or remove the file"
            ) from e
        raise UsageError(f"cannot read image {path} ({e.strerror}): fix or remove the file") from e
    except (ValueError, SyntaxError) as e:  # Pillow's errors for some malformed headers
        raise UsageError(
            f"cannot decode image {path}: not a valid PNG, JPEG, BMP, GIF or WebP; "
            "fix or remove the file"
        ) from e
    if rgb.shape[0] == size and rgb.shape[1] == size:
        return rgb
    return _resize(rgb, size)


def _to_rgb(image: Image.Image) -> np.ndarray:
    """(H, W, 3) uint8 of a decoded image; alpha is dropped, not composited."""
    if image.mode in _SIXTEEN_BIT:
        gray = np.clip(np.asarray(image).astype(np.int64) >> 8, 0, 255).astype(np.uint8)
        return np.repeat(gray[..., None], 3, axis=-1)
    if image.mode == "F":
        gray = np.clip(np.rint(np.asarray(image)), 0, 255).astype(np.uint8)
        return np.repeat(gray[..., None], 3, axis=-1)
    return np.asarray(image.convert("RGB"), dtype=np.uint8)


def _resize(rgb: np.ndarray, size: int) -> np.ndarray:
    """Bilinear (triangle filter, widened when shrinking) in float per channel, then rounded:
    TensorFlow's resize(antialias=True) within one grey level."""
    channels = [
        np.asarray(
            Image.fromarray(rgb[..., c].astype(np.float32)).resize(
                (size, size), Image.Resampling.BILINEAR
            )
        )
        for c in range(3)
    ]
    return np.clip(np.rint(np.stack(channels, axis=-1)), 0, 255).astype(np.uint8)


def load_images(paths: Iterable[str | Path], size: int = 32) -> np.ndarray:
    """(N, size, size, 3) uint8 stack of `load_image` for every path."""
    images = [load_image(p, size) for p in paths]
    if not images:
        return np.zeros((0, size, size, 3), np.uint8)
    return np.stack(images)
