"""Dropout whose mask comes from the fastest generator of the backend it runs on."""

import keras


def _keras_dropout(x, rate: float, seed_generator: keras.random.SeedGenerator):
    """Bernoulli(1 - rate) keep mask from `keras.random`, kept values scaled by 1 / (1 - rate)."""
    return keras.random.dropout(x, rate, seed=seed_generator)


def _dropout_fn():
    """TensorFlow: the Threefry mask (its module imports TF); any other backend: keras.random."""
    if keras.backend.backend() == "tensorflow":
        from toolkit.ops.threefry_dropout import threefry_dropout

        return threefry_dropout
    return _keras_dropout


@keras.saving.register_keras_serializable(package="toolkit")
class Dropout(keras.layers.Layer):
    """Zero each element with probability `rate` and scale the rest by 1 / (1 - rate) in
    training; identity at inference. Keras' Dropout with the same math, and on TensorFlow a
    faster mask under XLA (see `toolkit.ops.threefry_dropout`)."""

    def __init__(self, rate: float, seed: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"rate must be in [0, 1), got {rate}")
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self._mask_fn = _dropout_fn()

    def call(self, x: keras.KerasTensor, training: bool | None = None) -> keras.KerasTensor:
        """Drop at random when training."""
        if not training or self.rate == 0.0:
            return x
        return self._mask_fn(x, self.rate, self.seed_generator)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """Same shape as the input."""
        return tuple(input_shape)

    def get_config(self) -> dict:
        """Constructor arguments only."""
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}
