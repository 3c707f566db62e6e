"""The `RUNTIMES` rows of the web libraries (toolkit/runtimes/web/libraries.py): each opens its
files in a headless Chromium of its own, and says in one line why it cannot run here."""

from __future__ import annotations

import functools
import shutil

from toolkit.runtimes.base import Runtime
from toolkit.runtimes.web.browser import browser_unavailable
from toolkit.runtimes.web.libraries import LIBRARIES, WebLibrary
from toolkit.runtimes.web.npm import CACHE_ENV, installed, npm_cache
from toolkit.runtimes.web.session import browser_host, open_web


def web_unavailable(library: WebLibrary) -> str | None:
    """Why `library` cannot run here (Playwright, Chromium, its npm package or a Python package
    it reads files with missing), or None."""
    if (reason := browser_unavailable()) is not None:
        return reason
    if installed(library.package) is None and shutil.which("npm") is None:
        return (
            f"{library.name} needs {library.package.spec}, not in the npm cache {npm_cache()}: "
            f"install Node.js (with npm), or set {CACHE_ENV} to a folder holding it (make browser)"
        )
    return library.needs()


def web_runtime(library: WebLibrary) -> Runtime:
    """The registry row of `library`, verified at the levels its row names."""
    return Runtime(
        library.name,
        library.suffixes,
        functools.partial(open_web, library),
        functools.partial(web_unavailable, library),
        library.description,
        levels=library.levels,
        refuses=library.refuses,
        by_default=False,
        package=None,  # the npm library's version is its spec (libraries.py)
        loads_keras=False,
        host_memory=False,
        kernel=None,
    )


WEB_RUNTIMES: tuple[Runtime, ...] = tuple(web_runtime(lib) for lib in LIBRARIES.values())


def webgpu_unavailable() -> str | None:
    """None when the headless browser has a WebGPU adapter, else why not (one line): the web
    runtimes run on wasm; a WebGPU row says this instead of timing."""
    if (reason := browser_unavailable()) is not None:
        return reason
    with browser_host() as host:
        return host.webgpu_unavailable()
