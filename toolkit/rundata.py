"""The data a run is scored on: its own `--data` or a user-given spec, checked against the
run's classes (labels.txt) so that labels index the same class names the model learned.
"""

from __future__ import annotations

from toolkit.data import Dataset, load_data
from toolkit.errors import UsageError
from toolkit.runfolder import LABELS_FILE, Run

PREVIEW = 4  # class names shown in a mismatch message


def load_run_data(run: Run, spec: str | None = None) -> tuple[Dataset, str]:
    """(dataset, spec) of `spec` (default: the run's data), split with the run's seed.

    UsageError when its classes are not the run's, in the same order: a label is an index,
    so other classes would be scored against the wrong names.
    """
    options = run.config.get("options") or {}
    spec = spec or options.get("data")
    if not spec:
        raise UsageError(f"{run.path}/config.json names no data: pass --data SPEC")
    data = load_data(spec, seed=int(options.get("seed", 0)))
    check_class_names(run, data, spec)
    return data, spec


def check_class_names(run: Run, data: Dataset, spec: str) -> None:
    """UsageError unless `data` has exactly the run's class names, in the same order."""
    if not (run.path / LABELS_FILE).is_file():
        raise UsageError(
            f"{run.path} has no {LABELS_FILE}: the run's classes are unknown; retrain the run"
        )
    expected, found = run.class_names, list(data.class_names)
    if found == expected:
        return
    if len(found) != len(expected):
        detail = (
            f"{spec} has {len(found)} classes ({_preview(found)}) but the run has "
            f"{len(expected)} ({_preview(expected)})"
        )
    else:
        i = next(i for i, (a, b) in enumerate(zip(found, expected, strict=True)) if a != b)
        detail = f"class {i} is '{found[i]}' in {spec} but '{expected[i]}' in the run"
    raise UsageError(
        f"{detail}: score the run on data with its classes ({run.path / LABELS_FILE}), "
        "in the same order"
    )


def _preview(names: list[str]) -> str:
    shown = ", ".join(names[:PREVIEW])
    return shown + (", ..." if len(names) > PREVIEW else "")
