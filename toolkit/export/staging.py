"""Files of one format written together: each to a temp file beside its target, then, once every
one is whole, all renamed into place; a failure (a full disk) removes the temps and changes none.

The temps are named as `toolkit.common.atomic` names its own (`.NAME.XXXXXXXX.SUFFIX`), so the
`remove_stale_temps` of a later export deletes those a killed one left.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from toolkit.common import atomic


class Staged:
    """The temp files staged in one folder, by target."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.temps: dict[Path, Path] = {}  # target -> its temp file

    def path(self, name: str) -> Path:
        """A new temp file for FOLDER/name, renamed onto it when the staging block succeeds."""
        target = self.folder / name
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=target.suffix, dir=self.folder)
        except OSError as exc:
            _raise_named(exc, target)
        os.close(fd)
        self.temps[target] = Path(tmp)
        return Path(tmp)

    def write_text(self, name: str, text: str) -> None:
        """Stage FOLDER/name with `text`."""
        tmp = self.path(name)
        try:
            tmp.write_text(text)
        except OSError as exc:
            _raise_named(exc, self.folder / name)

    def target_of(self, exc: BaseException) -> OSError | None:
        """The disk-full error in `exc`'s chain, naming the target where it names a temp."""
        full = atomic.full_disk(exc)
        if full is None:
            return None
        by_temp = {str(tmp): target for target, tmp in self.temps.items()}
        if full.filename in by_temp:
            return _named(full, by_temp[full.filename])
        return full


@contextmanager
def staged(folder: Path) -> Iterator[Staged]:
    """Yield a `Staged` for `folder`; rename its temps onto their targets, last staged first,
    when the block succeeds. A disk-full error names the target, not the temp file."""
    staging = Staged(folder)
    try:
        yield staging
        mode = 0o666 & ~_umask()  # mkstemp makes 0600; give the usual mode
        for target, tmp in reversed(staging.temps.items()):
            os.chmod(tmp, mode)
            os.replace(tmp, target)
    except OSError as exc:
        full = staging.target_of(exc)
        if full is None or full is exc:
            raise
        raise full from exc
    finally:
        for tmp in staging.temps.values():
            tmp.unlink(missing_ok=True)


def _named(exc: OSError, target: Path) -> OSError:
    return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(target))


def _raise_named(exc: OSError, target: Path) -> None:
    """Raise `exc`, as an OSError naming `target` when the disk was full."""
    if exc.errno in atomic.DISK_FULL:
        raise _named(exc, target) from exc
    raise exc


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
