"""Keras set up for the toolkit: TensorFlow imported without its start-up log lines (when it is
the backend) and every custom object registered, so ``keras.saving.load_model(path,
safe_mode=True)`` needs no ``custom_objects``. Called by each stage that builds or loads a model,
never at ``import toolkit``: the commands that need no Keras start without it.

Each object registers itself where it is defined (``keras.saving.register_keras_serializable``);
this module imports each of those modules (tests/test_layering.py checks that none is left
out), so it sits above them all: data, ops, models, training (CORE_LAYERS there). Code below
it that only builds a model calls ``toolkit.common.quiet_import.import_keras_quietly`` instead."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

from toolkit.common.quiet_import import import_keras_quietly


def setup_keras() -> None:
    """Import Keras on its backend (quietly for TensorFlow) and register the custom objects."""
    import_keras_quietly()
    import toolkit.data.random_augment  # noqa: F401  (registers the in-model augmentation)
    import toolkit.models.class_token  # noqa: F401  (registers the class token and its readout)
    import toolkit.models.position  # noqa: F401  (registers the position embeddings)
    import toolkit.ops  # noqa: F401  (registers every custom layer)
    import toolkit.training.losses  # noqa: F401  (registers the label-smoothing loss)
    import toolkit.training.schedule  # noqa: F401  (registers the learning-rate schedule)


def loaded_after_setup(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A stage package's PEP 562 `__getattr__`: each of `names` (name -> the submodule of
    `package` defining it) imported on first use, after `setup_keras()`, then kept on the
    package; so the package's `--help` starts without TensorFlow."""

    def __getattr__(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setup_keras()
        value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
