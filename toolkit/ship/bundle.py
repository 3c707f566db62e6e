"""`ship_run`: bring the run up to date, pick a file per target, and write the bundle folder.

The bundle is built in a scratch folder beside --out and renamed into place: an interrupted ship
leaves no half bundle (and its scratch folder is removed by the next one; an earlier bundle a
killed ship had moved aside is put back). Like `yolo export`, which replaces its earlier output,
ship replaces an earlier bundle at --out (a folder whose model.json has a `ship` record), or
fills an empty folder; any other existing --out is refused. Of an earlier bundle it replaces
only the files it wrote (owned.py): the rest is carried into the new one, and named. A full disk
is one line (RunError), with the earlier bundle as it was.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from toolkit.common import atomic
from toolkit.common.argtypes import ALL, choose_names
from toolkit.common.errors import RunError, UsageError
from toolkit.common.scratch import PREFIX, pid_alive, remove_dead_scratch
from toolkit.formats import FORMATS
from toolkit.runfiles import write_manifest
from toolkit.runfiles.classnames import class_names_of
from toolkit.runfiles.folder import LABELS_FILE, MANIFEST_FILE, labels_text, open_run
from toolkit.runfiles.hashes import sha256
from toolkit.runtimes.web.libraries import LIBRARIES
from toolkit.runtimes.web.npm import NpmPackage, package_dir
from toolkit.ship.card import model_card
from toolkit.ship.measurements import bundle_record, read_measurements
from toolkit.ship.names import CARD_FILE, README_FILE
from toolkit.ship.owned import (
    FILES_KEY,
    SHIP_KEY,
    Earlier,
    carry,
    check_keeps,
    earlier_bundle,
    listing,
    planned_paths,
)
from toolkit.ship.picks import DEFAULT_MAX_DROP, Pick, check_budget
from toolkit.ship.readme import bundle_readme
from toolkit.ship.report_html import write_report
from toolkit.ship.shipment import Shipment
from toolkit.ship.stages import (
    StagePlan,
    check_stage_outputs,
    make_shipment,
    plan_stages,
    run_stages,
    runtimes_here,
)
from toolkit.ship.targets import TARGETS
from toolkit.ship.webapp import WEB_NOTES, write_web_app

SHIP_DIR = "ship"  # the default --out: RUN/ship
OLD = "old"  # scratch kind of an earlier bundle moved aside while the new one takes its place


@dataclass(frozen=True)
class Shipped:
    """What `ship_run` did: the bundle folder, the picks, the files in it, the stages it ran."""

    out: Path
    picks: dict[str, Pick]
    files: tuple[str, ...]  # paths in the bundle ship wrote, relative to it
    stages: StagePlan
    kept: Earlier | None = None  # what an earlier bundle held that ship did not write: kept


def is_bundle(folder: Path) -> bool:
    """Whether `folder` holds a bundle `toolkit ship` wrote (its model.json has a ship record)."""
    return SHIP_KEY in bundle_record(folder)


def check_out(out: Path, targets: Iterable[str] = ()) -> None:
    """A UsageError, before any work, unless `out` can become the bundle: absent, an empty
    folder or an earlier bundle, in a folder where a new one can be made, holding no file of
    the user's where a bundle for `targets` may write one."""
    way = "pass --out NEW_FOLDER"
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: {way}")
    if out.is_dir() and any(out.iterdir()) and not is_bundle(out):
        raise UsageError(
            f"--out {out} is a folder with files that are not a bundle of `toolkit ship`: "
            f"{way}, or empty it (ship replaces only its own bundles)"
        )
    check_keeps(out, earlier_bundle(out), planned_paths(targets))
    atomic.check_writable_folder_above(out.resolve(), f"--out {out}", way)


def bundle_manifest(s: Shipment, files: dict[str, str]) -> dict:
    """The run's model.json with only the shipped files' entries, and under `ship` the picks
    and every other file of the bundle (`files`: path -> sha256)."""
    m = s.measurements
    formats = {p.format for p in s.picks.values()}
    manifest = {k: v for k, v in s.manifest.to_json().items() if k != "artifacts"}
    manifest["artifacts"] = {
        f: e.to_json() for f, e in s.manifest.artifacts.items() if f in formats
    }
    manifest[SHIP_KEY] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "max_accuracy_drop": s.max_drop,
        "bench": {"date": m.bench.date, "machine": dict(m.bench.machine)},
        "verify": {"date": m.verify.date},
        "picks": {name: asdict(p) for name, p in s.picks.items()},
        FILES_KEY: files,
    }
    return manifest


def copy_files(s: Shipment, folder: Path) -> list[str]:
    """The picked files and their companions, and labels.txt, copied into `folder`; each file is
    checked against model.json's sha256 after the copy."""
    run, picks = s.run, s.picks
    names: list[str] = []
    for pick in picks.values():
        if pick.file in names:
            continue
        shutil.copyfile(run.export_dir / pick.file, folder / pick.file)
        if sha256(folder / pick.file) != s.manifest.artifacts[pick.format].sha256:
            raise UsageError(
                f"{run.export_dir / pick.file} changed while it was shipped (its sha256 is not "
                "model.json's): run `toolkit ship` again"
            )
        names.append(pick.file)
        for companion in FORMATS[pick.format].companions:
            shutil.copyfile(run.export_dir / companion, folder / companion)
            names.append(companion)
    first = run.export_dir / next(iter(picks.values())).file  # named as predict names them
    classes = class_names_of(first, s.config.num_classes)
    atomic.write_text(folder / LABELS_FILE, labels_text(classes))
    return [*names, LABELS_FILE]


def write_bundle(s: Shipment, folder: Path) -> dict[str, str]:
    """Every file of the bundle into `folder` (the scratch folder renamed to --out after);
    model.json last, listing the others, whose listing (path -> sha256) it returns."""
    copy_files(s, folder)
    atomic.write_text(folder / CARD_FILE, model_card(s))
    write_report(folder, s)
    if "web" in s.picks:
        write_web_app(folder, s)
    atomic.write_text(folder / README_FILE, bundle_readme(s))
    files = listing(folder)
    write_manifest(folder, bundle_manifest(s, files))
    return files


def publish(folder: Path, out: Path) -> None:
    """Rename the finished `folder` to `out`, replacing an earlier bundle or empty folder there."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{OLD}-{os.getpid()}-", dir=out.parent))
        os.replace(out, old / out.name)
    try:
        os.replace(folder, out)
    except BaseException:
        if old is not None:
            os.replace(old / out.name, out)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def restore_interrupted(folder: Path) -> list[Path]:
    """Put back each earlier bundle in `folder` that a killed ship had moved aside (between
    `publish`'s two renames) and whose place is still empty; return them."""
    pattern = re.compile(rf"{PREFIX}-{OLD}-(\d+)-[a-z0-9_]{{8}}")
    if not folder.is_dir():
        return []
    restored = []
    for aside in sorted(folder.iterdir()):
        match = pattern.fullmatch(aside.name)
        if match is None or pid_alive(int(match.group(1))) or not aside.is_dir():
            continue
        for earlier in aside.iterdir():
            if not (folder / earlier.name).exists():
                os.replace(earlier, folder / earlier.name)
                restored.append(folder / earlier.name)
    return restored  # the emptied folders go with the other dead scratch


@contextmanager
def full_disk_stops(out: Path, writing: str | None, fallback: Path) -> Iterator[None]:
    """Inside: a full disk (an OSError, or an error raised from one) is a one-line RunError
    naming what it was `writing` (default: the file, else `fallback`); --out is as it was."""
    had = is_bundle(out)
    try:
        yield
    except Exception as exc:
        full = atomic.full_disk(exc)
        if full is None:
            raise
        reason = (full.strerror or os.strerror(full.errno)).lower()
        what = writing or full.filename or fallback
        state = f"the earlier bundle {out} is unchanged" if had else f"nothing was written to {out}"
        raise RunError(
            f"{reason} writing {what}: free space and run the same `toolkit ship` again "
            f"(what is already exported, verified and benched is reused); {state}"
        ) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _created_parents(out: Path) -> list[Path]:
    return [p for p in (out.parent, *out.parent.parents) if not p.exists()]


def ship_run(
    run: str | Path,
    targets: str | Iterable[str] = ALL,
    max_drop: float = DEFAULT_MAX_DROP,
    out: str | Path | None = None,
    bench_seconds: float | None = None,
    quiet: bool = True,
) -> Shipped:
    """Bring RUN's exports, verify.json and bench.json up to date for `targets`, pick the
    fastest file within `max_drop` top-1 points per target, and write the bundle to `out`
    (default RUN/ship). Bad input is a UsageError raised before any work; a target with
    nothing within budget is one too, and nothing is written to `out` then. A full disk is a
    one-line RunError, with `out` as it was."""
    names = choose_names(targets, TARGETS, "--target")
    max_drop = check_budget(max_drop)
    if bench_seconds is not None and not 0 < bench_seconds < float("inf"):
        raise UsageError(f"--bench-seconds must be a positive number, not {bench_seconds}")
    opened = open_run(run)
    out = Path(out) if out is not None else opened.path / SHIP_DIR
    restore_interrupted(out.parent)  # before a dead ship's scratch folders are removed
    # a killed write check's probes: no file of the user's, and gone where ship does no work
    for folder in (opened.path, opened.export_dir, out):
        atomic.remove_stale_probes_below(folder)
    check_out(out, names)
    if "web" in names:  # the web app copies its library's npm files: fetched before any work
        for package in web_packages():
            package_dir(package)
    m = read_measurements(opened.path)
    plan = plan_stages(opened, names, m)
    check_stage_outputs(opened, plan)
    with full_disk_stops(out, None, opened.path):
        run_stages(opened, plan, bench_seconds, (lambda line: None) if quiet else print)
    shipment = make_shipment(opened, plan, m, names, max_drop, WEB_NOTES)
    with full_disk_stops(out, f"the bundle {out}", out):
        files, kept = _bundle(shipment, out)
    return Shipped(out, shipment.picks, files, plan, kept)


def web_packages() -> list[NpmPackage]:
    """The npm packages of the libraries the web pick may be run with here (those of the web
    runtimes that run on this machine, or MediaPipe's where Python's stands in)."""
    web = TARGETS["web"]
    libraries = dict.fromkeys(web.apps[r] for r in runtimes_here(["web"]))
    return [LIBRARIES[name].package for name in libraries]


def _bundle(s: Shipment, out: Path) -> tuple[tuple[str, ...], Earlier]:
    """Write the bundle in a scratch folder beside `out`, carry in what `out` keeps, and put it
    in place; return its files and what was kept. On failure, `out` is as it was."""
    created = _created_parents(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_scratch(out.parent)  # what a killed ship left beside its bundle
        folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-ship-{os.getpid()}-", dir=out.parent))
        try:
            os.chmod(folder, 0o777 & ~_umask())  # mkdtemp's is 0700: a bundle is for others too
            files = tuple(sorted([MANIFEST_FILE, *write_bundle(s, folder)]))
            kept = earlier_bundle(out)  # again: the user may have added files meanwhile
            check_keeps(out, kept, set(files))
            carry(out, folder, kept.keeps)
            publish(folder, out)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    except BaseException:
        for parent in created:  # deepest first; one with files in it stays
            try:
                parent.rmdir()
            except OSError:
                break
        raise
    return files, kept
