"""The serving signature of every artifact: `serving_default`, input `image`, output `logits`."""

from __future__ import annotations

import keras
import tensorflow as tf

SIGNATURE_KEY = "serving_default"
INPUT_NAME = "image"
OUTPUT_NAME = "logits"


def input_spec(input_shape: tuple[int, int, int]) -> tf.TensorSpec:
    """float32 NHWC images of any batch size, named `image`."""
    return tf.TensorSpec([None, *input_shape], tf.float32, name=INPUT_NAME)


def serving_call(model: keras.Model):
    """image -> {"logits": model(image)} in inference mode (a plain Python callable)."""

    def serve(image: tf.Tensor) -> dict[str, tf.Tensor]:
        return {OUTPUT_NAME: model(image, training=False)}

    return serve


def serving_function(
    model: keras.Model, input_shape: tuple[int, int, int]
) -> tf.types.experimental.GenericFunction:
    """`serving_call` traced as a tf.function with the fixed input signature."""
    return tf.function(serving_call(model), input_signature=[input_spec(input_shape)])
