"""`toolkit verify`: numerical parity of the ops and of whole models across runtimes.

`verify_ops` checks each op of OP_CASES at several shapes in every runtime against its NumPy
reference; `verify_models` checks each exported artifact against the run's Keras model;
`verify_run` does both plus the int8 attribution, as `toolkit verify RUN` does.
"""

from toolkit.verify.cases import OP_CASES, OpCase
from toolkit.verify.modellevel import verify_models
from toolkit.verify.oplevel import verify_ops
from toolkit.verify.rules import Tolerances
from toolkit.verify.suite import verify_run

__all__ = ["OP_CASES", "OpCase", "Tolerances", "verify_models", "verify_ops", "verify_run"]
