"""`toolkit export`: a run's model as ONNX and TFLite files with a model.json manifest.

`export_run(run, formats)` is the Python API; `command` maps `toolkit export`'s arguments to it.
The converters import TensorFlow: they load on first use, after `setup_keras()`, so that
`toolkit export --help` starts without it.
"""

from __future__ import annotations

from toolkit.export.conversion_error import ExportError
from toolkit.keras_setup import loaded_after_setup

# name -> the module of this package that defines it, imported when the name is first used
_CONVERTING = {
    "CONVERTERS": "converters",
    "Converter": "converters",
    "Exported": "exporter",
    "export_run": "exporter",
}

__all__ = ["CONVERTERS", "Converter", "ExportError", "Exported", "export_run"]


__getattr__ = loaded_after_setup("toolkit.export", _CONVERTING)
