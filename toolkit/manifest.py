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
from toolkit.runfolder import MANIFEST_FILE


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
