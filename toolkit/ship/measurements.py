"""`Measurements`: what a run's stages recorded and ship picks from (bench.json, verify.json and
export/model.json), read once per ship through toolkit.runfiles. A missing file reads as an
empty record (then the stage that writes it runs); an unreadable one is refused there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from toolkit.common.errors import UsageError
from toolkit.runfiles import (
    EXPORT_DIR,
    BenchReport,
    Manifest,
    VerifyCell,
    VerifyReport,
    find_bench,
    find_manifest,
    find_verify,
)


@dataclass(frozen=True)
class Measurements:
    """bench.json, verify.json and model.json of a run, typed (empty records where missing)."""

    bench: BenchReport
    verify: VerifyReport
    manifest: Manifest

    @classmethod
    def from_json(cls, bench: Mapping, verify: Mapping, manifest: Mapping) -> Measurements:
        """The measurements in the three files' objects ({}: a missing file)."""
        return cls(
            BenchReport.from_json(bench),
            VerifyReport.from_json(verify),
            Manifest.from_json(manifest),
        )

    @property
    def cells(self) -> tuple[VerifyCell, ...]:
        """verify.json's model cells (none without a model level)."""
        return self.verify.models.cells if self.verify.models else ()


def read_measurements(run_dir: Path) -> Measurements:
    """bench.json, verify.json and export/model.json of a run (empty records for any missing)."""
    run_dir = Path(run_dir)
    return Measurements(
        bench=find_bench(run_dir) or BenchReport.from_json({}),
        verify=find_verify(run_dir) or VerifyReport.from_json({}),
        manifest=find_manifest(run_dir / EXPORT_DIR) or Manifest.from_json({}),
    )


def bundle_record(folder: Path) -> Mapping:
    """The object of a bundle's model.json in `folder`: {} when it has none or it is unreadable
    (the folder is then no bundle of ship's)."""
    try:
        found = find_manifest(Path(folder))
    except UsageError:
        return {}
    return found.to_json() if found is not None else {}
