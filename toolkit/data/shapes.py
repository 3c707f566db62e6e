"""`shapes[:N]`: a seeded synthetic 10-class 32x32 RGB dataset of simple shapes on noise."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.data.dataset import Dataset
from toolkit.data.split import split_dataset

DEFAULT_COUNT = 3000
SIZE = 32
_CHUNK = 2048
# Tuned so a 2-block ViT with 4x4 patches reaches ~55% validation accuracy in 5 epochs:
# shape radius in pixels, dark random background colour, a bright random shape colour
# 140-175 levels above it per channel, gaussian pixel noise.
R_MIN, R_MAX = 8.0, 13.0
BG_MAX = 80
GAP = (140, 176)
NOISE = 8.0

# Each mask takes offsets dx, dy from the shape's centre and its radius r, all (n, 1, 1) or
# broadcast (n, SIZE, SIZE), and returns a boolean (n, SIZE, SIZE) mask.
Mask = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def _dots(dx: np.ndarray, dy: np.ndarray, r: np.ndarray) -> np.ndarray:
    step = 0.7 * r
    gx = np.clip(np.round(dx / step), -1, 1) * step
    gy = np.clip(np.round(dy / step), -1, 1) * step
    return (dx - gx) ** 2 + (dy - gy) ** 2 <= np.maximum(1.1, 0.25 * r) ** 2


SHAPES: dict[str, Mask] = {
    "circle": lambda dx, dy, r: dx**2 + dy**2 <= r**2,
    "square": lambda dx, dy, r: np.maximum(abs(dx), abs(dy)) <= 0.8 * r,
    "triangle": lambda dx, dy, r: (dy <= 0.8 * r) & (1.8 * abs(dx) <= dy + r),
    "cross": lambda dx, dy, r: (
        (np.minimum(abs(dx), abs(dy)) <= np.maximum(1.0, 0.25 * r))
        & (np.maximum(abs(dx), abs(dy)) <= r)
    ),
    "horizontal_bar": lambda dx, dy, r: (abs(dy) <= np.maximum(1.0, 0.3 * r)) & (abs(dx) <= r),
    "vertical_bar": lambda dx, dy, r: (abs(dx) <= np.maximum(1.0, 0.3 * r)) & (abs(dy) <= r),
    "ring": lambda dx, dy, r: (dx**2 + dy**2 <= r**2) & (dx**2 + dy**2 >= (0.55 * r) ** 2),
    "diamond": lambda dx, dy, r: abs(dx) + abs(dy) <= r,
    "x": lambda dx, dy, r: (
        (np.minimum(abs(dx - dy), abs(dx + dy)) <= np.maximum(1.2, 0.3 * r))
        & (np.maximum(abs(dx), abs(dy)) <= 0.8 * r)
    ),
    "dot_grid": _dots,
}
CLASS_NAMES = list(SHAPES)


def generate_shapes(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(count, 32, 32, 3) uint8 images and balanced int64 labels, identical for a seed."""
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.arange(count) % len(SHAPES)).astype(np.int64)
    x = np.empty((count, SIZE, SIZE, 3), np.uint8)
    for start in range(0, count, _CHUNK):
        x[start : start + _CHUNK] = _draw(y[start : start + _CHUNK], rng)
    return x, y


def _draw(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random position, size and colours per image; the shape of its label on a noisy field."""
    n = len(labels)
    r = rng.uniform(R_MIN, R_MAX, (n, 1, 1))
    cx = rng.uniform(r[:, 0, 0], SIZE - 1 - r[:, 0, 0])[:, None, None]
    cy = rng.uniform(r[:, 0, 0], SIZE - 1 - r[:, 0, 0])[:, None, None]
    grid = np.arange(SIZE, dtype=np.float32)
    dx = grid[None, None, :] - cx
    dy = grid[None, :, None] - cy
    mask = np.zeros((n, SIZE, SIZE), bool)
    for label, shape in enumerate(SHAPES.values()):
        sel = labels == label
        if sel.any():
            mask[sel] = np.broadcast_to(shape(dx[sel], dy[sel], r[sel]), (sel.sum(), SIZE, SIZE))
    background = rng.integers(0, BG_MAX, (n, 1, 1, 3))
    foreground = background + rng.integers(GAP[0], GAP[1], (n, 1, 1, 3))
    noise = NOISE * rng.standard_normal((n, SIZE, SIZE, 3), dtype=np.float32)
    images = np.where(mask[..., None], foreground, background) + noise
    return np.clip(np.round(images), 0, 255).astype(np.uint8)


def load_shapes(arg: str | None, seed: int = 0, val_fraction: float | None = None) -> Dataset:
    """The synthetic shapes dataset of N images (default 3000), split 80/10/10 (`val_fraction`:
    see `toolkit.data.split.flat_fractions`)."""
    count = DEFAULT_COUNT
    if arg is not None:
        if not arg.strip().isdigit() or int(arg) <= 0:
            raise UsageError(
                f"shapes size '{arg}' is not a positive integer: use --data shapes "
                f"or --data shapes:{DEFAULT_COUNT}"
            )
        count = int(arg)
    x, y = generate_shapes(count, seed)
    return split_dataset(
        "shapes", x, y, CLASS_NAMES, seed, synthetic=True, val_fraction=val_fraction
    )
