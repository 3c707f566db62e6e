"""Transformer feed-forward block: Dense(gelu, or relu) + Dropout per entry of `units`."""

import keras

from toolkit.ops.dropout import Dropout
from toolkit.ops.gelu import gelu

# the activations an MLP takes, by name (get_config's): exact GELU (the papers'), and ReLU
# (the official ShiftViT code's act_layer='RELU': one elementwise max where GELU is ~8 ops)
ACTIVATIONS = {"gelu": gelu, "relu": "relu"}


@keras.saving.register_keras_serializable(package="toolkit")
class MLP(keras.layers.Layer):
    """Dense + Dropout for each width in `units`; `activation` (ACTIVATIONS: gelu, relu) on
    every Dense except the last when activate_last=False (ShiftViT: MLP([2C, C], 0.2,
    activate_last=False))."""

    def __init__(
        self,
        units: list[int],
        dropout: float = 0.0,
        activate_last: bool = True,
        activation: str = "gelu",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.units = [int(u) for u in units]
        if not self.units:
            raise ValueError("units must name at least one layer width")
        self.dropout = dropout
        self.activate_last = activate_last
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {', '.join(ACTIVATIONS)}, not {activation}"
            )
        self.activation = activation
        last = len(self.units) - 1
        self.dense_layers = [
            keras.layers.Dense(
                u,
                activation=ACTIVATIONS[activation] if (i < last or activate_last) else None,
                dtype=self.dtype_policy,
                name=f"dense_{i}",
            )
            for i, u in enumerate(self.units)
        ]
        self.dropout_layers = [
            Dropout(dropout, dtype=self.dtype_policy, name=f"dropout_{i}")
            for i in range(len(self.units))
        ]

    def build(self, input_shape: tuple) -> None:
        """Build each Dense on the previous layer's width."""
        shape = tuple(input_shape)
        for dense, units in zip(self.dense_layers, self.units, strict=True):
            dense.build(shape)
            shape = (*shape[:-1], units)

    def call(self, x: keras.KerasTensor, training: bool | None = None) -> keras.KerasTensor:
        """Apply the Dense/Dropout stack."""
        for dense, drop in zip(self.dense_layers, self.dropout_layers, strict=True):
            x = drop(dense(x), training=training)
        return x

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """Last dimension becomes units[-1]."""
        return (*tuple(input_shape)[:-1], self.units[-1])

    def get_config(self) -> dict:
        """Constructor arguments only."""
        return {
            **super().get_config(),
            "units": list(self.units),
            "dropout": self.dropout,
            "activate_last": self.activate_last,
            "activation": self.activation,
        }
