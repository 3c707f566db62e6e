"""Exported files against what model.json records of them: their sha256 (hashed once per
command), the files changed after export, and the refusal (or --allow-modified warning) of
them. model.json itself is read and written by toolkit.runfiles.manifest alone."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from toolkit.common.errors import UsageError
from toolkit.runfiles import MANIFEST_FILE, Manifest

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


def modified_files(
    folder: Path, manifest: Manifest | Mapping, formats: Iterable[str]
) -> dict[str, Path]:
    """Format -> file of each of `formats` whose file in `folder` no longer has the sha256
    model.json records for it (changed after export); a missing file or entry, or one without
    a recorded sha256, is not checked here. (`manifest` as model.json's object: read as one.)"""
    if isinstance(manifest, Mapping):
        manifest = Manifest.from_json(manifest)
    changed: dict[str, Path] = {}
    for fmt in formats:
        entry = manifest.artifacts.get(fmt)
        if entry is None or not entry.sha256 or not entry.file:
            continue
        path = Path(folder) / entry.file
        if path.is_file() and sha256(path) != entry.sha256:
            changed[fmt] = path
    return changed


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
