"""Shared check for custom layers: config round trip, safe-mode save/load, output shape."""

import inspect
from pathlib import Path

import keras
import numpy as np

_BASE_KEYS = set(keras.layers.Layer().get_config())


def check_layer(
    layer: keras.layers.Layer,
    input_shape: tuple[int, ...],
    expected_output_shape: tuple[int, ...],
    tmp_path: Path,
) -> None:
    """Assert config round trip, safe-mode reload with no custom_objects, and output shape.

    get_config must hold exactly the constructor's parameters on top of the base Layer keys.
    """
    config = layer.get_config()
    assert type(layer).from_config(config).get_config() == config
    params = {
        name
        for name, p in inspect.signature(type(layer).__init__).parameters.items()
        if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    assert set(config) - _BASE_KEYS == params

    inputs = keras.Input(shape=input_shape[1:])
    model = keras.Model(inputs, layer(inputs))
    assert tuple(model.output.shape) == (None, *expected_output_shape[1:])
    path = tmp_path / "m.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path, safe_mode=True)
    assert type(reloaded.layers[-1]) is type(layer)
    assert reloaded.layers[-1].get_config() == config

    x = np.random.default_rng(0).standard_normal(input_shape).astype("float32")
    expected, got = _inference([model, reloaded], x)
    assert expected.shape == tuple(expected_output_shape)
    np.testing.assert_array_equal(got, expected)


def _inference(models: list[keras.Model], x: np.ndarray) -> list[np.ndarray]:
    """Each model(x, training=False) as NumPy; on JAX in one compiled call (eagerly JAX
    compiles each op on its own, which took longer than compiling both models whole)."""
    if keras.backend.backend() != "jax":
        return [keras.ops.convert_to_numpy(m(x, training=False)) for m in models]
    import jax

    def outputs(states, inputs):
        return [
            m.stateless_call(trainable, rest, inputs, training=False)[0]
            for m, (trainable, rest) in zip(models, states, strict=True)
        ]

    states = [
        ([v.value for v in m.trainable_variables], [v.value for v in m.non_trainable_variables])
        for m in models
    ]
    return [np.asarray(out) for out in jax.jit(outputs)(states, x)]
