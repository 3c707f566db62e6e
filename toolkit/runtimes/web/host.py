"""A browser host: the local server and one headless Chromium; each model opens in a page of its
own (a fresh JavaScript realm: the libraries' WebAssembly and thread settings are per page)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

from toolkit.runtimes.base import RuntimeOptions
from toolkit.runtimes.web.browser import Chromium
from toolkit.runtimes.web.libraries import LIBRARIES, WebLibrary
from toolkit.runtimes.web.npm import package_dir
from toolkit.runtimes.web.server import LocalServer

JS_DIR = Path(__file__).with_name("js")
PAGE_TIMEOUT_MS = 60_000


def _node_modules(library: WebLibrary) -> Path:
    """The node_modules folder holding the library's package and its dependencies."""
    return package_dir(library.package).parents[len(library.package.name.split("/")) - 1]


def harness_page(library: WebLibrary) -> bytes:
    """The page a model of `library` runs in: its import map, then the harness module."""
    prefix = f"/lib/{library.name}/"
    imports = {name: prefix + path for name, path in library.imports.items()}
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        f'<script type="importmap">{json.dumps({"imports": imports})}</script>'
        '<script type="module" src="/js/harness.js"></script></head><body></body></html>'
    ).encode()


def page_error(exc: BaseException) -> str:
    """The page's error without Playwright's prefix ("Page.evaluate: Error: ...")."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"^\w+\.\w+: (Error: )?", "", text)


class WebHost:
    """The local server and a Chromium, opening models in pages; `close()` ends both."""

    def __init__(self) -> None:
        self.server = LocalServer()
        try:
            self.chromium = Chromium()
        except Exception:
            self.server.close()
            raise
        self.server.tree("/js/", JS_DIR, ("*.js",))
        self._mounted: set[str] = set()
        self._models = itertools.count()

    @property
    def browser_version(self) -> str:
        """The browser's name and version, e.g. "Chromium 156.0.8078.108"."""
        return self.chromium.version

    def _mount(self, library: WebLibrary) -> str:
        """Serve the library's npm files and page once; the page's URL."""
        if library.name not in self._mounted:
            self.server.tree(f"/lib/{library.name}/", _node_modules(library), library.files)
            self.server.page(f"/page/{library.name}.html", harness_page(library))
            self._mounted.add(library.name)
        return f"{self.server.origin}/page/{library.name}.html"

    def open_page(self, library: WebLibrary, path: Path, options: RuntimeOptions):
        """A page with `path` loaded by `library`: (Playwright page, what the page reports)."""
        url = self._mount(library)
        model_url = self.server.file(f"/model/{next(self._models)}/{path.name}", path.resolve())
        page = self.chromium.browser.new_page()
        try:
            page.set_default_timeout(PAGE_TIMEOUT_MS)
            page.goto(url)
            page.wait_for_function("window.toolkit !== undefined")
            base = f"{self.server.origin}/lib/{library.name}/{library.package.name}/"
            info = page.evaluate(
                "([m, u, o]) => window.toolkit.open(m, u, o)",
                [f"{self.server.origin}/js/{library.module}", model_url,
                 {"base": base, "threads": options.threads}],
            )  # fmt: skip
        except Exception as exc:
            page.close()
            raise RuntimeError(page_error(exc)) from exc
        return page, info

    def webgpu_unavailable(self) -> str | None:
        """None when the browser has a WebGPU adapter, else why not (one line)."""
        page = self.chromium.browser.new_page()
        try:
            page.goto(self._mount(next(iter(LIBRARIES.values()))))
            page.wait_for_function("window.toolkit !== undefined")
            return page.evaluate("() => window.toolkit.webgpuUnavailable()")
        finally:
            page.close()

    def close(self) -> None:
        """Close the browser, then the server."""
        try:
            self.chromium.close()
        finally:
            self.server.close()
