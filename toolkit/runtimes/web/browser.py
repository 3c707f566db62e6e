"""Debian's Chromium driven headless by Playwright for Python: where it is, whether it can run
here, and one launched browser."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

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


class Chromium:
    """A headless Chromium launched through Playwright's sync API; `close()` ends both."""

    def __init__(self) -> None:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self.browser = self._playwright.chromium.launch(
                executable_path=str(chromium_path()), timeout=LAUNCH_TIMEOUT_MS
            )
        except Exception:
            self._playwright.stop()
            raise
        self.version = f"Chromium {self.browser.version}"

    def close(self) -> None:
        """Close the browser and stop Playwright's driver."""
        try:
            self.browser.close()
        finally:
            self._playwright.stop()
