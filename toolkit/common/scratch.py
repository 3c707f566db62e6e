"""Scratch folders in the temp directory that a later run can clean up after a killed one.

Each is named `toolkit-KIND-PID-XXXXXXXX` after the process that made it: a `kill -9` skips the
owner's own cleanup, so every new scratch folder first removes those whose owner is gone. A
folder whose pid is alive is kept (a concurrent export or verify is using it; a reused pid
only delays the cleanup), as are folders of other users and ones named some other way.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = "toolkit"
# tempfile's random part: 8 characters of "abcdefghijklmnopqrstuvwxyz0123456789_"
_NAME = re.compile(rf"{PREFIX}-[a-z]+-(\d+)-[a-z0-9_]{{8}}")


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (signal 0 checks without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process; no such pid number
        return True
    return True


def remove_dead_scratch(root: str | Path | None = None) -> list[Path]:
    """Delete this user's scratch folders in `root` (default: the temp directory) whose owning
    process is no longer alive; returns them. Does nothing off POSIX, where signal 0 kills."""
    if os.name != "posix":
        return []
    folder = Path(root if root is not None else tempfile.gettempdir())
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    dead = []
    for path in entries:
        match = _NAME.fullmatch(path.name)
        if match is None or int(match.group(1)) <= 0 or pid_alive(int(match.group(1))):
            continue
        try:
            if path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        dead.append(path)
    return dead


@contextmanager
def scratch_dir(kind: str) -> Iterator[Path]:
    """A fresh `toolkit-KIND-PID-XXXXXXXX` folder in the temp directory, removed afterwards;
    the dead runs' scratch folders are removed first."""
    if not re.fullmatch(r"[a-z]+", kind):
        raise ValueError(f"scratch kind must be lowercase letters, got {kind!r}")
    remove_dead_scratch()
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}-{kind}-{os.getpid()}-") as folder:
        yield Path(folder)
