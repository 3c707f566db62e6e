"""model.json, the manifest of an export folder: its one reader and its one writer.

`toolkit export` merges artifact entries into it and `toolkit verify` adds parity records to
them; both go through `edit_manifest`, which reads the file, applies a change and replaces the
file atomically, so no stage writes model.json its own way.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from toolkit import atomic
from toolkit.errors import UsageError

MANIFEST_FILE = "model.json"  # in every export folder (toolkit/runfolder.py re-exports it)
EXPORT_DIR = "export"  # a run's default export folder (toolkit/runfolder.py re-exports it)

# (path, inode, size, mtime) -> sha256: a command hashes each file once, however many of its
# steps ask (bench's check against model.json, then its top-1 cache key). Only files last
# changed SETTLED_NS ago are remembered: a change within a file system's mtime granularity
# (jiffies, or a second) would otherwise keep the key of the old bytes.
_HASHED: dict[tuple, str] = {}
SETTLED_NS = 2_000_000_000


def sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes (remembered while its inode, size and mtime stay)."""
    info = os.stat(path)
    key = (os.path.abspath(path), info.st_ino, info.st_size, info.st_mtime_ns)
    if key in _HASHED:
        return _HASHED[key]
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if time.time_ns() - info.st_mtime_ns > SETTLED_NS:
        _HASHED[key] = digest.hexdigest()
    return digest.hexdigest()


def modified_files(folder: Path, manifest: dict, formats: Iterable[str]) -> dict[str, Path]:
    """Format -> file of each of `formats` whose file in `folder` no longer has the sha256
    model.json records for it (changed after export); a missing file or entry, or one without
    a recorded sha256, is not checked here."""
    changed: dict[str, Path] = {}
    for fmt in formats:
        entry = (manifest.get("artifacts") or {}).get(fmt)
        if not isinstance(entry, dict) or not entry.get("sha256") or not entry.get("file"):
            continue
        path = Path(folder) / str(entry["file"])
        if path.is_file() and sha256(path) != entry["sha256"]:
            changed[fmt] = path
    return changed


def formats_of(manifest: dict, file_name: str) -> list[str]:
    """The formats whose model.json entry is the file `file_name` ([] when none lists it)."""
    artifacts = manifest.get("artifacts")
    if not isinstance(artifacts, dict):
        return []
    return [f for f, e in artifacts.items() if isinstance(e, dict) and e.get("file") == file_name]


def export_command(manifest: dict, folder: Path, fmt: str) -> str:
    """The `toolkit export` command that writes format `fmt` into `folder` again (from the run
    model.json names as its source, where it names one)."""
    run = manifest.get("source_run")
    if run and Path(run) / EXPORT_DIR == Path(folder).resolve():
        return f"toolkit export {run} --format {fmt}"
    return f"toolkit export {run or 'RUN'} --format {fmt} --out {folder}"


def check_unmodified(
    changed: dict[str, Path], allow_modified: bool, rewrite: Callable[[str], str]
) -> None:
    """Refuse the `changed` files (from `modified_files`) in one line naming the export command
    that rewrites one (`rewrite(fmt)`) and --allow-modified; with allow_modified, warn of each
    on stderr instead, and go on."""
    for fmt, path in changed.items():
        what = f"{path} was changed after export (its sha256 is not the one {MANIFEST_FILE} records"
        if not allow_modified:
            raise UsageError(
                f"{what} for {fmt}): export it again (`{rewrite(fmt)}`), or pass "
                "--allow-modified to use it as it is"
            )
        print(
            f"toolkit: warning: {what} for {fmt}): using it as it is (--allow-modified); its "
            "results are not those of the exported model",
            file=sys.stderr,
        )


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
