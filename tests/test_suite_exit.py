"""The suite's own conftest ends pytest's process right after its summary (skipping the slow
C++ finalization of TensorFlow and XLA) with pytest's exit status unchanged."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.parametrize(("body", "status"), [("assert 1 == 1", 0), ("assert 1 == 2", 1)])
def test_the_exit_status_is_pytests(tmp_path, body, status):
    (tmp_path / "test_probe.py").write_text(f"def test_probe():\n    {body}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider"]
        + ["test_probe.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == status, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert ("1 passed" if status == 0 else "1 failed") in last  # the summary was written
