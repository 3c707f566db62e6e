"""Shifted Patch Tokenization (Lee et al. 2021) from pads, slices, reshapes and transposes."""

import keras
import numpy as np


def _check_divisible(images: keras.KerasTensor, patch_size: int) -> tuple[int, int, int]:
    """Return static (H, W, C) after checking H and W are multiples of patch_size."""
    if patch_size < 1:
        raise ValueError(f"patch_size must be >= 1, got {patch_size}")
    if len(images.shape) != 4:
        raise ValueError(f"expected NHWC images, got shape {tuple(images.shape)}")
    _, height, width, channels = images.shape
    if height is None or width is None or channels is None:
        raise ValueError(f"height, width and channels must be static, got {tuple(images.shape)}")
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not divisible by patch_size {patch_size}")
    return height, width, channels


def patches(images: keras.KerasTensor, patch_size: int) -> keras.KerasTensor:
    """Cut NHWC images into flat non-overlapping patches, ordered as tf.image.extract_patches.

    Uses only 4-D reshape/transpose so it exports without ExtractImagePatches.
    """
    height, width, channels = _check_divisible(images, patch_size)
    p = patch_size
    hp, wp = height // p, width // p
    x = keras.ops.reshape(images, (-1, p, wp, p * channels))  # (N*Hp, P, Wp, P*C)
    x = keras.ops.transpose(x, (0, 2, 1, 3))  # (N*Hp, Wp, P, P*C)
    return keras.ops.reshape(x, (-1, hp * wp, p * p * channels))


def shifted_images(images: keras.KerasTensor, patch_size: int) -> keras.KerasTensor:
    """Concatenate [original, left-up, left-down, right-up, right-down] shifts by patch_size // 2.

    One zero pad then four slices of the padded image give the four diagonal shifts.
    """
    height, width, _ = _check_divisible(images, patch_size)
    h = patch_size // 2
    if h == 0:
        return keras.ops.concatenate([images] * 5, axis=-1)
    padded = keras.ops.pad(images, [[0, 0], [h, h], [h, h], [0, 0]])
    lo, hi = 0, 2 * h  # padded[i + 2h] == x[i + h]; padded[i] == x[i - h]
    left_up = padded[:, hi : hi + height, hi : hi + width, :]
    left_down = padded[:, lo : lo + height, hi : hi + width, :]
    right_up = padded[:, hi : hi + height, lo : lo + width, :]
    right_down = padded[:, lo : lo + height, lo : lo + width, :]
    return keras.ops.concatenate([images, left_up, left_down, right_up, right_down], axis=-1)


def shifted_patches(images: keras.KerasTensor, patch_size: int) -> keras.KerasTensor:
    """Parameter-free part of SPT: shifted image stack cut into flat patches (N, P_n, P*P*5C)."""
    return patches(shifted_images(images, patch_size), patch_size)


@keras.saving.register_keras_serializable(package="toolkit")
class ShiftedPatchTokenization(keras.layers.Layer):
    """SPT: shifted patches -> LayerNorm -> Dense; vanilla=True: plain patches -> Dense.

    Gives a ViT on small images a wider receptive field per token (Lee et al. 2021).
    """

    def __init__(
        self,
        patch_size: int,
        projection_dim: int,
        vanilla: bool = False,
        epsilon: float = 1e-6,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.projection_dim = projection_dim
        self.vanilla = vanilla
        self.epsilon = epsilon
        self.layer_norm = (
            None
            if vanilla
            else keras.layers.LayerNormalization(
                epsilon=epsilon, dtype=self.dtype_policy, name="layer_norm"
            )
        )
        self.projection = keras.layers.Dense(
            projection_dim, dtype=self.dtype_policy, name="projection"
        )

    def build(self, input_shape: tuple) -> None:
        """Build the sublayers for the flattened patch width."""
        _, height, width, channels = input_shape
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(
                f"image size {height}x{width} is not divisible by patch_size {self.patch_size}"
            )
        num = (height // self.patch_size) * (width // self.patch_size)
        flat = self.patch_size * self.patch_size * channels * (1 if self.vanilla else 5)
        if self.layer_norm is not None:
            self.layer_norm.build((None, num, flat))
        self.projection.build((None, num, flat))

    def call(self, images: keras.KerasTensor) -> keras.KerasTensor:
        """Tokenize NHWC images into (N, num_patches, projection_dim)."""
        if self.vanilla:
            return self.projection(patches(images, self.patch_size))
        tokens = shifted_patches(images, self.patch_size)
        return self.projection(self.layer_norm(tokens))

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """(N, (H/P) * (W/P), projection_dim)."""
        n, height, width, _ = input_shape
        num = (height // self.patch_size) * (width // self.patch_size)
        return (n, num, self.projection_dim)

    def get_config(self) -> dict:
        """Constructor arguments only."""
        return {
            **super().get_config(),
            "patch_size": self.patch_size,
            "projection_dim": self.projection_dim,
            "vanilla": self.vanilla,
            "epsilon": self.epsilon,
        }


def reference_shifted_patches(x: np.ndarray, patch_size: int) -> np.ndarray:
    """NumPy SPT patches from the paper's definition, with explicit loops over patches."""
    n, height, width, c = x.shape
    h = patch_size // 2
    offsets = [(0, 0), (h, h), (-h, h), (h, -h), (-h, -h)]  # out[i, j] = x[i + di, j + dj]
    stack = np.zeros((n, height, width, 5 * c), dtype=x.dtype)
    for k, (di, dj) in enumerate(offsets):
        for i in range(height):
            for j in range(width):
                si, sj = i + di, j + dj
                if 0 <= si < height and 0 <= sj < width:
                    stack[:, i, j, k * c : (k + 1) * c] = x[:, si, sj, :]
    p = patch_size
    rows, cols = height // p, width // p
    out = np.zeros((n, rows * cols, p * p * 5 * c), dtype=x.dtype)
    for r in range(rows):
        for q in range(cols):
            block = stack[:, r * p : (r + 1) * p, q * p : (q + 1) * p, :]
            out[:, r * cols + q, :] = block.reshape(n, -1)  # pixel row, pixel column, channel
    return out
