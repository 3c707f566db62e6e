"""Keep the C++ log lines of TensorFlow, converters and runtimes off the terminal.

Native libraries write straight to file descriptor 2 ("Created TensorFlow Lite XNNPACK
delegate", "Could not find cuda drivers", ...), ignoring Python's logging; they would break the
CLI's one-line errors and tables. Set TF_CPP_MIN_LOG_LEVEL=0 or 1 to let them through.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


def native_logs_wanted() -> bool:
    """True when the user asked for TensorFlow's diagnostics (TF_CPP_MIN_LOG_LEVEL < 2)."""
    return os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2") < "2"


@contextmanager
def captured_native_stderr() -> Iterator[list[str]]:
    """Redirect fd 2 to a temp file for the block; the yielded list gets its lines at exit."""
    lines: list[str] = []
    if native_logs_wanted():
        yield lines
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            lines.extend(log.read().decode(errors="replace").splitlines())
