"""`verify_run`: op level, model level and int8 attribution of one run, as one report dict."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from toolkit.errors import UsageError, first_line
from toolkit.runfolder import open_run
from toolkit.versions import versions
from verify.attribution import attribute_int8, int8_formats
from verify.cases import Params
from verify.cells import describe
from verify.modellevel import test_images, verify_models
from verify.modelrules import rationale as model_rationale
from verify.oplevel import check_ops, check_runtimes, verify_ops
from verify.quiet import quiet_tensorflow
from verify.tolerance import DEFAULT_TOLERANCES, Tolerances

LEVELS = ("all", "ops", "models")
ATTRIBUTION_SAMPLES = 32  # debug images for the int8 attribution (capped by --samples)


def verify_run(
    run_dir: str | Path,
    level: str = "all",
    runtimes: Iterable[str] | None = None,
    samples: int | None = None,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    shapes: str | Mapping[str, Sequence[Params]] = "full",
    ops: Iterable[str] | None = None,
) -> dict:
    """The full report of RUN; bad input (run, export folder, runtime, op) is a UsageError
    raised before any work."""
    if level not in LEVELS:
        raise UsageError(f"unknown level '{level}': choose from {', '.join(LEVELS)}")
    run = open_run(run_dir)
    chosen = check_runtimes(runtimes)
    op_names = check_ops(ops)
    if level != "ops":  # another program's model, bad export folder, --samples or data:
        run.load_model()  # fail before any work
        manifest = run.manifest()
        data = test_images(run, samples)
    report: dict = {
        "tool": "toolkit verify",
        "run": str(run.path),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": versions(),
        "options": {
            "level": level,
            "runtimes": chosen,
            "samples": samples,
            "shapes": shapes if isinstance(shapes, str) else "custom",
            "ops": op_names,
        },
        "tolerances": {**tolerances.to_dict(), "model_rules": model_rationale()},
    }
    with quiet_tensorflow():
        if level != "models":
            report["ops"] = verify_ops(shapes, op_names, chosen, tolerances)
        if level != "ops":
            report["models"] = verify_models(run, chosen, samples, tolerances, data)
            if any(f in manifest["artifacts"] for f in int8_formats()):
                report["int8_attribution"] = _attribution(run, manifest, data[0])
    failures = [
        describe(c)
        for part in ("ops", "models")
        for c in report.get(part, {}).get("cells", [])
        if c["status"] in ("fail", "error")
    ]
    report["failures"] = failures
    report["passed"] = not failures
    return report


def _attribution(run, manifest: dict, images) -> dict:
    """The int8 attribution, or the reason the debugger failed (a diagnostic, not a verdict)."""
    try:
        return attribute_int8(run, manifest, images, min(ATTRIBUTION_SAMPLES, len(images)))
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001  (the debugger is TF-internal; report, go on)
        first = first_line(exc)
        return {"error": f"QuantizationDebugger failed ({type(exc).__name__}: {first})"}
