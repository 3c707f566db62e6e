"""Edge-deployment toolkit for attention-light vision transformers.

Importing the package registers every custom Keras object (layers, the learning-rate
schedule), so ``keras.saving.load_model(path, safe_mode=True)`` needs no ``custom_objects``.
That needs TensorFlow: without it installed (a GPU box with onnxruntime-gpu only), or with
TOOLKIT_IMPORT_KERAS=0 (a benchmark worker timing an ONNX or TFLite file, whose memory figure
must not include TensorFlow), the runtime adapters for .onnx and .tflite still import.
"""

import importlib.util
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

KERAS_IMPORTED = (
    importlib.util.find_spec("tensorflow") is not None
    and os.environ.get("TOOLKIT_IMPORT_KERAS", "1") != "0"
)

if KERAS_IMPORTED:
    from toolkit.quiet_import import import_tensorflow_quietly

    import_tensorflow_quietly()

    from toolkit import ops  # noqa: F401
    from toolkit.models import position  # noqa: F401
    from toolkit.training import schedule  # noqa: F401

__version__ = "0.1.0"
