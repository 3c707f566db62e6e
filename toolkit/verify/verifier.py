"""`verify_run`: op level, model level and int8 attribution of one run, as one report, saved
where `toolkit verify` saves it (verify.json, the parity records in model.json)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from toolkit.common.argtypes import ALL, choose_names
from toolkit.common.errors import UsageError, first_line
from toolkit.common.versions import versions
from toolkit.runfiles import Manifest
from toolkit.runfiles.folder import Run, open_run
from toolkit.runfiles.hashes import check_unmodified, modified_files
from toolkit.runmodel import load_run_model
from toolkit.runtimes import DEFAULT_VERIFIED, VERIFIED_RUNTIMES
from toolkit.verify import ATTRIBUTION_SAMPLES
from toolkit.verify.attribution import attribute_int8, int8_formats
from toolkit.verify.cells import ERROR, FAIL, PASS
from toolkit.verify.levels import not_checked, split_levels
from toolkit.verify.modellevel import test_images, verify_models
from toolkit.verify.ops.cases import OP_CASES, Params
from toolkit.verify.ops.level import verify_ops
from toolkit.verify.quiet import quiet_tensorflow
from toolkit.verify.rules import DEFAULT_TOLERANCES, Tolerances
from toolkit.verify.saving import Saved, manifest_writable, report_path, save_report
from toolkit.verify.terminal import print_report

LEVELS = ("all", "ops", "models")
PARTS_OF = {"all": ("ops", "models"), "ops": ("ops",), "models": ("models",)}  # level -> parts
PARTS = ("ops", "models", "layers")  # the report's sections of cells, in report order


@dataclass(frozen=True)
class Verified:
    """What `verify_run` did: the report (verify.json's content) and what it wrote."""

    report: dict
    saved: Saved

    @property
    def passed(self) -> bool:
        """Whether every cell is within its tolerance."""
        return bool(self.report["passed"])


def verify_run(
    run_dir: str | Path,
    level: str = "all",
    runtimes: str | Iterable[str] = DEFAULT_VERIFIED,
    samples: int | None = None,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    shapes: str | Mapping[str, Sequence[Params]] = "full",
    ops: str | Iterable[str] = ALL,
    allow_modified: bool = False,
    json_path: Path | None = None,
    quiet: bool = True,
) -> Verified:
    """Verify RUN and save the report to `json_path` (default RUN/verify.json), with the
    parity records in RUN/export/model.json (but at the op level alone, or where it cannot be
    written: a note on stderr says so); unless `quiet`, print it first (a full disk then loses
    no result). Bad input (run, export folder, runtime, op, a file changed after export unless
    `allow_modified`, an unwritable `json_path`) is a UsageError raised before any work."""
    if level not in LEVELS:
        raise UsageError(f"unknown level '{level}': choose from {', '.join(LEVELS)}")
    run = open_run(run_dir)
    path = report_path(run.path, json_path)  # writable, before the work
    record = level != "ops" and manifest_writable(run.path)
    chosen = choose_names(runtimes, VERIFIED_RUNTIMES, "runtime")
    by_part = split_levels(PARTS_OF[level], chosen)  # e.g. the browser runtimes: models alone
    op_names = choose_names(ops, OP_CASES, "op")
    if "models" in by_part:  # another program's model, bad export folder, --samples or data:
        load_run_model(run)  # fail before any work
        manifest = run.manifest()
        check_exported(run, manifest, list(manifest.artifacts), allow_modified)
        data = test_images(run, samples)
    options = {
        "level": level,
        "runtimes": chosen,
        "samples": samples,
        "shapes": shapes if isinstance(shapes, str) else "custom",
        "ops": op_names,
        "skipped": {
            part: not_checked(chosen[0], part) for part in PARTS_OF[level] if part not in by_part
        },
    }
    report = report_head(run, options, tolerances, "models")
    with quiet_tensorflow():
        if "ops" in by_part:
            report["ops"] = verify_ops(shapes, op_names, by_part["ops"], tolerances)
        if "models" in by_part:
            report["models"] = verify_models(run, by_part["models"], samples, tolerances, data)
            if any(f in manifest.artifacts for f in int8_formats()):
                report["int8_attribution"] = _attribution(run, manifest, data[0])
    report = conclude(report)
    if not quiet:
        print_report(report)
    return Verified(report, save_report(run.path, report, path, record))


def check_exported(run: Run, manifest: Manifest, formats: list[str], allow_modified: bool) -> None:
    """Refuse (or with allow_modified, warn of) the `formats`' files changed after export:
    their sha256 is not the one model.json records, so their parity is not the export's."""
    changed = modified_files(run.export_dir, manifest, formats)
    check_unmodified(changed, allow_modified, lambda f: f"toolkit export {run.path} --format {f}")


def report_head(run: Run, options: dict, tolerances: Tolerances, rules: str) -> dict:
    """What every verify report opens with: the run, date, versions, options, and the
    tolerances with the op rules' and `rules`' (models or layers) rationale."""
    return {
        "tool": "toolkit verify",
        "run": str(run.path),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": versions(),
        "options": options,
        "tolerances": tolerances.to_dict(rules),
    }


CHECKED = (PASS, FAIL, ERROR)  # the statuses of a cell that ran a check


def conclude(report: dict) -> dict:
    """`report` with the failing cells of all its sections and the verdict added: a report
    whose every cell checked nothing (unavailable, not applicable) does not pass."""
    report["failures"] = [
        line for part in PARTS if part in report for line in report[part]["summary"]["failures"]
    ]
    cells = [c for part in PARTS if part in report for c in report[part].get("cells", [])]
    if cells and not any(c["status"] in CHECKED for c in cells):  # no runtime asked for ran
        report["failures"].append(
            f"nothing was checked: each of the {len(cells)} cells is unavailable or not "
            "applicable (the lines above say why): install a runtime that runs here, or pick one "
            "with --runtime"
        )
    report["passed"] = not report["failures"]
    return report


def _attribution(run: Run, manifest: Manifest, images) -> dict:
    """The int8 attribution, or the reason the debugger failed (a diagnostic, not a verdict)."""
    try:
        return attribute_int8(run, manifest, images, min(ATTRIBUTION_SAMPLES, len(images)))
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001  (the debugger is TF-internal; report, go on)
        first = first_line(exc)
        return {"error": f"QuantizationDebugger failed ({type(exc).__name__}: {first})"}
