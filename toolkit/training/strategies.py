"""Distribution strategies by `--strategy` name."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf


def _default() -> tf.distribute.Strategy:
    return tf.distribute.get_strategy()


def _mirrored() -> tf.distribute.Strategy:
    """Data-parallel over the visible GPUs, or over the logical CPUs when there is no GPU."""
    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    return tf.distribute.MirroredStrategy([d.name for d in devices])


STRATEGIES: dict[str, Callable[[], tf.distribute.Strategy]] = {
    "default": _default,
    "mirrored": _mirrored,
}

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
