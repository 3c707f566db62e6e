"""Exact GELU built from Erf, so it exports to TFLite builtins and standard ONNX."""

import math

import keras

_INV_SQRT2 = 1.0 / math.sqrt(2.0)


@keras.saving.register_keras_serializable(package="toolkit")
def gelu(x: keras.KerasTensor) -> keras.KerasTensor:
    """Exact GELU, 0.5 * x * (1 + erf(x / sqrt(2))).

    Keras' own exact gelu lowers to Erfc, which tf2onnx rejects; Erf is a standard ONNX op.
    """
    return 0.5 * x * (1.0 + keras.ops.erf(x * _INV_SQRT2))
