"""`toolkit export`: a run's model as ONNX and TFLite files with a model.json manifest.

`export_run(run, formats)` is the Python API; `command` maps `toolkit export`'s arguments to it.
"""

from toolkit.keras_setup import setup_keras

setup_keras()  # TensorFlow imported quietly and the custom layers registered, before converters

from toolkit.export.converters import CONVERTERS, Converter  # noqa: E402
from toolkit.export.errors import ExportError  # noqa: E402
from toolkit.export.pipeline import Exported, export_run  # noqa: E402

__all__ = ["CONVERTERS", "Converter", "ExportError", "Exported", "export_run"]
