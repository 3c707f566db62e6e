"""model.json, the manifest of an export folder: its one reader and its one writer.

`toolkit export` merges artifact entries into it and `toolkit verify` adds parity records to
them; both go through `edit_manifest`, which reads the file, applies a change and replaces the
file atomically, so no stage writes model.json its own way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from toolkit import atomic
from toolkit.errors import UsageError

MANIFEST_FILE = "model.json"  # in every export folder (toolkit/runfolder.py re-exports it)


def sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(path: Path) -> dict:
    """An existing model.json, or {} when it is missing or unreadable (it is rebuilt)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_manifest(path: Path, how: str) -> dict:
    """An existing model.json that lists artifacts, for a stage that uses them; unreadable or
    listing none is a UsageError ending in `how` (the way out)."""
    try:
        manifest = json.loads(Path(path).read_text())
        artifacts = manifest["artifacts"]
        if not isinstance(artifacts, dict):
            raise TypeError(f"artifacts is a {type(artifacts).__name__}, not an object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is unreadable ({exc!r}): {how}") from exc
    if not artifacts:
        raise UsageError(f"{path} lists no artifacts: {how}")
    return manifest


def edit_manifest(folder: Path, change: Callable[[dict], dict | None]) -> dict:
    """Apply `change` to FOLDER/model.json ({} when absent) and write the result atomically;
    `change` returns the new manifest, or None to leave the file untouched. Returns it."""
    path = Path(folder) / MANIFEST_FILE
    old = read_manifest(path)
    new = change(old)
    if new is None:
        return old
    atomic.write_json(path, new)
    return new
