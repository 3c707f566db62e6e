"""The Keras backend the toolkit trains on: which one, its version, and what differs per backend.

Training, evaluation and the keras runtime run on TensorFlow, JAX or PyTorch; export, verify
and bench need TensorFlow. Without KERAS_BACKEND the first installed of BACKENDS is used, so a
JAX-only GPU machine trains with no setting. Importing this module does not import Keras.
"""

from __future__ import annotations

import importlib.util
import os
from importlib import metadata

from toolkit.common.errors import UsageError

# backend name -> (module that must import, distribution whose version is recorded)
BACKENDS: dict[str, tuple[str, str]] = {
    "tensorflow": ("tensorflow", "tensorflow"),
    "jax": ("jax", "jax"),
    "torch": ("torch", "torch"),
}
# backends whose train step is always compiled, whatever --jit says (Keras runs JAX eagerly
# op by op otherwise, which is only good for debugging)
ALWAYS_COMPILED = frozenset({"jax"})


def installed(module: str) -> bool:
    """Whether `module` can be imported (a broken or blocked install counts as missing)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def choose_backend() -> str:
    """KERAS_BACKEND if set, else the first installed of BACKENDS (tensorflow if none is)."""
    chosen = os.environ.get("KERAS_BACKEND")
    if chosen:
        return chosen
    return next((name for name, (module, _) in BACKENDS.items() if installed(module)), "tensorflow")


def backend_installed(name: str) -> bool:
    """Whether the module backend `name` needs is installed."""
    module = BACKENDS.get(name, (name, name))[0]
    return installed(module)


def require_backend() -> str:
    """The active backend's name; UsageError when its package is not installed."""
    name = choose_backend()
    if name not in BACKENDS:
        raise UsageError(
            f"KERAS_BACKEND={name} is not supported: set it to one of {', '.join(BACKENDS)}"
        )
    if not backend_installed(name):
        raise UsageError(
            f"Keras backend {name} is not installed: pip install 'toolkit[{name}]' "
            f"or set KERAS_BACKEND to an installed one ({_installed_list()})"
        )
    return name


def _installed_list() -> str:
    found = [name for name, (module, _) in BACKENDS.items() if installed(module)]
    return ", ".join(found) or "none is"


def backend_info() -> dict[str, str]:
    """{"name", "version"} of the backend Keras runs on, recorded in every run folder."""
    import keras

    name = keras.backend.backend()
    try:
        version = metadata.version(BACKENDS[name][1])
    except (KeyError, metadata.PackageNotFoundError):
        version = "unknown"
    return {"name": name, "version": version}


def jit_compile(jit: bool) -> bool:
    """What `model.compile(jit_compile=...)` gets for `--jit`: always True on JAX."""
    import keras

    return jit or keras.backend.backend() in ALWAYS_COMPILED
