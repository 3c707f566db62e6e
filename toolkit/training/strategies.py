"""Distribution strategies by `--strategy` name, per Keras backend, and the precision policies.

"mirrored" is data parallelism over every visible accelerator (or the logical CPUs when there
is none): tf.distribute.MirroredStrategy on TensorFlow, keras.distribution.DataParallel on JAX.
It is refused where that is fewer than 2 devices: it would train as "default" does.
"multi-process" (JAX) is data parallelism over every device of every process of the run
(toolkit.training.cluster joins them first): each process feeds its own part of every global
batch, so Keras must not shard the data itself (auto_shard_dataset=False).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import keras

from toolkit.common.errors import UsageError


@dataclass(frozen=True)
class Placement:
    """Where training runs: enter `scope()` around building, compiling and fitting the model."""

    scope: Callable[[], contextlib.AbstractContextManager]
    replicas: int  # model copies a global batch is split across (devices of all processes)
    processes: int = 1  # processes feeding each global batch, each its own part


def _tf_default() -> Placement:
    import tensorflow as tf

    strategy = tf.distribute.get_strategy()
    return Placement(strategy.scope, strategy.num_replicas_in_sync)


def _tf_devices() -> list[str]:
    """TensorFlow's logical GPUs, or its logical CPUs when there is no GPU."""
    import tensorflow as tf

    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    return [d.name for d in devices]


def _tf_mirrored() -> Placement:
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(_tf_devices())
    return Placement(strategy.scope, strategy.num_replicas_in_sync)


def _jax_devices() -> list[str]:
    """JAX's devices: its accelerators, or the host CPUs XLA was told to split into."""
    return list(keras.distribution.list_devices())


def _jax_data_parallel() -> Placement:
    devices = _jax_devices()
    distribution = keras.distribution.DataParallel(devices=devices)
    return Placement(distribution.scope, len(devices))


def _jax_multi_process() -> Placement:
    import jax

    devices = _jax_devices()  # every process's, once the cluster is joined
    distribution = keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
    return Placement(distribution.scope, len(devices), jax.process_count())


def _single_device() -> Placement:
    return Placement(contextlib.nullcontext, 1)


# --strategy name -> backend -> placement factory
STRATEGIES: dict[str, dict[str, Callable[[], Placement]]] = {
    "default": {"tensorflow": _tf_default, "jax": _single_device, "torch": _single_device},
    "mirrored": {"tensorflow": _tf_mirrored, "jax": _jax_data_parallel},
    "multi-process": {"jax": _jax_multi_process},  # TensorFlow's MultiWorkerMirrored: not yet
}

# --strategy name -> backend -> the devices its placement splits each batch across; a strategy
# listed here needs at least two of them, else it would run as `default` while config.json
# said otherwise (mirrored on a machine without GPUs trains on the one CPU device).
SPLIT_DEVICES: dict[str, dict[str, Callable[[], list[str]]]] = {
    "mirrored": {"tensorflow": _tf_devices, "jax": _jax_devices},
}

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


def check_strategy(strategy: str) -> Callable[[], Placement]:
    """The factory of `--strategy` on the current backend; UsageError where it has none."""
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown strategy '{strategy}': choose one of {', '.join(STRATEGIES)}")
    backend = keras.backend.backend()
    factory = STRATEGIES[strategy].get(backend)
    if factory is None:
        where = " or ".join(f"KERAS_BACKEND={name}" for name in STRATEGIES[strategy])
        raise UsageError(
            f"--strategy {strategy} is not available on the {backend} backend: "
            f"train with {where}, or use --strategy default"
        )
    devices = SPLIT_DEVICES.get(strategy, {}).get(backend)
    found = devices() if devices is not None else None
    if found is not None and len(found) < 2:
        raise UsageError(
            f"--strategy {strategy} splits each batch across 2 or more devices but {backend} "
            f"sees {len(found)} ({', '.join(found) or 'none'}): use --strategy default, or "
            "train where 2 or more GPUs are visible"
        )
    return factory


def make_placement(strategy: str) -> Placement:
    """The placement `--strategy` names on the current backend."""
    return check_strategy(strategy)()
