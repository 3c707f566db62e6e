"""`toolkit verify`: numerical parity of the ops and of whole models across runtimes.

`verify_ops` checks each op of OP_CASES at several shapes in every runtime against its NumPy
reference (ops/); `verify_models` checks each exported artifact against the run's Keras model
(modellevel.py); `verify_run` does both plus the int8 attribution, as `toolkit verify RUN` does.
The layer level (`--layers`) is layers/; rules.py holds every pass/fail rule; saving.py
writes verify.json and the parity records, as the command does.
"""

from toolkit.keras_setup import setup_keras

setup_keras()  # TensorFlow imported quietly and the custom layers registered, before the levels

from toolkit.verify.modellevel import verify_models  # noqa: E402
from toolkit.verify.ops.cases import OP_CASES, OpCase  # noqa: E402
from toolkit.verify.ops.level import verify_ops  # noqa: E402
from toolkit.verify.rules import Tolerances  # noqa: E402
from toolkit.verify.saving import Saved, report_path, save_report  # noqa: E402
from toolkit.verify.suite import verify_run  # noqa: E402

__all__ = [
    "OP_CASES",
    "OpCase",
    "Saved",
    "Tolerances",
    "report_path",
    "save_report",
    "verify_models",
    "verify_ops",
    "verify_run",
]
