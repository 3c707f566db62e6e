"""The serving signature of every artifact: `serving_default`, input `image`, output `logits`
(ONNX) or `probabilities` (the .tflite app files, which end in a softmax)."""

from __future__ import annotations

import keras
import tensorflow as tf

SIGNATURE_KEY = "serving_default"
INPUT_NAME = "image"
OUTPUT_NAME = "logits"
PROBABILITIES = "probabilities"  # the .tflite files' output, and the name of their softmax layer


def input_spec(input_shape: tuple[int, int, int]) -> tf.TensorSpec:
    """float32 NHWC images of any batch size, named `image`."""
    return tf.TensorSpec([None, *input_shape], tf.float32, name=INPUT_NAME)


def serving_call(model: keras.Model, output: str = OUTPUT_NAME):
    """image -> {output: model(image)} in inference mode (a plain Python callable)."""

    def serve(image: tf.Tensor) -> dict[str, tf.Tensor]:
        return {output: model(image, training=False)}

    return serve


def with_probabilities(model: keras.Model) -> keras.Model:
    """`model` ending in a float32 softmax layer named `probabilities`: the same layers and
    model name, so a converter's tensors keep their Keras scopes (verify's boundaries find
    the logits layer inside, and the softmax as the output)."""
    probabilities = keras.layers.Softmax(name=PROBABILITIES, dtype="float32")(model.outputs[0])
    return keras.Model(model.inputs, probabilities, name=model.name)


def serving_function(
    model: keras.Model, input_shape: tuple[int, int, int]
) -> tf.types.experimental.GenericFunction:
    """`serving_call` traced as a tf.function with the fixed input signature."""
    return tf.function(serving_call(model), input_signature=[input_spec(input_shape)])
