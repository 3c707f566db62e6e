"""Distribution strategies by `--strategy` name, per Keras backend, and the precision policies.

"mirrored" is data parallelism over every visible accelerator (or the logical CPUs when there
is none): tf.distribute.MirroredStrategy on TensorFlow, keras.distribution.DataParallel on JAX.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import keras

from toolkit.errors import UsageError


@dataclass(frozen=True)
class Placement:
    """Where training runs: enter `scope()` around building, compiling and fitting the model."""

    scope: Callable[[], contextlib.AbstractContextManager]
    replicas: int  # model copies a global batch is split across


def _tf_default() -> Placement:
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    return Placement(strategy.scope, strategy.num_replicas_in_sync)


def _tf_mirrored() -> Placement:
    import tensorflow as tf

    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    strategy = tf.distribute.MirroredStrategy([d.name for d in devices])
    return Placement(strategy.scope, strategy.num_replicas_in_sync)


def _jax_data_parallel() -> Placement:
    devices = keras.distribution.list_devices()
    distribution = keras.distribution.DataParallel(devices=devices)
    return Placement(distribution.scope, len(devices))


def _single_device() -> Placement:
    return Placement(contextlib.nullcontext, 1)


# --strategy name -> backend -> placement factory
STRATEGIES: dict[str, dict[str, Callable[[], Placement]]] = {
    "default": {"tensorflow": _tf_default, "jax": _single_device, "torch": _single_device},
    "mirrored": {"tensorflow": _tf_mirrored, "jax": _jax_data_parallel},
}

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


def check_strategy(strategy: str) -> Callable[[], Placement]:
    """The factory of `--strategy` on the current backend; UsageError where it has none."""
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown strategy '{strategy}': choose one of {', '.join(STRATEGIES)}")
    backend = keras.backend.backend()
    factory = STRATEGIES[strategy].get(backend)
    if factory is None:
        where = ", ".join(STRATEGIES[strategy])
        raise UsageError(
            f"--strategy {strategy} is not available on the {backend} backend: "
            f"train with KERAS_BACKEND set to one of {where}, or use --strategy default"
        )
    return factory


def make_placement(strategy: str) -> Placement:
    """The placement `--strategy` names on the current backend."""
    return check_strategy(strategy)()
