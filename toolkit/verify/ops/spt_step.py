"""The parameter-free SPT step as a layer, so it exports and reloads like the other ops."""

from __future__ import annotations

import keras

from toolkit.ops import shifted_patches


@keras.saving.register_keras_serializable(package="toolkit_verify")
class ShiftedPatches(keras.layers.Layer):
    """`shifted_patches(x, patch_size)`: (N, H, W, C) -> (N, H*W/P^2, 5*P*P*C)."""

    def __init__(self, patch_size: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.patch_size = patch_size

    def call(self, images: keras.KerasTensor) -> keras.KerasTensor:
        """Shift, stack and cut into flat patches."""
        return shifted_patches(images, self.patch_size)

    def get_config(self) -> dict:
        """Constructor arguments only."""
        return {**super().get_config(), "patch_size": self.patch_size}
