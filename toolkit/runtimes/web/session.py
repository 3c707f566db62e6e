"""`WebSession`: a model file loaded by a JavaScript library in a Chromium page, behind the
Session protocol of toolkit/runtimes/base.py; images go to the page as base64 of their raw bytes
in the input's dtype, scores come back as float32 the same way."""

from __future__ import annotations

import base64
import contextlib
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.runtimes.base import (
    RuntimeOptions,
    TensorSpec,
    check_images,
    fixed_batches,
    to_input,
    to_logits,
)
from toolkit.runtimes.timing import Protocol
from toolkit.runtimes.web.host import WebHost
from toolkit.runtimes.web.libraries import WebLibrary

TRANSFER_BYTES = 8 << 20  # raw input bytes per page call of `run()`


def _prepared(images: np.ndarray, spec: TensorSpec) -> list[np.ndarray]:
    """`images` checked, in the input's dtype, cut into the calls the file takes."""
    images = check_images(images, spec)
    if len(images) == 0:
        raise ValueError("no images to run: pass at least one")
    return fixed_batches(to_input(images, spec), spec.shape[0])


def _payload(chunks: list[np.ndarray]) -> list:
    """The page's arguments for `chunks` of one shape: base64 bytes, dtype, shape, count."""
    raw = np.ascontiguousarray(np.concatenate(chunks)).tobytes()
    first = chunks[0]
    return [base64.b64encode(raw).decode(), first.dtype.name, list(first.shape), len(chunks)]


def _closer(page, host: WebHost | None) -> Callable[[], None]:
    """Closes the page, and the host when the session owns it; never raises."""

    def close() -> None:
        for step in (page.close, *((host.close,) if host is not None else ())):
            try:
                step()
            except Exception:  # noqa: BLE001, S110  (a browser already gone is closed)
                pass

    return close


class WebBoundRun:
    """A batch held in the page: `run()` is the library's calls on it, `logits()` reads them."""

    def __init__(self, session: WebSession, images: np.ndarray):
        self._session = session
        self._count = len(images)
        self._session.page.evaluate(
            "(a) => window.toolkit.bind(...a)", _payload(_prepared(images, session.input))
        )

    def run(self) -> None:
        """One inference of the bound batch, in the page."""
        self._session.page.evaluate("() => window.toolkit.runBound()")

    def logits(self) -> np.ndarray:
        """The last run's outputs as float32 logits (or probabilities), padding dropped."""
        text = self._session.page.evaluate("() => window.toolkit.lastOutputs()")
        return self._session.decode(text)[: self._count]


class WebSession:
    """A model file in a JavaScript library in a Chromium page."""

    def __init__(
        self, library: WebLibrary, host: WebHost, path: Path, options: RuntimeOptions, owned: bool
    ):
        self.runtime = library.name
        self.page, info = host.open_page(library, path, options)
        self._finalizer = weakref.finalize(self, _closer(self.page, host if owned else None))
        self._finalizer.atexit = False  # Playwright's driver ends the browser with the process
        try:
            self.input, self.output = library.specs(path, info)
        except Exception:
            self._finalizer()
            raise
        self.threads = int(info["threads"])
        version = info.get("version") or library.package.version
        threads = f"{self.threads} thread{'s' * (self.threads != 1)}"
        if library.threads is None:
            threads += " (it takes no thread count)"
        self.providers = [
            f"{library.package.name} {version} wasm, {threads}, {host.browser_version}"
        ]
        self.settings = {"backend": "wasm", "threads": self.threads,
                         "cross_origin_isolated": bool(info["isolated"])}  # fmt: skip

    def decode(self, text: str) -> np.ndarray:
        """The page's base64 float32 scores as (N, classes) logits of the output's dtype."""
        values = np.frombuffer(base64.b64decode(text), np.float32)
        classes = self.output.shape[-1] or values.size
        return to_logits(values.reshape(-1, classes), self.output)

    def run(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) 0-255 -> (N, classes) float32, as the Python adapter of the file gives."""
        images = check_images(images, self.input)
        if len(images) == 0:
            return np.zeros((0, self.output.shape[-1] or 0), np.float32)
        chunks = _prepared(images, self.input)
        per_call = max(1, TRANSFER_BYTES // chunks[0].nbytes)
        parts = [
            self.decode(self.page.evaluate("(a) => window.toolkit.classify(...a)", _payload(part)))
            for part in (chunks[i : i + per_call] for i in range(0, len(chunks), per_call))
        ]
        return np.concatenate(parts)[: len(images)]

    def bind(self, images: np.ndarray) -> WebBoundRun:
        """`images` in the input's dtype, sent to the page once."""
        return WebBoundRun(self, images)

    def time_calls(self, images: np.ndarray, protocol: Protocol) -> np.ndarray:
        """Per-call nanoseconds of the bound batch, timed in the page (performance.now())."""
        self.bind(images)
        ms = self.page.evaluate(
            "(p) => window.toolkit.time(p)",
            {"warmup": protocol.warmup, "runs": protocol.runs, "seconds": protocol.seconds},
        )
        return np.round(np.asarray(ms, np.float64) * 1e6).astype(np.int64)

    def close(self) -> None:
        """Close the page (and the browser and server when the session started them)."""
        self._finalizer()


# the browser `one_browser()` keeps open for the sessions opened inside it: {"host": WebHost}
# once the first has started it; no "active" key outside one_browser()
_SHARED: dict[str, object] = {}


@contextlib.contextmanager
def one_browser() -> Iterator[None]:
    """Inside it, every web session opens a page of one browser (started on first use, closed
    on leaving): a bench's or verify's web rows pay one browser start (2-3 s), not one each.
    Nested uses share the outer one."""
    if "active" in _SHARED:
        yield
        return
    _SHARED["active"] = True
    try:
        yield
    finally:
        host = _SHARED.pop("host", None)
        _SHARED.clear()
        if isinstance(host, WebHost):
            host.close()


def _shared_host() -> WebHost:
    """`one_browser()`'s host, started now if no session has started it yet."""
    if "host" not in _SHARED:
        _SHARED["host"] = WebHost()
    return _SHARED["host"]  # type: ignore[return-value]


@contextlib.contextmanager
def browser_host() -> Iterator[WebHost]:
    """`one_browser()`'s host inside it (left open), else a host of its own, closed after: one
    Playwright per process at a time, which its sync API requires."""
    if "active" in _SHARED:
        yield _shared_host()
        return
    host = WebHost()
    try:
        yield host
    finally:
        host.close()


def open_web(library: WebLibrary, path: Path, options: RuntimeOptions) -> WebSession:
    """`path` in `library`, in a browser of its own (closed with the session), or in a page of
    `one_browser()`'s; a file the library refuses (`WebLibrary.refuses`) is a one-line
    UsageError before any browser starts."""
    if (reason := library.refuses(path)) is not None:
        raise UsageError(reason)
    if "active" in _SHARED:
        return WebSession(library, _shared_host(), path, options, owned=False)
    host = WebHost()
    try:
        return WebSession(library, host, path, options, owned=True)
    except Exception:
        host.close()
        raise
