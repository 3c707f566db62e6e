"""Mixup and CutMix as keras.ops on a batch already on the device, for the device-resident
training path (`toolkit.training.device_data`): the same mixes as `toolkit.data.mixing`'s
NumPy ones, computed branch-free from explicit draws so that they compile into the train step
on every backend. A NumPy reference written from the papers (Zhang et al. 2018, Yun et al.
2019) sits beside them; `draw_mix` draws as `toolkit.data.mixing` does, with keras.random."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import keras
import numpy as np
from keras import ops

from toolkit.data.mixing import Mixing

NONE, MIXUP, CUTMIX = 0, 1, 2  # which mix a batch gets

# Mixing.cutmix_alpha -> CutMix's Beta alpha from `cutmix`, drawn in the step as
# toolkit.data.mixing.CUTMIX_ALPHAS draws it in NumPy (the same keys: a test holds them equal)
CUTMIX_ALPHA_DRAWS: dict[str, Callable[[float, keras.random.SeedGenerator], object]] = {
    "uniform": lambda cutmix, seed: keras.random.uniform((), 0.0, cutmix, seed=seed) + 1e-6,
    "fixed": lambda cutmix, seed: cutmix,
}


@dataclass
class MixDraws:
    """The random draws of one batch's mix: `which` (NONE, MIXUP or CUTMIX), each image's
    `partner` (a permutation of the batch), its Mixup weight, its CutMix box kept ratio
    (1 - box area / image area, a Beta draw) and the box's top-left position in [0, 1)^2."""

    which: object  # scalar int32
    partner: object  # (B,) int32
    weight: object  # (B,) float32, Beta(alpha, alpha)
    keep: object  # (B,) float32, Beta(alpha', alpha')
    corner: object  # (B, 2) float32, U(0, 1)


def draw_mix(mix: Mixing, batch: int, seed: keras.random.SeedGenerator) -> MixDraws:
    """A batch's draws as `toolkit.data.mixing.mix_batch` makes them: mixed with probability
    `mix.prob`, CutMix or Mixup half each when both are on; CutMix's alpha from `cutmix` by
    `mix.cutmix_alpha` (CUTMIX_ALPHA_DRAWS: drawn from U(0, cutmix) per batch, as
    keras.layers.CutMix's `factor`, or fixed)."""
    u = keras.random.uniform((2,), seed=seed)
    mixed = u[0] < mix.prob
    if mix.mixup > 0 and mix.cutmix > 0:
        kind = ops.where(u[1] < 0.5, CUTMIX, MIXUP)
    else:
        kind = MIXUP if mix.mixup > 0 else CUTMIX
    which = ops.cast(ops.where(mixed, kind, NONE), "int32")
    partner = ops.cast(keras.random.shuffle(ops.arange(batch), seed=seed), "int32")
    mixup_alpha = mix.mixup if mix.mixup > 0 else 1.0
    weight = keras.random.beta((batch,), mixup_alpha, mixup_alpha, seed=seed)
    cut_alpha = CUTMIX_ALPHA_DRAWS[mix.cutmix_alpha](max(mix.cutmix, 1e-6), seed)
    keep = keras.random.beta((batch,), cut_alpha, cut_alpha, seed=seed)
    corner = keras.random.uniform((batch, 2), seed=seed)
    return MixDraws(which, partner, weight, keep, corner)


def cut_boxes(keep, corner, height: int, width: int):
    """(B, H, W) bool: each image's CutMix box, sides sqrt(1 - keep) of the image's, its
    top-left corner at `corner` of the room left (pixel centres at integer coordinates)."""
    ratio = ops.sqrt(1.0 - ops.cast(keep, "float32"))
    box_h, box_w = ratio * height, ratio * width
    y0 = corner[:, 0] * (height - box_h)
    x0 = corner[:, 1] * (width - box_w)
    rows = ops.arange(height, dtype="float32")[None, :, None]
    cols = ops.arange(width, dtype="float32")[None, None, :]
    return (
        (rows >= y0[:, None, None])
        & (rows < (y0 + box_h)[:, None, None])
        & (cols >= x0[:, None, None])
        & (cols < (x0 + box_w)[:, None, None])
    )


def apply_mix(images, onehot, draws: MixDraws):
    """(images, soft labels) of a batch mixed by `draws`: images (B, H, W, C) float, onehot
    (B, K) float; labels weighted by the Mixup weight, or by the pixels CutMix kept."""
    _, height, width, _ = images.shape
    partner_images = ops.take(images, draws.partner, axis=0)
    partner_labels = ops.take(onehot, draws.partner, axis=0)
    w = ops.cast(draws.weight, images.dtype)
    mixup_images = w[:, None, None, None] * images + (1.0 - w[:, None, None, None]) * (
        partner_images
    )
    inside = cut_boxes(draws.keep, draws.corner, height, width)
    cut_images = ops.where(inside[..., None], partner_images, images)
    kept = 1.0 - ops.mean(ops.cast(inside, "float32"), axis=(1, 2))
    lam = ops.where(draws.which == MIXUP, ops.cast(draws.weight, "float32"), kept)
    lam = ops.where(draws.which == NONE, 1.0, lam)[:, None]
    labels = lam * onehot + (1.0 - lam) * partner_labels
    mixed = ops.where(draws.which == MIXUP, mixup_images, cut_images)
    return ops.where(draws.which == NONE, images, mixed), labels


def reference_mix(
    images: np.ndarray, onehot: np.ndarray, draws: MixDraws
) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of `apply_mix`, one image at a time: Mixup blends image i with its
    partner by weight lambda (labels alike); CutMix pastes the partner's box of side
    sqrt(1 - lambda) into image i and weighs the labels by the pixels each image shows."""
    which = int(np.asarray(draws.which))
    images = np.asarray(images, np.float64)
    onehot = np.asarray(onehot, np.float64)
    out, labels = images.copy(), onehot.copy()
    if which == NONE:
        return out, labels
    _, height, width, _ = images.shape
    for i, j in enumerate(np.asarray(draws.partner)):
        if which == MIXUP:
            lam = float(np.asarray(draws.weight)[i])
            out[i] = lam * images[i] + (1.0 - lam) * images[j]
        else:
            f32 = np.float32  # the box's edges rounded as the float32 step rounds them
            side = np.sqrt(f32(1.0) - f32(np.asarray(draws.keep)[i]))
            box_h, box_w = side * f32(height), side * f32(width)
            top = f32(np.asarray(draws.corner)[i, 0]) * (f32(height) - box_h)
            left = f32(np.asarray(draws.corner)[i, 1]) * (f32(width) - box_w)
            pasted = 0
            for y in range(height):
                for x in range(width):
                    if top <= y < top + box_h and left <= x < left + box_w:
                        out[i, y, x] = images[j, y, x]
                        pasted += 1
            lam = 1.0 - pasted / (height * width)
        labels[i] = lam * onehot[i] + (1.0 - lam) * onehot[j]
    return out, labels
