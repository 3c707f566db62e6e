"""The README is a manual: at most 20,000 bytes, and the files it links to exist."""

import re
from pathlib import Path

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
