"""`toolkit export`: a run's model as ONNX and TFLite files with a model.json manifest.

`export_run(run, formats)` is the Python API; `command` maps `toolkit export`'s arguments to it.
The converters import TensorFlow: they load on first use, after `setup_keras()`, so that
`toolkit export --help` starts without it.
"""

from __future__ import annotations

import importlib

from toolkit.export.errors import ExportError

# name -> the module of this package that defines it, imported when the name is first used
_CONVERTING = {
    "CONVERTERS": "converters",
    "Converter": "converters",
    "Exported": "pipeline",
    "export_run": "pipeline",
}

__all__ = ["CONVERTERS", "Converter", "ExportError", "Exported", "export_run"]


def __getattr__(name: str) -> object:
    """The converting names, imported on first use (PEP 562) once TensorFlow is imported quietly
    and the custom layers are registered."""
    if name not in _CONVERTING:
        raise AttributeError(f"module 'toolkit.export' has no attribute {name!r}")
    from toolkit.keras_setup import setup_keras

    setup_keras()
    value = getattr(importlib.import_module(f"toolkit.export.{_CONVERTING[name]}"), name)
    globals()[name] = value
    return value
