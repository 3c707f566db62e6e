"""Import TensorFlow without the C++ log lines it prints before logging is initialised.

TensorFlow 2.21 writes "Could not find cuda drivers ..." and similar lines to the process'
stderr on every CPU-only import, ignoring TF_CPP_MIN_LOG_LEVEL; they would break the CLI's
one-line errors. Python-level errors are unaffected: stderr is restored before they print.
"""

from __future__ import annotations

import os
import sys


def import_tensorflow_quietly() -> None:
    """Import tensorflow with fd 2 pointed at /dev/null, unless the user asked for TF logs."""
    if "tensorflow" in sys.modules or os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2") < "2":
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow  # noqa: F401
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
