"""`Shipment`: the one value the bundle's writers (model card, README, report, web app) are
handed: the run, what its stages measured, the picks and the budget they were made within."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from toolkit.runfiles import Manifest, RunConfig
from toolkit.runfiles.folder import Run
from toolkit.ship.measurements import Measurements
from toolkit.ship.picks import Pick


@dataclass(frozen=True)
class Shipment:
    """What a bundle is written from (stages.make_shipment makes it once per ship)."""

    run: Run
    measurements: Measurements
    picks: dict[str, Pick]  # target -> its pick, in the order given
    max_drop: float  # the top-1 budget in points the picks were made within
    web_notes: str | None = None  # the web app's paragraph of the README (web target only)

    @property
    def config(self) -> RunConfig:
        """The run's config.json (as `open_run` read it)."""
        return self.run.config

    @property
    def options(self) -> Mapping[str, object]:
        """The run's `toolkit train` options."""
        return self.config.options

    @property
    def name(self) -> str:
        """The bundle's name: model-preset."""
        return f"{self.config.model}-{self.config.preset}"

    @property
    def manifest(self) -> Manifest:
        """The run's export/model.json."""
        return self.measurements.manifest
