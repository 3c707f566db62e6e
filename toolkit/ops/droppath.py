"""Stochastic depth: drop a whole residual branch per sample during training."""

import keras


@keras.saving.register_keras_serializable(package="toolkit")
class DropPath(keras.layers.Layer):
    """Per-sample stochastic depth: keep with prob 1-rate and scale by 1/(1-rate); identity
    at inference."""

    def __init__(self, rate: float, seed: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"rate must be in [0, 1), got {rate}")
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, x: keras.KerasTensor, training: bool | None = None) -> keras.KerasTensor:
        """Zero whole samples at random when training."""
        if not training or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        shape = (keras.ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
        noise = keras.random.uniform(shape, seed=self.seed_generator, dtype=x.dtype)
        mask = keras.ops.cast(noise < keep, x.dtype)
        return x * (mask / keep)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """Same shape as the input."""
        return tuple(input_shape)

    def get_config(self) -> dict:
        """Constructor arguments only."""
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}
