"""One line per step of long work (export, int8 search, verify, bench), on stderr.

Stdout keeps the results and tables; stderr is flushed at once so `toolkit demo` and a
terminal show where a minutes-long command is.
"""

from __future__ import annotations

import sys


def progress(stage: str, done: int, total: int, what: str) -> None:
    """Print `stage i of n: what` to stderr and flush, e.g. `bench row 3 of 12: onnx ...`."""
    print(f"   {stage} {done} of {total}: {what}", file=sys.stderr, flush=True)
