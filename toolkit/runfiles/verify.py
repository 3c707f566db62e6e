"""verify.json: the report `toolkit verify` writes into the run folder (or to --json)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.runfiles import jsonfile
from toolkit.runfiles.jsonfile import integer, number, section, text

VERIFY_FILE = "verify.json"
VERIFY_AGAIN = "run `toolkit verify RUN` again"


@dataclass(frozen=True)
class VerifyCell:
    """One (file, runtime) cell of the model level; `raw` is the cell as written."""

    format: str | None
    runtime: str | None
    file: str | None
    status: str | None
    reason: str | None = None
    top1: float | None = None  # the file's top-1 on the split (metrics.top1_accuracy)
    agreement: float | None = None  # top-1 agreement with the Keras model
    metrics: Mapping[str, object] = field(default_factory=dict)
    tolerance: Mapping[str, object] = field(default_factory=dict)  # what it was held to
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping) -> VerifyCell:
        """The cell in `data` (tolerant of keys older reports lacked)."""
        metrics = section(data, "metrics")
        return cls(
            format=text(data.get("format")),
            runtime=text(data.get("runtime")),
            file=text(data.get("file")),
            status=text(data.get("status")),
            reason=text(data.get("reason")),
            top1=number(metrics.get("top1_accuracy")),
            agreement=number(metrics.get("top1_agreement")),
            metrics=metrics,
            tolerance=section(data, "tolerance"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class ModelLevel:
    """The model level of a report: every file against the Keras model on a split."""

    cells: tuple[VerifyCell, ...]
    split: str | None = None
    samples: int | None = None
    data: str | None = None
    reference_top1: float | None = None  # the Keras model's top-1 on the same images
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping) -> ModelLevel:
        """The level in `data`."""
        cells = data.get("cells") if isinstance(data.get("cells"), list) else []
        return cls(
            cells=tuple(VerifyCell.from_json(c) for c in cells if isinstance(c, dict)),
            split=text(data.get("split")),
            samples=integer(data.get("samples")),
            data=text(data.get("data")),
            reference_top1=number(section(data, "reference").get("top1_accuracy")),
            raw=dict(data),
        )

    def scored_cell(self, fmt: str, runtime: str) -> VerifyCell | None:
        """The cell of `fmt` on `runtime` that scored a top-1, or None."""
        for cell in self.cells:
            if cell.format == fmt and cell.runtime == runtime and cell.top1 is not None:
                return cell
        return None


@dataclass(frozen=True)
class VerifyReport:
    """verify.json: when and with what it ran, the verdict, and its levels."""

    run: str | None = None
    date: str | None = None
    passed: bool | None = None
    failures: tuple[str, ...] = ()
    versions: Mapping[str, object] = field(default_factory=dict)
    options: Mapping[str, object] = field(default_factory=dict)
    models: ModelLevel | None = None  # None: the report has no model level
    int8_attribution: Mapping[str, object] | None = None
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping) -> VerifyReport:
        """The report in `data` (tolerant of keys older reports lacked)."""
        models, attribution = data.get("models"), data.get("int8_attribution")
        passed = data.get("passed")
        return cls(
            run=text(data.get("run")),
            date=text(data.get("date")),
            passed=passed if isinstance(passed, bool) else None,
            failures=tuple(str(f) for f in data.get("failures") or ()),
            versions=section(data, "versions"),
            options=section(data, "options"),
            models=ModelLevel.from_json(models) if isinstance(models, dict) else None,
            int8_attribution=attribution if isinstance(attribution, dict) else None,
            raw=dict(data),
        )

    def to_json(self) -> dict:
        """The object verify.json holds."""
        return dict(self.raw)


def verify_path(folder: Path) -> Path:
    """Where `toolkit verify` writes a run folder's report by default."""
    return Path(folder) / VERIFY_FILE


def read_verify(folder: Path) -> VerifyReport:
    """RUN/verify.json; missing or unreadable is a UsageError saying to run `toolkit verify`."""
    path = verify_path(folder)
    how = f"run `toolkit verify {folder}` first"
    return VerifyReport.from_json(jsonfile.load(path, how))


def find_verify(folder: Path) -> VerifyReport | None:
    """RUN/verify.json, or None when the run has none; unreadable is a UsageError."""
    data = jsonfile.find(verify_path(folder), f"run `toolkit verify {folder}` again")
    return None if data is None else VerifyReport.from_json(data)


def write_verify(path: Path, report: Mapping | VerifyReport) -> Path:
    """Write a report (verify's object, or a VerifyReport) to `path` atomically; the path."""
    data = report.to_json() if isinstance(report, VerifyReport) else dict(report)
    jsonfile.write(path, data)
    return Path(path)
