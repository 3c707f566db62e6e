"""Gradients and compiled calls of a layer on whichever Keras backend the tests run on, so the
op tests hold for TensorFlow, JAX and PyTorch alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import keras
import numpy as np


def _tf_gradients(layer, x, objective, training, weights):
    import tensorflow as tf

    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = objective(layer(x, training=training))
    return tape.gradient(loss, [x, *[w.value for w in weights]])


def _jax_gradients(layer, x, objective, training, weights):
    import jax
    import jax.numpy as jnp

    trainable = [v.value for v in layer.trainable_variables]
    non_trainable = [v.value for v in layer.non_trainable_variables]

    def loss(inputs, values):
        out, _ = layer.stateless_call(values, non_trainable, inputs, training=training)
        return objective(out)

    grad_x, grad_values = jax.grad(loss, argnums=(0, 1))(jnp.asarray(x), trainable)
    index = {id(v): i for i, v in enumerate(layer.trainable_variables)}
    return [grad_x, *[grad_values[index[id(w)]] for w in weights]]


def _torch_gradients(layer, x, objective, training, weights):
    import torch

    x = torch.tensor(x, requires_grad=True)
    loss = objective(layer(x, training=training))
    return torch.autograd.grad(loss, [x, *[w.value for w in weights]])


_GRADIENTS = {"tensorflow": _tf_gradients, "jax": _jax_gradients, "torch": _torch_gradients}


def layer_gradients(
    layer: keras.layers.Layer,
    x: np.ndarray,
    objective: Callable,
    training: bool,
    weights: Sequence[keras.Variable] = (),
) -> list[np.ndarray]:
    """d objective(layer(x)) / d [x, *weights] as NumPy arrays."""
    if not layer.built:
        layer.build(x.shape)
    grads = _GRADIENTS[keras.backend.backend()](layer, x, objective, training, list(weights))
    return [keras.ops.convert_to_numpy(g) for g in grads]


def training_calls(layer: keras.layers.Layer, jit: bool) -> Callable[[np.ndarray], np.ndarray]:
    """x -> layer(x, training=True) as NumPy, compiled when `jit` (TensorFlow: XLA against
    TF's own kernels; JAX: jax.jit against eager; PyTorch: eager either way); the layer's
    random state advances every call."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        step = tf.function(lambda v: layer(v, training=True), jit_compile=jit)
        return lambda x: step(tf.constant(x)).numpy()
    if backend == "jax" and jit:
        import jax

        if not layer.built:
            raise ValueError("build the layer before compiling its calls")
        trainable = [v.value for v in layer.trainable_variables]
        compiled = jax.jit(lambda nt, v: layer.stateless_call(trainable, nt, v, training=True))

        def call(x: np.ndarray) -> np.ndarray:  # the random state kept in the layer, as eagerly
            state = [v.value for v in layer.non_trainable_variables]
            out, state = compiled(state, x)
            for variable, value in zip(layer.non_trainable_variables, state, strict=True):
                variable.assign(value)
            return np.asarray(out)

        return call
    return lambda x: keras.ops.convert_to_numpy(layer(x, training=True))


def augmented(layer: keras.layers.Layer, images: np.ndarray) -> np.ndarray:
    """layer(images, training=True) as NumPy. On JAX compiled whole (`training_calls`), as the
    train step runs an in-step augmentation (eager JAX compiles each of its ops on its own: about
    twice the time); a plain call on the other backends. Not for keras.layers.RandAugment:
    compiled whole, its choice of ops took 8 times its eager time."""
    if keras.backend.backend() != "jax":
        return keras.ops.convert_to_numpy(layer(images, training=True))
    if not layer.built:
        layer.build(images.shape)
    return training_calls(layer, jit=True)(images)
