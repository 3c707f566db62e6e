"""Which files of a bundle `toolkit ship` wrote, so that a re-ship replaces those and keeps the
rest. The bundle's model.json lists, in its ship record, every file ship wrote with its sha256;
a listed file whose bytes changed since is the user's now. A bundle from before the listing: the
files at the names ship writes for its picks (model files checked against model.json's sha256).
What is kept is carried into the new bundle as hard links (copies where the file system has
none), so that it never leaves the folder it was in until the new bundle holds it too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from toolkit.common import atomic
from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfiles.folder import LABELS_FILE, MANIFEST_FILE
from toolkit.runfiles.hashes import sha256
from toolkit.ship.measurements import bundle_record
from toolkit.ship.names import CARD_FILE, README_FILE, REPORT_FILE
from toolkit.ship.stages import needed_formats
from toolkit.ship.targets import TARGETS
from toolkit.ship.webapp import web_paths

SHIP_KEY = "ship"  # the bundle's model.json record of the picks; marks a folder as a bundle
FILES_KEY = "files"  # in the ship record: path in the bundle -> sha256 of each file ship wrote
FIXED_FILES = (MANIFEST_FILE, LABELS_FILE, CARD_FILE, README_FILE, REPORT_FILE)
WAY_OUT = "move it out of the bundle to keep it, or pass --out NEW_FOLDER"


@dataclass(frozen=True)
class Earlier:
    """What is at --out: the files ship wrote there (replaced) and the rest (kept)."""

    ours: tuple[str, ...]
    kept: tuple[str, ...]  # files, links and empty folders ship did not write
    changed: tuple[str, ...]  # files ship wrote that changed since: the user's now, kept

    @property
    def keeps(self) -> tuple[str, ...]:
        """Every path kept, sorted."""
        return tuple(sorted((*self.kept, *self.changed)))


def listing(folder: Path) -> dict[str, str]:
    """Every file in `folder` but model.json: path relative to it -> sha256."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    found = {p.relative_to(folder).as_posix(): sha256(p) for p in files}
    found.pop(MANIFEST_FILE, None)
    return found


def bundle_paths(model_files: Iterable[str], web_models: Iterable[str]) -> set[str]:
    """The paths a bundle of `model_files` holds, with web/ for each of `web_models`."""
    paths = {*FIXED_FILES, *model_files}
    for model in web_models:
        paths.update(web_paths(model))
    return paths


def planned_paths(targets: Iterable[str]) -> set[str]:
    """Every path a bundle for `targets` may hold, whatever file each target picks."""
    targets = tuple(targets)
    formats = needed_formats(targets)
    files = [n for f in formats for n in (FORMATS[f].filename, *FORMATS[f].companions)]
    web = [FORMATS[f].filename for f in formats if f in TARGETS["web"].formats]
    return bundle_paths(files, web if "web" in targets else [])


def _entries(out: Path) -> list[str]:
    """Files, links and empty folders under `out`, relative to it; a UsageError when a folder
    in it cannot be read (what it holds is unknown, so none of it may go)."""

    def unreadable(exc: OSError) -> None:
        raise UsageError(
            f"--out {out}: cannot read {exc.filename} ({exc.strerror}): make it readable, "
            "or pass --out NEW_FOLDER"
        )

    found = []
    for root, dirs, files in os.walk(out, onerror=unreadable):
        here = Path(root)
        links = [d for d in dirs if (here / d).is_symlink()]
        found += [(here / name).relative_to(out).as_posix() for name in (*files, *links)]
        if not dirs and not files and here != out:
            found.append(here.relative_to(out).as_posix())
    return found


def _legacy_names(manifest: dict) -> tuple[set[str], dict[str, str]]:
    """A bundle before the listing: the names ship wrote for its picks, and the model files'
    sha256 from model.json."""
    artifacts = {f: e for f, e in (manifest.get("artifacts") or {}).items() if isinstance(e, dict)}
    hashes = {
        str(e["file"]): str(e["sha256"])
        for e in artifacts.values()
        if e.get("file") and e.get("sha256")
    }
    files = [str(e["file"]) for e in artifacts.values() if e.get("file")]
    files += [c for f in artifacts if f in FORMATS for c in FORMATS[f].companions]
    picks = (manifest.get(SHIP_KEY) or {}).get("picks") or {}
    web = [str(picks["web"].get("file"))] if isinstance(picks.get("web"), dict) else []
    hashes.update({f"web/{name}": hashes[name] for name in web if name in hashes})
    return bundle_paths(files, web), hashes


def earlier_bundle(out: Path) -> Earlier:
    """What of `out` ship wrote (nothing, when it holds no bundle) and what it keeps."""
    if not out.is_dir():
        return Earlier((), (), ())
    manifest = bundle_record(out)
    record = manifest.get(SHIP_KEY)
    listed = record.get(FILES_KEY) if isinstance(record, dict) else None
    if not isinstance(record, dict):
        names, hashes = set(), {}
    elif isinstance(listed, dict):
        names, hashes = {MANIFEST_FILE, *listed}, listed
    else:
        names, hashes = _legacy_names(manifest)
    ours, kept, changed = [], [], []
    for path in _entries(out):
        full = out / path
        if path not in names or full.is_symlink() or not full.is_file():
            kept.append(path)
        elif path in hashes and sha256(full) != hashes[path]:
            changed.append(path)
        else:
            ours.append(path)
    return Earlier(tuple(ours), tuple(sorted(kept)), tuple(sorted(changed)))


def _clash(path: str, paths: set[str], folder: bool = False) -> str | None:
    """The path of `paths` that `path` is, lies inside, or (unless it is a `folder`) holds."""
    if path in paths:
        return path
    parents = {str(p) for p in PurePosixPath(path).parents}
    for other in sorted(paths):
        if other in parents:
            return other
        if not folder and path in {str(p) for p in PurePosixPath(other).parents}:
            return other
    return None


def check_keeps(out: Path, earlier: Earlier, paths: set[str]) -> None:
    """A UsageError when a file ship keeps at `out` is where the new bundle writes one (a kept
    empty folder may hold new files)."""
    for path in earlier.keeps:
        folder = (out / path).is_dir() and not (out / path).is_symlink()
        clash = _clash(path, paths, folder)
        if clash is None:
            continue
        if path in earlier.changed:
            raise UsageError(
                f"--out {out}: {path} changed since `toolkit ship` wrote it, and this ship "
                f"writes it again: {WAY_OUT}"
            )
        raise UsageError(
            f"--out {out}: {path} is not a file `toolkit ship` wrote, and this ship writes "
            f"{clash}: {WAY_OUT}"
        )


def carry(out: Path, folder: Path, paths: Iterable[str]) -> None:
    """Each of `paths` in `out` put at the same place in `folder`: a file as a hard link (a copy
    where there is none), a link as a link, an empty folder as a folder."""
    for path in paths:
        source, dest = out / path, folder / path
        for parent in reversed(PurePosixPath(path).parents[:-1]):
            if not (folder / parent).exists():
                (folder / parent).mkdir()
                shutil.copymode(out / parent, folder / parent)
        if source.is_symlink():
            os.symlink(os.readlink(source), dest)
        elif source.is_dir():
            if not dest.is_dir():
                dest.mkdir()
                shutil.copymode(source, dest)
        else:
            try:
                os.link(source, dest)
            except OSError as exc:
                if atomic.full_disk(exc) is not None:
                    raise
                shutil.copy2(source, dest)


def kept_line(out: Path, earlier: Earlier, most: int = 5) -> str | None:
    """One line naming what ship found at `out` and kept, or None when nothing."""
    keeps = earlier.keeps
    if not keeps:
        return None
    names = [f"{p} (changed since ship wrote it)" if p in earlier.changed else p for p in keeps]
    more = f", and {len(names) - most} more" if len(names) > most else ""
    return (
        f"kept in {out}: {len(names)} file(s) `toolkit ship` did not write: "
        f"{', '.join(names[:most])}{more}"
    )
