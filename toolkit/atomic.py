"""Atomic file writes: a temp file in the target's folder, then a rename.

An interrupted write never leaves a file that looks valid, nor replaces a good one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: str | Path, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temp path beside `target`; rename it onto `target` only if the block succeeds."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=suffix or target.suffix, dir=target.parent
    )
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(target: str | Path, text: str) -> None:
    """Write `text` to `target` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text)


def write_json(target: str | Path, data: object) -> None:
    """Write `data` as indented JSON to `target` atomically."""
    write_text(target, json.dumps(data, indent=2, sort_keys=False) + "\n")


def write_with(target: str | Path, writer: Callable[[Path], None]) -> None:
    """Call `writer(tmp_path)` and move the result onto `target` atomically."""
    with atomic_path(target) as tmp:
        writer(tmp)
