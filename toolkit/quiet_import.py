"""Import TensorFlow without the C++ log lines it prints before its logging is initialised.

TensorFlow 2.21 prints "Could not find cuda drivers ..." and "failed call to cuInit" on every
CPU-only machine, ignoring TF_CPP_MIN_LOG_LEVEL, so devices are probed inside the quiet block.
"""

from __future__ import annotations

import sys

from toolkit.native_logs import captured_native_stderr


def import_tensorflow_quietly() -> None:
    """Import tensorflow and probe its devices with native stderr captured."""
    if "tensorflow" in sys.modules:
        return
    with captured_native_stderr():
        import tensorflow

        tensorflow.config.list_physical_devices()
