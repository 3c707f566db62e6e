"""Fixtures shared by the test modules in tests/."""

from __future__ import annotations

import os

import pytest
from tiny_runs import TinyRuns


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> TinyRuns:
    """Tiny runs trained and exported once for the session (tests/tiny_runs.py); under
    pytest-xdist in one folder beside the workers' own, which they share."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return TinyRuns(tmp_path_factory.mktemp("tiny_runs"))
    return TinyRuns(tmp_path_factory.getbasetemp().parent / "tiny_runs")
