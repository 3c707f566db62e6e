"""NumPy reference of AutoAugment (`toolkit/data/autoaugment.py`), one image at a time, written
from the paper's code: its ops are Pillow's (utils/transforms.py of aanna0701/SPT_LSA_ViT), so
each op here is the Pillow op's arithmetic on a uint8 image (H, W, C), 0-255 integers held as
float64. tests/test_paper_pieces.py checks these against Pillow itself.

Where it departs from Pillow: shear samples bicubically along its one axis as Pillow's affine
transform does, but Pillow's sub-pixel rounding of the source coordinate is not copied (a level
here and there); autocontrast and equalize compute their tables in exact integer arithmetic
where Pillow's autocontrast computes in doubles (a pixel at the top of the range can land one
level lower there).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from toolkit.data.autoaugment_policies import DRAWS, FILL, OPS, POLICIES

Image = np.ndarray  # (H, W, C) whole numbers 0-255, float64


def _luma(image: Image) -> np.ndarray:
    """Pillow's RGB -> L: (299 R + 587 G + 114 B) / 1000 in 16-bit fixed point, rounded."""
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    return np.floor((r * 19595 + g * 38470 + b * 7471 + 32768) / 65536)


def _blend(degenerate: Image, image: Image, factor: float) -> Image:
    """Pillow's Image.blend(degenerate, image, factor): truncated, clipped to 0-255."""
    low, high = degenerate.astype(np.float32), image.astype(np.float32)
    mixed = low + np.float32(factor) * (high - low)  # Pillow blends in C floats
    return np.floor(np.clip(mixed, 0.0, 255.0)).astype(np.float64)


def _smooth(image: Image) -> Image:
    """Pillow's ImageFilter.SMOOTH: 3x3 kernel 1 1 1 / 1 5 1 / 1 1 1 over 13, rounded; the
    border pixels keep their values."""
    out = image.copy()
    h, w = image.shape[:2]
    kernel = np.ones((3, 3)) / 13.0
    kernel[1, 1] = 5.0 / 13.0
    acc = np.zeros_like(image[1:-1, 1:-1])
    for dy in range(3):
        for dx in range(3):
            acc = acc + kernel[dy, dx] * image[dy : h - 2 + dy, dx : w - 2 + dx]
    out[1:-1, 1:-1] = np.floor(np.clip(acc, 0.0, 255.0) + 0.5)
    return out


def _enhance(degenerate_of: Callable[[Image], Image]) -> Callable[[Image, float], Image]:
    """An ImageEnhance op: blend from its degenerate image by the factor (1 + level)."""

    def op(image: Image, factor: float) -> Image:
        return _blend(degenerate_of(image), image, factor)

    return op


def _grey(image: Image) -> Image:
    return np.repeat(_luma(image)[..., None], image.shape[2], axis=2)


def _mean_grey(image: Image) -> Image:
    return np.full_like(image, math.floor(_luma(image).mean() + 0.5))


def _affine_sample(image: Image, matrix: tuple[float, ...], cubic_axis: int | None) -> Image:
    """Pillow's affine transform with fill FILL: output pixel (x, y) takes the source point
    (a (x + .5) + b (y + .5) + c, d (x + .5) + e (y + .5) + f); outside the image: FILL; inside:
    the pixel holding it (nearest), or with `cubic_axis` 1 (x) or 0 (y) Pillow's bicubic
    (a = -1 cubic, clamped taps, truncated) along that axis, the other axis exact."""
    h, w, _ = image.shape
    a, b, c, d, e, f = matrix
    out = np.full(image.shape, FILL)
    for y in range(h):
        for x in range(w):
            u = a * (x + 0.5) + b * (y + 0.5) + c
            v = d * (x + 0.5) + e * (y + 0.5) + f
            if not (0 <= u < w and 0 <= v < h):
                continue
            if cubic_axis is None:
                out[y, x] = image[int(math.floor(v)), int(math.floor(u))]
                continue
            s = (u, v)[cubic_axis == 0] - 0.5
            base = math.floor(s)
            t = s - base
            weights = (-t + 2 * t**2 - t**3, 1 - 2 * t**2 + t**3, t + t**2 - t**3, -(t**2) + t**3)
            value = np.zeros(image.shape[2])
            for k, weight in zip(range(-1, 3), weights, strict=True):
                if cubic_axis == 1:
                    value += weight * image[int(math.floor(v - 0.5)), min(max(base + k, 0), w - 1)]
                else:
                    value += weight * image[min(max(base + k, 0), h - 1), int(math.floor(u - 0.5))]
            out[y, x] = np.floor(np.clip(value, 0.0, 255.0))
    return out


def _rotate(image: Image, degrees: float) -> Image:
    """Pillow's Image.rotate(degrees): anticlockwise about (W / 2, H / 2), nearest."""
    h, w, _ = image.shape
    angle = -math.radians(degrees)
    cos, sin = math.cos(angle), math.sin(angle)
    cx, cy = w / 2.0, h / 2.0
    matrix = (cos, sin, cx - cos * cx - sin * cy, -sin, cos, cy + sin * cx - cos * cy)
    return _affine_sample(image, matrix, None)


def _point(lut_of: Callable[[np.ndarray], np.ndarray]) -> Callable[[Image, float], Image]:
    """An op that maps each channel through a 256-entry table made from its histogram."""

    def op(image: Image, _value: float) -> Image:
        out = np.empty_like(image)
        for ch in range(image.shape[2]):
            values = image[..., ch].astype(np.int64)
            lut = lut_of(np.bincount(values.ravel(), minlength=256))
            out[..., ch] = lut[values]
        return out

    return op


def _autocontrast_lut(hist: np.ndarray) -> np.ndarray:
    """ImageOps.autocontrast: the lowest value to 0, the highest to 255, linear, truncated."""
    present = np.flatnonzero(hist)
    lo, hi = present[0], present[-1]
    if hi <= lo:
        return np.arange(256.0)
    return np.clip((np.arange(256) - lo) * 255 // (hi - lo), 0, 255).astype(np.float64)


def _equalize_lut(hist: np.ndarray) -> np.ndarray:
    """ImageOps.equalize: step = (pixels - those of the highest value) // 255; value i to
    (step // 2 + pixels below i) // step."""
    present = hist[hist > 0]
    step = (hist.sum() - present[-1]) // 255
    if len(present) <= 1 or step == 0:
        return np.arange(256.0)
    below = np.concatenate([[0], np.cumsum(hist)[:-1]])
    return np.minimum((step // 2 + below) // step, 255).astype(np.float64)


# op name -> fn(image, the op's value: `Op.value`) -> image
REFERENCE_OPS: dict[str, Callable[[Image, float], Image]] = {
    "shearX": lambda im, v: _affine_sample(im, (1, v, 0, 0, 1, 0), 1),
    "shearY": lambda im, v: _affine_sample(im, (1, 0, 0, v, 1, 0), 0),
    "translateX": lambda im, v: _affine_sample(im, (1, 0, v * im.shape[1], 0, 1, 0), None),
    "translateY": lambda im, v: _affine_sample(im, (1, 0, 0, 0, 1, v * im.shape[0]), None),
    "rotate": _rotate,
    "color": _enhance(_grey),
    "contrast": _enhance(_mean_grey),
    "brightness": _enhance(np.zeros_like),
    "sharpness": _enhance(_smooth),
    "posterize": lambda im, bits: np.floor(im / 2 ** (8 - bits)) * 2 ** (8 - bits),
    "solarize": lambda im, threshold: np.where(im < threshold, im, 255.0 - im),
    "invert": lambda im, _: 255.0 - im,
    "autocontrast": _point(_autocontrast_lut),
    "equalize": _point(_equalize_lut),
}


def reference_op(image: Image, name: str, value: float) -> Image:
    """Op `name` taking `value` (`Op.value`: the signed level, or the enhancements' factor) on
    one image (H, W, C) of whole numbers 0-255."""
    return REFERENCE_OPS[name](np.asarray(image, np.float64), value)


def reference_auto_augment(images: np.ndarray, draws: np.ndarray, policy: str) -> np.ndarray:
    """NumPy reference of `auto_augment`: per image, the sub-policy floor(draws[:, 0] * n), its
    op k applied when draws[:, 1 + k] < its probability, signed ops negated when
    draws[:, 3 + k] < 0.5. images (B, H, W, C) 0-255 (rounded first, Pillow's uint8)."""
    assert draws.shape[1] == DRAWS
    subs = POLICIES[policy]
    by_name = {op.name: op for op in OPS}
    out = np.round(np.clip(np.asarray(images, np.float64), 0.0, 255.0))
    for i, u in enumerate(np.asarray(draws, np.float64)):
        sub = subs[min(int(u[0] * len(subs)), len(subs) - 1)]
        for k, (probability, name, magnitude) in enumerate(sub):
            if u[1 + k] >= probability:
                continue
            value = by_name[name].value(magnitude, negative=u[3 + k] < 0.5)
            out[i] = reference_op(out[i], name, value)
    return out
