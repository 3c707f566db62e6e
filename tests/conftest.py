"""Fixtures shared by the test modules in tests/."""

from __future__ import annotations

import pytest
from tiny_runs import TinyRuns


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory) -> TinyRuns:
    """Tiny runs trained and exported once for the session (tests/tiny_runs.py)."""
    return TinyRuns(tmp_path_factory.mktemp("tiny_runs"))
