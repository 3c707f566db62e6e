"""Stochastic depth: drop a whole residual branch per sample during training."""

import keras

from toolkit.ops.dropout import Dropout


@keras.saving.register_keras_serializable(package="toolkit")
class DropPath(Dropout):
    """Per-sample stochastic depth: keep with prob 1-rate and scale by 1/(1-rate); identity
    at inference. Dropout's arguments, one draw per sample instead of per element."""

    def call(self, x: keras.KerasTensor, training: bool | None = None) -> keras.KerasTensor:
        """Zero whole samples at random when training."""
        if not training or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        shape = (keras.ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
        noise = keras.random.uniform(shape, seed=self.seed_generator, dtype=x.dtype)
        mask = keras.ops.cast(noise < keep, x.dtype)
        return x * (mask / keep)
