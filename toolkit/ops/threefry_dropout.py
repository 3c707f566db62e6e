"""TensorFlow's dropout mask from Threefry bits under XLA (Philox otherwise): the TF backend's
speed-up of `toolkit.ops.Dropout`, imported only when Keras runs on TensorFlow."""

import keras
import tensorflow as tf
from tensorflow.python.ops import control_flow_util

_BITS = 2**32


def _in_xla() -> bool:
    """Whether the op being traced is compiled by XLA (a `jit_compile=True` train step)."""
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def threefry_dropout(x: tf.Tensor, rate: float, seed_generator: keras.random.SeedGenerator):
    """Zero each element with probability `rate`, scale the rest by 1 / (1 - rate).

    The mask compares uint32 random bits to round(rate * 2^32). Under XLA they come from
    Threefry, which XLA's CPU backend generates about 3x faster than Philox (Keras' choice,
    which made dropout a third of a compiled ShiftViT training step); TF's own kernels only
    have Philox, so the step without XLA keeps it.
    """
    seed = tf.cast(seed_generator.next(), tf.int64)
    bits = tf.random.stateless_uniform(
        tf.shape(x),
        seed,
        minval=None,
        maxval=None,
        dtype=tf.uint32,
        alg="threefry" if _in_xla() else "philox",
    )
    keep = bits >= tf.constant(round(rate * _BITS), tf.uint32)
    return tf.where(keep, x * tf.cast(1.0 / (1.0 - rate), x.dtype), tf.zeros_like(x))
