"""ViT's class token: a learned token prepended to the sequence, read out for the head."""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="toolkit")
class ClassToken(keras.layers.Layer):
    """(N, T, D) -> (N, 1 + T, D): a trainable (1, D) token first, as in ViT (Dosovitskiy et
    al. 2021) and the SPT/LSA paper's code (`cls_token`, before the position embedding)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def build(self, input_shape):
        self.token = self.add_weight(
            name="token",
            shape=(1, 1, input_shape[-1]),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
        )

    def call(self, x):
        token = keras.ops.cast(self.token, x.dtype)
        batch = keras.ops.broadcast_to(token, (keras.ops.shape(x)[0], 1, x.shape[-1]))
        return keras.ops.concatenate([batch, x], axis=1)

    def compute_output_shape(self, input_shape):
        tokens = None if input_shape[1] is None else input_shape[1] + 1
        return (input_shape[0], tokens, input_shape[2])


@keras.saving.register_keras_serializable(package="toolkit")
class ClassTokenReadout(keras.layers.Layer):
    """(N, T, D) -> (N, D): the first token, the one ClassToken put there."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def call(self, x):
        return x[:, 0, :]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])
