"""Parameters and MACs per image of a preset at an input shape and class count.

Building a model to count it takes Keras and seconds (shift-b: tens of seconds), so the counts
of every preset at the workloads `toolkit presets` and docs/presets.md show are shipped in
`preset_counts.json`, each with a fingerprint of the architecture it was counted for. A count
that is not there, or whose preset changed since, is built. `python -m toolkit.models.table`
rewrites the file; tests/test_macs.py checks it against built models.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, fields
from functools import cache
from pathlib import Path
from typing import NamedTuple

from toolkit.models.architectures import ADDED_FIELD
from toolkit.models.presets import Preset

COUNTS_FILE = Path(__file__).with_name("preset_counts.json")


class Counts(NamedTuple):
    params: int
    macs: int


def count_key(preset: Preset, input_shape: tuple[int, int, int], num_classes: int) -> str:
    """The table's key: model/preset/HxWxC/classes."""
    shape = "x".join(map(str, input_shape))
    return f"{preset.model}/{preset.name}/{shape}/{num_classes}"


def fingerprint(preset: Preset) -> str:
    """A short hash of the architecture: a shipped count of another architecture is stale.
    Fields added later (architectures.ADDED_FIELD) count only away from their defaults."""
    arch = asdict(preset.arch)
    for f in fields(preset.arch):
        if (
            f.metadata.get("fingerprint") == ADDED_FIELD["fingerprint"]
            and arch[f.name] == f.default
        ):
            del arch[f.name]
    text = json.dumps({"model": preset.model, **arch}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@cache
def shipped_counts() -> dict[str, dict]:
    """preset_counts.json: key -> {"fingerprint", "params", "macs"} ({} when absent)."""
    try:
        return json.loads(COUNTS_FILE.read_text())
    except (OSError, ValueError):
        return {}


def built_counts(preset: Preset, input_shape: tuple[int, int, int], num_classes: int) -> Counts:
    """Build the model (Keras, on the chosen backend; a UsageError when none is installed) and
    count it."""
    from toolkit.common.backend import require_backend
    from toolkit.common.quiet_import import import_keras_quietly

    require_backend()
    import_keras_quietly()  # building needs no custom objects registered (loading does)
    from toolkit.models.macs import count_macs
    from toolkit.models.registry import build_model

    net = build_model(preset, input_shape, num_classes)
    return Counts(net.count_params(), count_macs(net))


def preset_counts(preset: Preset, input_shape: tuple[int, int, int], num_classes: int) -> Counts:
    """The shipped counts when they are of this architecture, else built ones."""
    row = shipped_counts().get(count_key(preset, input_shape, num_classes))
    if row is not None and row["fingerprint"] == fingerprint(preset):
        return Counts(row["params"], row["macs"])
    return built_counts(preset, tuple(input_shape), num_classes)
