"""Import TensorFlow without the C++ log lines it prints before its logging is initialised.

TensorFlow 2.21 prints "Could not find cuda drivers ..." and "failed call to cuInit" on every
CPU-only machine, ignoring TF_CPP_MIN_LOG_LEVEL, so devices are probed inside the quiet block.
"""

from __future__ import annotations

import os
import sys

from toolkit.common.backend import backend_installed
from toolkit.common.native_logs import captured_native_stderr


def import_tensorflow_quietly() -> None:
    """Import tensorflow and probe its devices with native stderr captured."""
    if "tensorflow" in sys.modules:
        return
    with captured_native_stderr():
        import tensorflow

        tensorflow.config.list_physical_devices()


def import_keras_quietly() -> None:
    """Import Keras on its backend, TensorFlow (when it is the backend) without its log lines.
    Building a model needs no more; loading one needs `toolkit.keras_setup.setup_keras`."""
    if os.environ.get("KERAS_BACKEND") == "tensorflow" and backend_installed("tensorflow"):
        import_tensorflow_quietly()
    import keras  # noqa: F401
