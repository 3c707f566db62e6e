"""`toolkit verify`: numerical parity of the ops and of whole models across runtimes.

`verify_ops` checks each op of OP_CASES at several shapes in every runtime against its NumPy
reference (ops/); `verify_models` checks each exported artifact against the run's Keras model
(modellevel.py); `verify_run` does both plus the int8 attribution and saves the report, as
`toolkit verify RUN` does. The layer level (`--layers`) is layers/; rules.py holds every
pass/fail rule; saving.py writes verify.json and the parity records; terminal.py prints a
report. The levels import TensorFlow: they load on first use, after `setup_keras()`, so that
`toolkit verify --help` starts without it.
"""

from __future__ import annotations

from toolkit.keras_setup import loaded_after_setup
from toolkit.verify.rules import Tolerances
from toolkit.verify.saving import Saved, report_path, save_report

ATTRIBUTION_SAMPLES = 32  # debug images for the int8 attribution (capped by --samples)

# name -> the module of this package that defines it, imported when the name is first used
_LEVELS = {
    "OP_CASES": "ops.cases",
    "OpCase": "ops.cases",
    "verify_models": "modellevel",
    "verify_ops": "ops.level",
    "verify_run": "verifier",
    "Verified": "verifier",
}

__all__ = [
    "OP_CASES",
    "OpCase",
    "Saved",
    "Tolerances",
    "Verified",
    "report_path",
    "save_report",
    "verify_models",
    "verify_ops",
    "verify_run",
]


__getattr__ = loaded_after_setup("toolkit.verify", _LEVELS)
