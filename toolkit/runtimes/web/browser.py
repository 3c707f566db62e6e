"""Debian's Chromium driven headless by Playwright for Python: where it is, whether it can run
here, and one launched browser."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from toolkit.runtimes.base import RuntimeUnavailable

CHROMIUM_ENV = "CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
LAUNCH_TIMEOUT_MS = 60_000


def chromium_path() -> Path:
    """The Chromium executable: $CHROMIUM, else Debian's."""
    return Path(os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM)


def browser_unavailable() -> str | None:
    """Why no headless Chromium can be driven here (Playwright or Chromium missing), or None."""
    try:
        found = importlib.util.find_spec("playwright") is not None
    except ImportError:
        found = False
    if not found:
        return "the web runtimes drive Chromium with Playwright: pip install 'toolkit[web]'"
    path = chromium_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        return (
            f"the web runtimes need Chromium at {path}: apt-get install chromium, or set "
            f"{CHROMIUM_ENV} to a Chromium executable"
        )
    return None


_BROWSER_ERR = re.compile(r"^\[pid=\d+\]\[err\] (.+)$")
_EXIT = re.compile(r"<process did exit: exitCode=(\w+), signal=(\w+)>")


def launch_failure(error: str, path: Path) -> str:
    """One line from Playwright's launch error: how the browser at `path` ended and the first of
    its own stderr lines (else Playwright's first line), and the way out."""
    lines = [line.strip().removeprefix("- ") for line in error.splitlines()]
    said = [m.group(1) for line in lines if (m := _BROWSER_ERR.match(line))]
    ended = next((m for line in lines if (m := _EXIT.search(line))), None)
    how = ""
    if ended is not None:
        code, signal = ended.groups()
        how = f"killed by {signal}" if signal != "null" else f"exit code {code}"
    reason = "; ".join(part for part in (how, said[0] if said else "") if part)
    reason = reason or (lines[0] if lines else "no reason given")
    return (
        f"Chromium at {path} did not start ({reason[:300]}): check that it runs "
        f"(`{path} --headless --version`), or set {CHROMIUM_ENV} to a Chromium that does"
    )


class Chromium:
    """A headless Chromium launched through Playwright's sync API; `close()` ends both."""

    def __init__(self) -> None:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self.browser = self._playwright.chromium.launch(
                executable_path=str(chromium_path()), timeout=LAUNCH_TIMEOUT_MS
            )
        except Exception as exc:  # the browser's fault, never the model's: unavailable here
            self._playwright.stop()
            raise RuntimeUnavailable(launch_failure(str(exc), chromium_path())) from exc
        self.version = f"Chromium {self.browser.version}"

    def close(self) -> None:
        """Close the browser and stop Playwright's driver."""
        try:
            self.browser.close()
        finally:
            self._playwright.stop()
