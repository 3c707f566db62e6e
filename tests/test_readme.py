"""The README is a manual: at most 20,000 bytes, and the files it links to exist."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_BYTES = 20_000


def test_readme_is_at_most_20000_bytes():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes: move detail into records/ or docs"


def test_readme_links_to_files_that_exist():
    text = (ROOT / "README.md").read_text()
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)]+)\)", text)}
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert missing == []


@pytest.mark.slow
def test_the_python_api_example_runs_as_written(tmp_path):
    """README's Python API block, run as written in a fresh process (it trains, exports,
    verifies and benches a tiny run under runs/api)."""
    text = (ROOT / "README.md").read_text().split("## Python API", 1)[1]
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    path, passed, files = done.stdout.strip().splitlines()[-1].split(" ", 2)
    assert path == "runs/api/export/model_int8.tflite" and passed == "True"
    assert (tmp_path / path).is_file() and "bench.json" in files
