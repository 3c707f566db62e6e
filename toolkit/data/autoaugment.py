"""AutoAugment (Cubuk et al. 2019) in keras.ops, so it runs inside the compiled train step on
any backend and in the tf.data pipeline alike (as `erasing` does); the policies are data
(`autoaugment_policies`), the NumPy reference is `autoaugment_reference`.

Branch-free: each image draws its sub-policy, and for each of the sub-policy's two ops whether
it applies and its sign; every family of ops (`FAMILIES`: one affine warp, one blend from a
degenerate image, one point table, autocontrast, equalize) is computed for the whole batch
with per-image parameters, and each image keeps the family its op belongs to. The ops keep
Pillow's uint8 arithmetic (whole numbers, truncated as Pillow truncates), so an image here is
the reference's, but for a shear's rare pixel whose source falls exactly on a tap or the edge
(float32 here, doubles there): tests/test_paper_pieces.py. A batch of 128 32x32 images takes
about 45 ms on 2 shared CPU cores (JAX, compiled; not yet timed on a GPU).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from keras import ops

from toolkit.data.autoaugment_policies import DRAWS, FILL, OP_IDS, OPS, POLICIES

# floor(a / b) of whole numbers a, b (b < 2^16): a quotient that is not whole lies 1 / b or
# more below the next whole number, so adding EXACT keeps a whole one whole where a backend
# divides inexactly (JAX on the CPU: whole quotients of autocontrast came out one level low)
EXACT = 1e-3

# Pillow's bicubic (a = -1) weights of the taps at -1, 0, 1, 2 for a fraction t
_CUBIC = (
    lambda t: -t + 2 * t * t - t * t * t,
    lambda t: 1 - 2 * t * t + t * t * t,
    lambda t: t + t * t - t * t * t,
    lambda t: -t * t + t * t * t,
)


@functools.cache
def _tables(policy: str) -> dict[str, np.ndarray]:
    """The policy as arrays (sub-policy, slot): op ids, probabilities, the op's value for
    a positive and a negative sign (`Op.value`, in doubles, then float32)."""
    subs = POLICIES[policy]
    entry = [[(p, OP_IDS[name], m) for p, name, m in sub] for sub in subs]
    return {
        "op": np.array([[e[1] for e in row] for row in entry], np.int32),
        "prob": np.array([[e[0] for e in row] for row in entry], np.float32),
        "plus": np.array([[OPS[e[1]].value(e[2]) for e in row] for row in entry], np.float32),
        "minus": np.array(
            [[OPS[e[1]].value(e[2], negative=True) for e in row] for row in entry], np.float32
        ),
    }


def auto_augment(images, draws, policy: str):
    """images (B, H, W, C) 0-255, rounded to whole numbers (Pillow's uint8), each with one
    sub-policy of `policy` (a key of POLICIES) applied: float32, the same shape.

    draws (B, DRAWS) uniform [0, 1): the sub-policy (floor(draw * count)), whether each of its
    two ops applies (draw < its probability), each op's sign (negative when draw < 0.5).
    """
    table = _tables(policy)
    count = table["op"].shape[0]
    draws = ops.cast(draws, "float32")
    index = ops.minimum(ops.cast(ops.floor(draws[:, 0] * count), "int32"), count - 1)
    images = ops.round(ops.clip(ops.cast(images, "float32"), 0.0, 255.0))
    for slot in (0, 1):
        applies = draws[:, 1 + slot] < ops.take(table["prob"][:, slot], index)
        op = ops.where(applies, ops.take(table["op"][:, slot], index), -1)
        value = ops.where(
            draws[:, 3 + slot] < 0.5,
            ops.take(table["minus"][:, slot], index),
            ops.take(table["plus"][:, slot], index),
        )
        images = apply_ops(images, op, value)
    return images


def apply_ops(images, op, value):
    """Each image (B, H, W, C) of whole numbers 0-255 with its op (B,) (an index of OPS; -1:
    none) taking its value (B,) (`Op.value`)."""
    out = images
    for family, fn in FAMILIES.items():
        ids = [i for i, o in enumerate(OPS) if o.family == family]
        onehot = ops.stack([ops.cast(op == i, "float32") for i in ids], axis=1)  # (B, ops)
        member = ops.sum(onehot, axis=1) > 0
        out = ops.where(member[:, None, None, None], fn(images, onehot, value), out)
    return out


def _names(family: str) -> list[str]:
    return [o.name for o in OPS if o.family == family]


def _affine(images, onehot, value):
    """Shear, translate, rotate: Pillow's affine transform (fill FILL): nearest, or for the
    shears bicubic along their axis (`autoaugment_reference._affine_sample`)."""
    _, height, width, channels = images.shape
    batch = ops.shape(images)[0]
    pick = dict(zip(_names("affine"), ops.unstack(onehot, axis=1), strict=True))
    angle = -value * (math.pi / 180.0)
    cos, sin = ops.cos(angle), ops.sin(angle)
    cx, cy = width / 2.0, height / 2.0
    rot = pick["rotate"]
    # source (u, v) = (a x' + b y' + c, d x' + e y' + f) at the pixel centre (x', y')
    a = 1.0 + rot * (cos - 1.0)
    b = pick["shearX"] * value + rot * sin
    c = pick["translateX"] * value * width + rot * (cx - cos * cx - sin * cy)
    d = pick["shearY"] * value - rot * sin
    e = 1.0 + rot * (cos - 1.0)
    f = pick["translateY"] * value * height + rot * (cy + sin * cx - cos * cy)
    ys, xs = ops.meshgrid(
        ops.arange(height, dtype="float32") + 0.5,
        ops.arange(width, dtype="float32") + 0.5,
        indexing="ij",
    )

    def per_image(t):
        return t[:, None, None]

    u = per_image(a) * xs + per_image(b) * ys + per_image(c)
    v = per_image(d) * xs + per_image(e) * ys + per_image(f)
    inside = (u >= 0) & (u < width) & (v >= 0) & (v < height)
    along_x, along_y = per_image(pick["shearX"]), per_image(pick["shearY"])
    cubic = along_x + along_y
    su, sv = u - 0.5 * cubic, v - 0.5 * cubic
    base_u, base_v = ops.floor(su), ops.floor(sv)
    frac = (su - base_u) * along_x + (sv - base_v) * along_y
    # pixels gathered as rows of one (B * H * W, C) table: a plain gather on every backend
    # (take_along_axis is 20 times slower in a tf.data graph)
    pixels = ops.reshape(images, (-1, channels))
    first = ops.reshape(ops.arange(batch, dtype="float32") * (height * width), (-1, 1, 1))
    total = ops.zeros_like(images)
    for k, weight in zip(range(-1, 3), _CUBIC, strict=True):
        cols = ops.clip(base_u + k * (1.0 - along_y), 0, width - 1)
        rows = ops.clip(base_v + k * along_y, 0, height - 1)
        index = ops.cast(ops.reshape(first + rows * width + cols, (-1,)), "int32")
        tap = ops.reshape(ops.take(pixels, index, axis=0), ops.shape(images))
        total = total + weight(frac)[..., None] * tap
    warped = ops.floor(ops.clip(total, 0.0, 255.0))
    return ops.where(inside[..., None], warped, FILL)


def _luma(images):
    """Pillow's RGB -> L, (B, H, W, 1): 16-bit fixed point, rounded."""
    red, green, blue = images[..., 0:1], images[..., 1:2], images[..., 2:3]  # (a sum over the
    # channel axis costs 20 times more on XLA's CPU)
    return ops.floor((red * 19595.0 + green * 38470.0 + blue * 7471.0 + 32768.0) / 65536.0)


def _smooth(images):
    """Pillow's ImageFilter.SMOOTH (1 1 1 / 1 5 1 / 1 1 1 over 13, rounded); border kept."""
    _, height, width, _ = images.shape
    total = 4.0 * images[:, 1:-1, 1:-1]
    for dy in range(3):
        for dx in range(3):
            total = total + images[:, dy : height - 2 + dy, dx : width - 2 + dx]
    inner = ops.floor(total / 13.0 + 0.5)
    padded = ops.pad(inner, [[0, 0], [1, 1], [1, 1], [0, 0]])
    rows = ops.arange(height)[:, None]
    cols = ops.arange(width)[None, :]
    interior = (rows > 0) & (rows < height - 1) & (cols > 0) & (cols < width - 1)
    return ops.where(interior[None, :, :, None], padded, images)


def _blend(images, onehot, value):
    """Color, contrast, brightness, sharpness: Pillow's blend from the degenerate image
    (grey; its mean grey; black; smoothed) by the factor `value`, in float32, truncated."""
    pick = dict(zip(_names("blend"), ops.unstack(onehot, axis=1), strict=True))
    luma = _luma(images)
    mean_grey = ops.floor(ops.mean(luma, axis=(1, 2, 3), keepdims=True) + 0.5)

    def per_image(t):
        return t[:, None, None, None]

    degenerate = (
        per_image(pick["color"]) * luma
        + per_image(pick["contrast"]) * mean_grey
        + per_image(pick["sharpness"]) * _smooth(images)
    )  # brightness: black
    mixed = degenerate + per_image(value) * (images - degenerate)
    return ops.floor(ops.clip(mixed, 0.0, 255.0))


def _point(images, onehot, value):
    """Posterize (keep `value` bits), solarize (invert at or above `value`), invert."""
    pick = dict(zip(_names("point"), ops.unstack(onehot, axis=1), strict=True))
    threshold = pick["solarize"] * value + (1.0 - pick["solarize"] - pick["invert"]) * 256.0
    quantum = pick["posterize"] * ops.power(2.0, 8.0 - value) + (1.0 - pick["posterize"])
    threshold, quantum = threshold[:, None, None, None], quantum[:, None, None, None]
    out = ops.where(images >= threshold, 255.0 - images, images)
    return ops.floor(out / quantum) * quantum


def _autocontrast(images, _onehot, _value):
    """Each channel's lowest value to 0, highest to 255, linearly, truncated."""
    low = ops.min(images, axis=(1, 2), keepdims=True)
    high = ops.max(images, axis=(1, 2), keepdims=True)
    spread = ops.where(high > low, high - low, 1.0)
    stretched = ops.clip(ops.floor((images - low) * 255.0 / spread + EXACT), 0.0, 255.0)
    return ops.where(high > low, stretched, images)


def _equalize(images, _onehot, _value):
    """Pillow's ImageOps.equalize per channel: a table from the channel's histogram."""
    _, height, width, channels = images.shape
    batch = ops.shape(images)[0]
    values = ops.cast(
        ops.transpose(ops.reshape(images, (batch, height * width, channels)), (0, 2, 1)), "int32"
    )  # (B, C, HW)
    rows = ops.reshape(ops.arange(batch * channels, dtype="int32"), (batch, channels, 1))
    ids = ops.reshape(values + rows * 256, (-1,))
    ones = ops.ones_like(ids, dtype="float32")
    hist = ops.segment_sum(ones, ids, num_segments=batch * channels * 256)
    hist = ops.reshape(hist, (batch, channels, 256))
    below = ops.cumsum(hist, axis=-1) - hist
    top = ops.max(values, axis=-1, keepdims=True)
    step = ops.floor((height * width - ops.take_along_axis(hist, top, axis=-1)) / 255.0 + EXACT)
    present = ops.sum(ops.cast(hist > 0, "float32"), axis=-1, keepdims=True)
    usable = (present > 1) & (step > 0)
    lut = ops.floor((ops.floor(step / 2.0) + below) / ops.maximum(step, 1.0) + EXACT)
    lut = ops.minimum(lut, 255.0)
    lut = ops.where(usable, lut, ops.arange(256, dtype="float32"))
    out = ops.reshape(ops.take(ops.reshape(lut, (-1,)), ids), (batch, channels, -1))
    return ops.reshape(ops.transpose(out, (0, 2, 1)), ops.shape(images))


# op family (Op.family) -> fn(images, one-hot (B, the family's ops), value (B,)) -> images
FAMILIES: dict[str, Callable] = {
    "affine": _affine,
    "blend": _blend,
    "point": _point,
    "autocontrast": _autocontrast,
    "equalize": _equalize,
}

__all__ = ["DRAWS", "FAMILIES", "apply_ops", "auto_augment"]
