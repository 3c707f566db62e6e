"""Everything the converters of one `export_run` share: run, model, options, caches, scratch."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import keras
import numpy as np

from toolkit.common.scratch import scratch_dir
from toolkit.export.calibration import calibration_images
from toolkit.export.preprocessing import describe_preprocessing
from toolkit.runfiles.folder import Run


@dataclass
class ExportSource:
    """A loaded run plus the export options; expensive intermediates are built once."""

    run: Run
    model: keras.Model
    opset: int
    calib_data: str | None
    calib_samples: int | None  # None: not asked (`calib_count` decides); the count once drawn
    scratch: Path
    # the .tflite files end in a softmax (app files give probabilities); False for the
    # one-op models of verify's op level, whose output is the op's own
    probabilities: bool = True
    _memo: dict[str, Any] = field(default_factory=dict)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(H, W, 3) the model takes."""
        return tuple(int(d) for d in self.model.input_shape[1:])

    @property
    def num_classes(self) -> int:
        return int(self.model.output_shape[-1])

    @property
    def class_names(self) -> list[str]:
        return self.run.class_names

    @cached_property
    def preprocessing(self) -> dict:
        """In-model preprocessing, from config.json (UsageError when it is incomplete)."""
        return describe_preprocessing(self.run.config, self.input_shape[:2])

    @cached_property
    def calibration(self) -> np.ndarray:
        """The calibration images (UsageError when the data does not fit); `calib_samples`
        becomes their count, as model.json records it."""
        images = calibration_images(self.run, self.input_shape, self.calib_data, self.calib_samples)
        self.calib_samples = len(images)
        return images

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """build() once per export; later calls with `key` return the same object."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]


@contextmanager
def open_source(run: Run, model: keras.Model, **options: Any) -> Iterator[ExportSource]:
    """An ExportSource whose scratch folder is removed afterwards (and by a later export or
    verify when this process is killed)."""
    with scratch_dir("export") as scratch:
        yield ExportSource(run=run, model=model, scratch=scratch, **options)
