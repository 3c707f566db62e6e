"""The browser runtimes' rows of a bench (toolkit/runtimes/web/): each file on wasm at one thread
and at the most threads the page may use (or at `--threads`), its top-1 computed in the browser
(in the page that timed its most-threads row, when there is one), and one WebGPU row per web
runtime saying whether the browser could run it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolkit.runtimes import RUNTIMES
from toolkit.runtimes.base import Session
from toolkit.runtimes.timing import Protocol
from toolkit.runtimes.web.libraries import LIBRARIES
from toolkit.runtimes.worker import measure

# a web row's memory fields: the Python side's alone (the browser's is not measured), left out
PYTHON_MEMORY = ("rss_before_load_mb", "peak_rss_mb")

# the default time budget of a web row (no --runs or --seconds): each row opens a page that
# compiles the library's WebAssembly first (about a second), so a shorter budget keeps the
# bench's added time small; a second is still hundreds of calls of a tiny model
WEB_SECONDS = 1.0
MOST = None  # a row's thread request: the page's default, every core under cross-origin isolation
# the thread request of the page a web runtime's top-1 is computed in (artifact_accuracy.top1
# opens the file with the defaults): the row asking for it computes the top-1 in its page
TOP1_THREADS = MOST
NO_ROOFLINE = (
    "no roofline fraction for the web-* rows: the roofline's peaks are native matmuls timed in "
    "LiteRT and ONNX Runtime, and the browser's wasm kernels (other SIMD, threads only under "
    "cross-origin isolation) have no peak measured here"
)
WEBGPU_NOT_TIMED = (
    "the browser has a WebGPU adapter, but toolkit times the web libraries on wasm only: their "
    "WebGPU backends are not wired into its pages"
)


def is_web(runtime: str) -> bool:
    """Whether `runtime` runs in the browser."""
    return runtime in LIBRARIES


def thread_requests(runtime: str, threads: int | None) -> tuple[int | None, ...]:
    """The thread counts `runtime`'s rows ask for: `threads` when given (--threads), else one
    and the page's most (MOST); one row for a library that takes no thread count."""
    if threads is not None:
        return (threads,)
    if LIBRARIES[runtime].threads is None:  # MediaPipe: one thread, whatever is asked
        return (MOST,)
    return (1, MOST)


def measure_in_page(
    path: Path,
    runtime: str,
    batch: int,
    protocol: Protocol,
    threads: int | None,
    then: Callable[[Session], None] | None = None,
) -> dict:
    """One web row, measured in this process: a page of the browser `one_browser()` holds
    (no worker per row: the figure is timed in the page, and a browser start per row would
    cost 2-3 s); no memory figure. `then` gets the page's session once timed."""
    row = measure(path, runtime, batch, protocol, threads, then=then)
    for key in PYTHON_MEMORY:
        row.pop(key, None)
    return row


def web_fields(row: dict) -> dict:
    """A web row's `threads` (what the page really used) and `backend` from its settings."""
    settings = row.get("settings") or {}
    out = {"backend": settings.get("backend", "wasm")}
    if settings.get("threads") is not None:
        out["threads"] = settings["threads"]
    return out


def webgpu_reasons(runtimes: list[str]) -> dict[str, str]:
    """Why each web runtime's WebGPU row is not timed: its own reason when it cannot run here,
    else the browser's (no adapter), found once per bench, or WEBGPU_NOT_TIMED."""
    reasons = {r: RUNTIMES[r].unavailable() for r in runtimes}
    if any(reason is None for reason in reasons.values()):
        browser = _browser_webgpu()
        reasons = {r: reason or browser for r, reason in reasons.items()}
    return {r: str(reason) for r, reason in reasons.items()}


def _browser_webgpu() -> str:
    """The headless browser's WebGPU verdict as a row's reason (one browser started)."""
    from toolkit.runtimes.web.runtimes import webgpu_unavailable

    try:
        reason = webgpu_unavailable()
    except Exception as exc:  # noqa: BLE001  (a browser that will not start: say so)
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"the WebGPU check could not start the browser ({text})"
    return reason or WEBGPU_NOT_TIMED


def top1_source(row: dict) -> str | None:
    """Whose top-1 a row shows: "" the file's (its default runtime: the native rows), a web
    runtime's name for its wasm rows (computed in the browser), None for a WebGPU row."""
    if not is_web(row["runtime"]):
        return ""
    return row["runtime"] if row.get("backend", "wasm") == "wasm" else None


ANY = next(iter(LIBRARIES))  # a web runtime, to ask a plan for the web rows' protocol
TIMER = (
    "performance.now() per call in the page, the batch already in the page in the file's dtype; "
    "the bench's web rows in pages of one browser, in its process"
)


def protocol_fields(protocol: Protocol, threads: int | None, rows: list[dict]) -> dict:
    """The web rows' protocol for bench.json's `protocol` ({} without web rows)."""
    if not any(is_web(r["runtime"]) for r in rows):
        return {}
    asked = threads if threads is not None else "1 and the most the page may use"
    return {
        "web": {
            "warmup": protocol.warmup,
            "runs": protocol.runs,
            "seconds": protocol.seconds,
            "threads": asked,
            "timer": TIMER,
        }
    }
