"""Mixup and CutMix of training batches: soft labels (one row per image, summing to 1).

TensorFlow mixes in tf.data with keras.layers.MixUp and CutMix (`tf_pipeline`). The NumPy
batches of the other backends mix here, in NumPy: a Keras layer called in a PyDataset worker
would run eagerly, op by op, outside the compiled step. The NumPy functions draw as Keras'
layers do: per image a Beta(alpha, alpha) weight and a partner from a permutation of the
batch; CutMix draws its Beta's alpha from U(0, cutmix) per batch, as keras.layers.CutMix's
`factor` does, or takes alpha = cutmix (`cutmix_alpha="fixed"`), and weighs the labels by the
pixels actually pasted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# how CutMix gets its Beta(alpha, alpha)'s alpha from `cutmix` (TrainRecipe.cutmix_alpha):
# "uniform" draws it from U(0, cutmix) per batch (keras.layers.CutMix's factor); "fixed" is
# alpha = cutmix (the CutMix paper's, and the SPT/LSA paper's code: beta 1, lambda uniform)
CUTMIX_ALPHAS: dict[str, Callable[[float, np.random.Generator], float]] = {
    "uniform": lambda cutmix, rng: rng.uniform(0.0, cutmix) + 1e-6,
    "fixed": lambda cutmix, rng: cutmix,
}


@dataclass(frozen=True)
class Mixing:
    """What to mix: Mixup alpha, CutMix factor (0: off), the probability a batch is mixed
    (with both on, each mixed batch gets one of them, half each), the number of classes, and
    how CutMix's alpha comes from its factor (a key of CUTMIX_ALPHAS)."""

    mixup: float = 0.0
    cutmix: float = 0.0
    prob: float = 1.0
    num_classes: int = 0
    cutmix_alpha: str = "uniform"

    @property
    def active(self) -> bool:
        """Whether any batch gets mixed."""
        return (self.mixup > 0 or self.cutmix > 0) and self.prob > 0


def choose(mix: Mixing, draw: float, pick: float) -> str | None:
    """'mixup', 'cutmix' or None (not mixed) for a batch, from two U(0, 1) draws."""
    if not mix.active or draw >= mix.prob:
        return None
    if mix.mixup > 0 and mix.cutmix > 0:
        return "cutmix" if pick < 0.5 else "mixup"
    return "mixup" if mix.mixup > 0 else "cutmix"


def mixup(
    images: np.ndarray, onehot: np.ndarray, alpha: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Each image blended with a partner by a Beta(alpha, alpha) weight; labels alike."""
    partner = rng.permutation(len(images))
    weight = rng.beta(alpha, alpha, len(images)).astype(np.float32)
    w = weight[:, None, None, None]
    mixed = w * images + (1.0 - w) * images[partner]
    return mixed.astype(np.float32), weight[:, None] * onehot + (1.0 - weight[:, None]) * onehot[
        partner
    ]


def cutmix(
    images: np.ndarray,
    onehot: np.ndarray,
    factor: float,
    rng: np.random.Generator,
    alpha_rule: str = "uniform",
) -> tuple[np.ndarray, np.ndarray]:
    """A box of a partner pasted into each image (area 1 - Beta(alpha, alpha) weight, alpha
    from `factor` as CUTMIX_ALPHAS[alpha_rule] says); labels weighted by the pixels kept and
    pasted."""
    n, height, width, _ = images.shape
    alpha = CUTMIX_ALPHAS[alpha_rule](factor, rng)
    ratio = np.sqrt(1.0 - rng.beta(alpha, alpha, n))
    box_h, box_w = ratio * height, ratio * width
    y0 = rng.uniform(0.0, 1.0, n) * (height - box_h)
    x0 = rng.uniform(0.0, 1.0, n) * (width - box_w)
    rows = np.arange(height)[None, :, None]
    cols = np.arange(width)[None, None, :]
    inside = (
        (rows >= y0[:, None, None])
        & (rows < (y0 + box_h)[:, None, None])
        & (cols >= x0[:, None, None])
        & (cols < (x0 + box_w)[:, None, None])
    )
    partner = rng.permutation(n)
    mixed = np.where(inside[..., None], images[partner], images)
    kept = (1.0 - inside.mean(axis=(1, 2))).astype(np.float32)[:, None]
    return mixed.astype(np.float32), kept * onehot + (1.0 - kept) * onehot[partner]


def mix_batch(
    images: np.ndarray, labels: np.ndarray, mix: Mixing, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(images, float32 soft labels) of a batch: mixed with probability `mix.prob`."""
    onehot = np.eye(mix.num_classes, dtype=np.float32)[np.asarray(labels).reshape(-1)]
    which = choose(mix, *rng.uniform(0.0, 1.0, 2))
    if which == "mixup":
        images, onehot = mixup(images, onehot, mix.mixup, rng)
    elif which == "cutmix":
        images, onehot = cutmix(images, onehot, mix.cutmix, rng, mix.cutmix_alpha)
    return images, onehot.astype(np.float32)
