"""What a study's report starts with (its command, date, machine and versions), and where the
report goes: the Markdown to stdout, the whole report to `--json` when given."""

from __future__ import annotations

import subprocess
from pathlib import Path

from toolkit.bench.machine import cpu_text
from toolkit.common.atomic import write_json

ROOT = Path(__file__).resolve().parents[1]


def commit_fields() -> dict:
    """A row's `commit` (short hash; null outside a git checkout, as on a device machine the
    tree travels to without .git) and its `commit_note` where the records need one: no
    checkout, or uncommitted changes."""

    def git(*args: str) -> str:
        try:
            out = subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return out.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or None
    if head is None:
        return {"commit": None, "commit_note": "not run from a git checkout"}
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": head,
        **({"commit_note": f"{head} plus uncommitted changes"} if dirty else {}),
    }


def header_lines(report: dict) -> list[str]:
    """The report's command, start date, machine (CPU model and flags, cores, load) and
    versions, as Markdown list items."""
    machine = report["machine"]
    return [
        f"- command: `{report['command']}`",
        f"- date: {report['date']} (start)",
        f"- machine: {cpu_text(machine)}, {machine['cores']} cores, load average "
        f"{machine['load_average']} at start",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()),
    ]


def publish(report: dict, text: str, json_path: Path | None) -> int:
    """Print the Markdown `text`; write `report` to `json_path` too when given. Exit code 0."""
    print(text, end="")
    if json_path is not None:
        write_json(json_path, report)
    return 0
