"""`export_run`: validate every input first, then convert, validate and publish each format."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from toolkit.common import atomic
from toolkit.common.errors import UsageError, first_line
from toolkit.common.progress import progress
from toolkit.export.conversion_error import ExportError
from toolkit.export.converters import CONVERTERS
from toolkit.export.entries import (
    Extras,
    app_info,
    artifact_entry,
    header,
    record_gpu_acceleration,
    update_manifest,
)
from toolkit.export.int8_search import check_budget, recipe_settings, search
from toolkit.export.metadata import with_metadata
from toolkit.export.source import ExportSource, open_source
from toolkit.export.staging import staged
from toolkit.export.validate import INSPECTORS, ArtifactInfo
from toolkit.formats import (
    CALIB_OPTIONS,
    DEFAULT_OPSET,
    FORMATS,
    MAX_OPSET,
    MIN_OPSET,
    SEARCH_OPTIONS,
    Format,
    check_options,
    parse_formats,
)
from toolkit.runfiles import EXPORT_DIR, ArtifactEntry, Manifest, manifest_path
from toolkit.runfiles.folder import LABELS_FILE, labels_text, open_run
from toolkit.runmodel import load_run_model


@dataclass(frozen=True)
class Exported:
    """What one `export_run` wrote: the folder, the formats in the order asked, and model.json
    as it stands after (which may hold entries of earlier exports too)."""

    folder: Path
    formats: tuple[str, ...]
    manifest: Manifest

    @property
    def entries(self) -> dict[str, ArtifactEntry]:
        """model.json's entry of each format written, in the order asked."""
        return {name: self.manifest.artifacts[name] for name in self.formats}

    def path(self, fmt: str) -> Path:
        """The file written for `fmt`."""
        return self.folder / self.entries[fmt].file


def export_run(
    run_dir: str | Path,
    formats: str | list[str],
    calib_data: str | None = None,
    calib_samples: int | None = None,
    opset: int | None = None,
    out: str | Path | None = None,
    max_accuracy_drop: float | None = None,
) -> Exported:
    """Export RUN to `formats` in `out` (default RUN/export); return what was written.

    calib_samples defaults to 500, or the calibration data's training images where fewer (said in
    one line), and opset to DEFAULT_OPSET; None means "not given" for option checks.
    max_accuracy_drop (top-1 points) makes the int8 formats search their recipe tables.
    """
    names = parse_formats(formats)
    given = {
        "opset": opset,
        "calib_data": calib_data,
        "calib_samples": calib_samples,
        "max_accuracy_drop": max_accuracy_drop,
    }
    check_options(names, given)
    budget = None if max_accuracy_drop is None else check_budget(max_accuracy_drop)
    opset = _check_opset(DEFAULT_OPSET if opset is None else opset)
    samples = None if calib_samples is None else _check_samples(calib_samples)
    run = open_run(run_dir)
    run.class_names  # noqa: B018  (labels.txt checked before any conversion)
    flag = "--out" if out is not None else ""
    out = Path(out) if out is not None else run.path / EXPORT_DIR
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: pass a folder for the exported models")
    files = [name for n in names for name in (FORMATS[n].filename, *FORMATS[n].companions)]
    written = [out / name for name in files] + [manifest_path(out), out / LABELS_FILE]
    for path in written:  # before any conversion: a path that cannot be written is bad input
        atomic.check_writable(path, flag, hint="pass --out DIR in a writable place")
    model = load_run_model(run)
    calib_data = calib_data or run.config.data
    options = dict(opset=opset, calib_data=calib_data, calib_samples=samples)
    with open_source(run, model, **options) as src:
        src.preprocessing  # noqa: B018  (check config.json before anything is written)
        if any(o in FORMATS[n].options for n in names for o in CALIB_OPTIONS):
            src.calibration  # noqa: B018  (load now: bad calibration data is a UsageError)
        created = not out.exists()
        done: list[str] = []
        try:
            manifest = _export_all(src, names, out, budget, done)
        except OSError as exc:  # a full disk: one line, the files of the earlier export kept
            fault = atomic.full_disk_error(exc, _kept(names, done))
            if fault is None:
                raise
            raise fault from None
        finally:
            if created and out.is_dir() and not any(out.iterdir()):
                out.rmdir()
    return Exported(out, tuple(names), manifest)


def _export_all(
    src: ExportSource, names: list[str], out: Path, budget: float | None, done: list[str]
) -> Manifest:
    """Write each format of `names` into `out` (made if missing), appending each to `done` once
    its files and model.json are in place; returns model.json."""
    out.mkdir(parents=True, exist_ok=True)
    # temp files a killed export left, of every format: the next export may not write it
    every = [name for f in FORMATS.values() for name in (f.filename, *f.companions)]
    for path in [*(out / name for name in every), manifest_path(out), out / LABELS_FILE]:
        atomic.remove_stale_temps(path)
    manifest = Manifest(artifacts={})
    for i, name in enumerate(names, 1):
        progress("export", i, len(names), f"writing {name}")
        manifest = _export_one(src, FORMATS[name], out, budget)
        done.append(name)
    app_files = [n for n in names if FORMATS[n].runtime == "litert"]
    if app_files:  # what an app's GPU path gets: recorded, "not checked" without a GPU
        manifest = record_gpu_acceleration(out, app_files)
    return manifest


def _kept(names: list[str], done: list[str]) -> str:
    """What an export a full disk stopped leaves: the format being written as it was."""
    left = [n for n in names if n not in done]
    if not left:
        return "every file is written (the GPU check not recorded)"
    written = f" ({', '.join(done)} written)" if done else ""
    return f"{left[0]}'s files and model.json are as they were{written}"


def _check_opset(opset: int) -> int:
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UsageError(
            f"--opset {opset} is not supported: use {MIN_OPSET} to {MAX_OPSET} "
            f"(default {DEFAULT_OPSET})"
        )
    return opset


def _check_samples(samples: int) -> int:
    if samples < 1:
        raise UsageError(f"--calib-samples must be a positive integer, got {samples}")
    return samples


def _export_one(src: ExportSource, fmt: Format, out: Path, budget: float | None = None) -> Manifest:
    """Convert by the format's recipe (or search, given a budget) to a temp file and validate
    it; its companions and labels.txt staged beside it, model.json written, then the staged
    files renamed into place (so a full disk on the way leaves the earlier ones as they were).
    model.json's entry names the recipe that made the file."""
    converter = CONVERTERS[fmt.name]
    searching = budget is not None and converter.search is not None
    options = {o: getattr(src, o) for o in fmt.options if o not in SEARCH_OPTIONS}
    if searching:
        options["max_accuracy_drop"] = budget
    start = time.perf_counter()
    with staged(out) as staging:
        tmp = staging.path(fmt.filename)
        info, extras, record = _convert(src, fmt, tmp, budget if searching else None)
        entry = artifact_entry(
            fmt.name, fmt.filename, fmt.runtime, tmp, info, time.perf_counter() - start, options
        )
        entry["recipe"] = {
            "name": converter.recipe,
            "settings": recipe_settings(converter.settings),
        }
        if record is not None:
            entry["recipe"] = {"name": record["recipe"], "settings": record["settings"]}
            entry["quantization_search"] = record
        entry.update(extras.entry)
        head = header(src)
        for name, text in {**extras.files, LABELS_FILE: labels_text(head["class_names"])}.items():
            staging.write_text(name, text)
        return update_manifest(out, head, fmt.name, entry)  # then the staged files renamed


def _convert(
    src: ExportSource, fmt: Format, tmp: Path, budget: float | None
) -> tuple[ArtifactInfo, Extras, dict | None]:
    """Write format `fmt` to `tmp` (searching within `budget` points, when given) and validate
    it; returns what it is, its extras and the search record. Any failure is an ExportError but
    bad input (UsageError) and a full disk (an OSError naming the target)."""
    target = tmp.parent / fmt.filename
    converter = CONVERTERS[fmt.name]
    try:
        record = None
        if budget is not None:
            record = search(src, fmt.name, converter.search, tmp, budget)
        else:
            converter.convert(src, tmp)
        if fmt.runtime == "litert":  # the app files: MediaPipe Tasks reads the metadata
            tmp.write_bytes(with_metadata(tmp.read_bytes(), app_info(src, fmt)))
        inspect = INSPECTORS[Path(fmt.filename).suffix]
        info = inspect(tmp, fmt.name, src.input_shape, src.num_classes)
        extras = converter.describe(src, tmp, fmt) if converter.describe else Extras()
        if set(extras.files) != set(fmt.companions):
            raise ExportError(f"{fmt.name}: wrote {sorted(extras.files)}, not {fmt.companions}")
    except UsageError:
        raise
    except ExportError as exc:
        raise ExportError(f"{exc}; {target} was not changed") from exc
    except Exception as exc:  # noqa: BLE001  (any converter failure: keep the old artifact)
        full = atomic.full_disk(exc)
        if full is not None:  # named as the target, unless it names a file elsewhere (scratch)
            named = full.filename not in (None, str(tmp))
            where = full.filename if named else str(target)
            raise OSError(full.errno, full.strerror, where) from exc
        raise ExportError(
            f"{fmt.name}: conversion failed ({type(exc).__name__}: {first_line(exc)}); "
            f"{target} was not changed"
        ) from exc
    return info, extras, record
