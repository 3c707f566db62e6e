"""Atomic file writes: a temp file in the target's folder, then a rename.

An interrupted write never leaves a file that looks valid, nor replaces a good one; a killed
one leaves a hidden `.NAME.XXXXXXXX.SUFFIX` temp file, which `remove_stale_temps` deletes.
`check_writable` tells, before long work starts, whether a target can be written at all (with a
probe file named after its process; a killed check's probe is removed by the next check there).
A write that finds the disk full (or a file size or quota limit) raises an OSError whose
`filename` is the target, whatever call failed (`full_disk` finds it in a chain).
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from toolkit.common.errors import RunError, UsageError
from toolkit.common.scratch import pid_alive

# errno of a write that a full disk (or a size limit, RLIMIT_FSIZE, or a quota) refused
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
PROBE_PREFIX = ".toolkit-write-check."  # then the checking process's pid, a dot, mkstemp's 8
_PROBE = re.compile(re.escape(PROBE_PREFIX) + r"(?:(\d+)\.)?[a-z0-9_]{8}")
OLD_PROBE_AGE_S = 60  # a probe of the older pid-less name this old is a killed check's


def full_disk(exc: BaseException) -> OSError | None:
    """The disk-full OSError `exc` is, was raised from, or was raised while handling; or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DISK_FULL:
            return current
        current = current.__cause__ or current.__context__
    return None


def full_disk_error(
    exc: BaseException, kept: str = "each file is whole, new or as it was"
) -> RunError | None:
    """The one-line RunError of a write that a full disk refused (`exc` or its chain), naming
    the file, what is `kept`, and the way on; None when `exc` is no such fault."""
    full = full_disk(exc)
    if full is None:
        return None
    reason = (full.strerror or os.strerror(full.errno)).lower()
    where = f" writing {full.filename}" if full.filename else ""
    return RunError(f"{reason}{where}: {kept}; free space and run the same command again")


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def check_writable(target: str | Path, flag: str = "", hint: str = "pass another path") -> Path:
    """UsageError (one line ending in `hint`) unless a file can be written at `target`.

    Its folder must be a folder, or creatable (the nearest existing ancestor a folder), `target`
    must not be a folder, and a temp file must be creatable in that folder; nothing is left.
    """
    target = Path(target)
    name = f"{flag} {target}" if flag else str(target)
    if target.is_dir():
        raise UsageError(f"cannot write {name}: it is a folder; remove or rename it, or {hint}")
    check_writable_folder_above(target, name, hint)
    return target


def check_writable_folder_above(target: Path, name: str, hint: str) -> None:
    """UsageError (one line naming `name`, ending in `hint`) unless the nearest existing folder
    above `target` (where it, or its missing parents, would be made) is a folder in which a temp
    file can be created. Nothing is left."""
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"cannot write {name}: {folder} is a file, not a folder; {hint}")
    remove_stale_probes(folder)
    try:
        fd, probe = tempfile.mkstemp(prefix=f"{PROBE_PREFIX}{os.getpid()}.", dir=folder)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(
            f"cannot write {name}: {folder} is not writable ({reason}); {hint}"
        ) from exc
    os.close(fd)
    os.unlink(probe)


def remove_stale_probes_below(folder: Path) -> list[Path]:
    """`remove_stale_probes` in `folder` and every folder under it (a bundle's web/, ...)."""
    if not folder.is_dir():
        return []
    below = [d for d in folder.rglob("*") if d.is_dir() and not d.is_symlink()]
    return [path for d in (folder, *below) for path in remove_stale_probes(d)]


def remove_stale_probes(folder: Path) -> list[Path]:
    """Delete this user's write-check probes in `folder` that a killed check left: those of a
    process no longer alive (and those of the older, pid-less name over a minute old)."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    stale = []
    for path in entries:
        match = _PROBE.fullmatch(path.name)
        if match is None:
            continue
        try:
            info = path.lstat()
        except OSError:
            continue
        if info.st_uid != os.getuid() or not path.is_file() or path.is_symlink():
            continue
        pid = match.group(1)
        if pid is not None and (int(pid) <= 0 or pid_alive(int(pid))):
            continue
        if pid is None and time.time() - info.st_mtime < OLD_PROBE_AGE_S:
            continue
        path.unlink(missing_ok=True)
        stale.append(path)
    return stale


def remove_stale_temps(target: str | Path, suffix: str | None = None) -> list[Path]:
    """Delete the temp files an interrupted `atomic_path(target)` left beside `target`."""
    target = Path(target)
    if not target.parent.is_dir():
        return []
    pattern = re.compile(
        re.escape(_temp_prefix(target)) + r"[A-Za-z0-9_]{8}" + re.escape(suffix or target.suffix)
    )
    stale = [p for p in target.parent.iterdir() if pattern.fullmatch(p.name) and p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


@contextmanager
def atomic_path(target: str | Path, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temp path beside `target`; rename it onto `target` only if the block succeeds."""
    target = Path(target)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=_temp_prefix(target), suffix=suffix or target.suffix, dir=target.parent
        )
    except OSError as exc:
        _name_target(exc, target)
        raise
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp_path, target)
    except BaseException as exc:
        full = full_disk(exc)
        if full is not None and full is exc:
            _name_target(exc, target)
        elif full is not None:  # e.g. a library's error raised from it: the target's, too
            raise _named(full, target) from exc
        raise
    finally:
        tmp_path.unlink(missing_ok=True)


def _named(exc: OSError, target: Path) -> OSError:
    return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(target))


def _name_target(exc: OSError, target: Path) -> None:
    """Make a disk-full `exc` name `target` (not the temp file, or no file at all)."""
    if exc.errno in DISK_FULL:
        exc.filename = str(target)


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
