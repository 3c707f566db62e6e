"""Edge-deployment toolkit for attention-light vision transformers.

Importing the package registers every custom Keras object (layers, the learning-rate
schedule), so ``keras.saving.load_model(path, safe_mode=True)`` needs no ``custom_objects``.
Keras runs on the backend ``toolkit.backend.choose_backend`` picks (KERAS_BACKEND, else the
first installed of TensorFlow, JAX, PyTorch). Without that backend installed (a GPU box with
onnxruntime-gpu only), or with TOOLKIT_IMPORT_KERAS=0 (a benchmark worker timing an ONNX or
TFLite file, whose memory figure must not include a Keras backend), the runtime adapters for
.onnx and .tflite still import.
"""

import os

from toolkit.backend import backend_installed, choose_backend

os.environ.setdefault("KERAS_BACKEND", choose_backend())
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

KERAS_IMPORTED = (
    backend_installed(os.environ["KERAS_BACKEND"])
    and os.environ.get("TOOLKIT_IMPORT_KERAS", "1") != "0"
)

if KERAS_IMPORTED:
    if os.environ["KERAS_BACKEND"] == "tensorflow":
        from toolkit.quiet_import import import_tensorflow_quietly

        import_tensorflow_quietly()

    from toolkit import ops  # noqa: F401
    from toolkit.models import position  # noqa: F401
    from toolkit.training import schedule  # noqa: F401

__version__ = "0.1.0"
