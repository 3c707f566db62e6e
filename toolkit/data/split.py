"""Seeded stratified train/validation/test split and the Dataset built from it."""

from __future__ import annotations

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.data.dataset import Dataset
from toolkit.data.stream import FolderImages, select

MIN_IMAGES = 10
FLAT_FRACTIONS = (0.8, 0.1, 0.1)  # train/val/test of data given as one pool of images
TEST_FRACTION = FLAT_FRACTIONS[2]


def flat_fractions(val_fraction: float | None = None) -> tuple[float, float, float]:
    """Train/val/test shares of one pool of images: 80/10/10, or with `val_fraction` (the
    share of the non-test images held out for validation) the same 10% test and the rest
    split by it."""
    if val_fraction is None:
        return FLAT_FRACTIONS
    rest = 1.0 - TEST_FRACTION
    return (rest * (1.0 - val_fraction), rest * val_fraction, TEST_FRACTION)


def carve_validation(
    y: np.ndarray, val_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train, val) indices of a given training split, `val_fraction` of each class
    held out for validation (stratified, seeded)."""
    keep, carve, _ = stratified_split(y, (1.0 - val_fraction, val_fraction, 0.0), seed)
    return keep, carve


def stratified_split(
    y: np.ndarray, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1), seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted (train, val, test) indices; each class with >= 3 images lands in every split."""
    if len(fractions) != 3 or min(fractions) < 0 or not np.isclose(sum(fractions), 1.0):
        raise ValueError(f"fractions must be three non-negative numbers summing to 1: {fractions}")
    y = np.asarray(y).reshape(-1)
    rng = np.random.default_rng(seed)
    parts: tuple[list, list, list] = ([], [], [])
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        n_val, n_test = (_share(len(idx), f) for f in fractions[1:])
        if len(idx) < 3:
            n_val, n_test = min(len(idx) - 1, 1), 0
        n_train = len(idx) - n_val - n_test
        parts[0].append(idx[:n_train])
        parts[1].append(idx[n_train : n_train + n_val])
        parts[2].append(idx[n_train + n_val :])
    return tuple(np.sort(np.concatenate(p or [np.zeros(0, np.int64)])) for p in parts)


def _share(n: int, fraction: float) -> int:
    """round(n * fraction), at least one image when the fraction is not zero."""
    return max(1, round(n * fraction)) if fraction > 0 else 0


def require_images(name: str, count: int) -> None:
    """Raise UsageError when `count` images are too few to split."""
    if count < MIN_IMAGES:
        raise UsageError(
            f"{name} has too few images: found {count}, need at least {MIN_IMAGES} "
            "for a train/validation/test split; add images"
        )


def split_dataset(
    name: str,
    x: np.ndarray | FolderImages,
    y: np.ndarray,
    class_names: list[str],
    seed: int,
    synthetic: bool = False,
    val_fraction: float | None = None,
) -> Dataset:
    """The Dataset holding the seeded stratified split of (x, y): 80/10/10, or 10% test and
    `val_fraction` of the rest for validation (`flat_fractions`)."""
    require_images(name, len(x))
    tr, va, te = stratified_split(y, flat_fractions(val_fraction), seed=seed)
    return Dataset(
        name=name,
        x_train=select(x, tr),
        y_train=y[tr],
        x_val=select(x, va),
        y_val=y[va],
        x_test=select(x, te),
        y_test=y[te],
        class_names=list(class_names),
        synthetic=synthetic,
    )
