"""Edge-deployment toolkit for attention-light vision transformers (ShiftViT, SPT+LSA ViT).

One import root. Importing it is cheap: it picks the Keras backend (KERAS_BACKEND, else the
first installed of TensorFlow, JAX, PyTorch) and imports nothing heavy. The stages' Python API
is imported when first used:

    import toolkit
    run = toolkit.train(toolkit.TrainOptions(model="shiftvit", preset="tiny"), out="runs/a")
    toolkit.export_run(run, "all")          # the package toolkit.export
    verified = toolkit.verify_run(run)      # toolkit.verify: RUN/verify.json
    result = toolkit.bench_run(run)         # toolkit.bench
    shipped = toolkit.ship_run(run, "android,web", max_drop=0.5)  # toolkit.ship: RUN/ship
    model = toolkit.load_run_model(run)     # model.keras, checked against config.json

`toolkit.keras_setup.setup_keras()` registers the custom Keras objects, so that
``keras.saving.load_model(path, safe_mode=True)`` needs no ``custom_objects``; every stage that
loads a model calls it.
"""

from __future__ import annotations

import importlib
import os

from toolkit.common.backend import choose_backend

os.environ.setdefault("KERAS_BACKEND", choose_backend())
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first use: `toolkit --help` stays light)
_API = {
    "train": "toolkit.training.train",
    "TrainOptions": "toolkit.training.options",
    "export_run": "toolkit.export",  # the packages set TensorFlow up before their converters
    "verify_run": "toolkit.verify",
    "bench_run": "toolkit.bench.benchmark",
    "ship_run": "toolkit.ship.bundle",
    "open_run": "toolkit.runfiles.folder",
    "load_run_model": "toolkit.runmodel",
}
_STAGES = ("export", "verify", "bench", "ship")  # subpackages, also reachable as attributes
__all__ = [*_API, *_STAGES, "__version__"]


def __getattr__(name: str):
    """The Python API and the stage packages, imported on first use (PEP 562)."""
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
    elif name in _STAGES:
        value = importlib.import_module(f"toolkit.{name}")
    else:
        raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, *_STAGES])
