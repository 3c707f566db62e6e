"""Where a verify report goes: RUN/verify.json (or --json), the layer plot beside it, and the
parity record in each artifact's model.json entry. Checked before the work, written after it."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.common import atomic
from toolkit.common.errors import UsageError
from toolkit.runfiles import EXPORT_DIR, manifest_path, verify_path, write_verify
from toolkit.runfiles.folder import VERIFY_LAYERS_PLOT
from toolkit.verify.layers.display import plot_layers
from toolkit.verify.parity import record_parity


@dataclass(frozen=True)
class Saved:
    """What `save_report` wrote: the report, the plot (with --layers) and the formats whose
    model.json entries got the parity record."""

    report: Path
    plot: Path | None = None
    recorded: list[str] = field(default_factory=list)


def report_path(run_dir: Path, json_path: Path | None = None, layers: bool = False) -> Path:
    """Where the report goes (RUN/verify.json unless given); a UsageError, before any work,
    when it (or the layer plot beside it) cannot be written."""
    path = json_path if json_path is not None else verify_path(run_dir)
    atomic.check_writable(path, "--json", "pass --json FILE in a writable folder")
    if not path.parent.is_dir():
        raise UsageError(f"--json {path}: folder {path.parent} does not exist")
    if layers:
        atomic.check_writable(
            path.parent / VERIFY_LAYERS_PLOT, "plot", "pass --json in a writable folder"
        )
    return path


def manifest_writable(run_dir: Path) -> bool:
    """Whether RUN/export/model.json can take the parity records; says so on stderr if not."""
    path = manifest_path(run_dir / EXPORT_DIR)
    try:
        atomic.check_writable(path)
    except UsageError as exc:
        print(f"toolkit: note: no parity record will be saved: {exc}", file=sys.stderr)
        return False
    return True


def save_report(run_dir: Path, report: dict, path: Path, record: bool) -> Saved:
    """Write the report (and the layer plot, named in it), and the parity records when asked."""
    plot = None
    if "layers" in report and plot_layers(
        report["layers"], path.parent / VERIFY_LAYERS_PLOT, Path(report["run"]).name
    ):
        plot = path.parent / VERIFY_LAYERS_PLOT
        report["layers"]["plot"] = str(plot)
    write_verify(path, report)
    recorded = record_parity(Path(run_dir) / EXPORT_DIR, report) if record else []
    return Saved(path, plot, recorded)
