"""Learned absolute position embedding added to a token sequence."""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="toolkit")
class PositionEmbedding(keras.layers.Layer):
    """Adds a trainable (tokens, dim) table to (N, tokens, dim) input, as in ViT."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def build(self, input_shape):
        self.embedding = self.add_weight(
            name="embedding",
            shape=(input_shape[-2], input_shape[-1]),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
        )

    def call(self, x):
        return x + keras.ops.cast(self.embedding, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape
