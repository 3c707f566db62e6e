"""A Python child on JAX's CPU backend with TensorFlow unimportable (tests/without_tensorflow.py),
as on a machine that trains without TensorFlow: the tests that prove the JAX path use it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def run_without_tensorflow(args: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    """`python tests/without_tensorflow.py ARGS` (`-c CODE` or `-m MODULE ...`, the module
    found in tests/) on JAX's CPU backend, XLA at its lowest optimisation level (a few steps:
    the step compiles in less time); its output captured as text."""
    return subprocess.run(
        [sys.executable, str(TESTS / "without_tensorflow.py"), *args],
        capture_output=True,
        text=True,
        cwd=TESTS.parent,
        env={
            **os.environ,
            "KERAS_BACKEND": "jax",
            "JAX_PLATFORMS": "cpu",
            "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)]),
            "XLA_FLAGS": "--xla_backend_optimization_level=0",
        },
        timeout=timeout,
    )
