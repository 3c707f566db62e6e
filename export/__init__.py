"""Export a run's model to ONNX and TFLite artifacts with a model.json manifest."""

import toolkit  # noqa: F401  (Keras backend, custom layers, quiet TensorFlow import: first)

# isort: split
from export.errors import ExportError
from export.formats import CONVERTERS, Converter
from export.pipeline import export_run

__all__ = ["CONVERTERS", "Converter", "ExportError", "export_run"]
