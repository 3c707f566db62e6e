"""Import TensorFlow without the C++ log lines it prints before logging is initialised.

TensorFlow 2.21 writes "Could not find cuda drivers ..." and "failed call to cuInit" to the
process' stderr on every CPU-only machine, ignoring TF_CPP_MIN_LOG_LEVEL; they would break the
CLI's one-line errors. Devices are therefore probed inside the quiet block too. Python-level
errors are unaffected. Set TF_CPP_MIN_LOG_LEVEL=0 to see TensorFlow's own diagnostics.
"""

from __future__ import annotations

import os
import sys


def import_tensorflow_quietly() -> None:
    """Import tensorflow and probe devices with fd 2 on /dev/null, unless TF logs are wanted."""
    if "tensorflow" in sys.modules or os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2") < "2":
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow

        tensorflow.config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
