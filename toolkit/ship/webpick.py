"""Why the web app runs its file in the library it does: the browser rows that decided the web
pick (p50, threads, top-1) beside the runner-up's, as the model card and the bundle README say
it (one text for both)."""

from __future__ import annotations

from toolkit.runtimes.web.libraries import LIBRARIES
from toolkit.ship.picks import Pick, candidates, within
from toolkit.ship.shipment import Shipment
from toolkit.ship.targets import TARGETS

DEFAULT_LIBRARY = "web-mediapipe"  # a web pick that names none (made before the browser ranked)


def library_name(pick: Pick) -> str:
    """The web library the app runs the pick with, and its npm package, e.g.
    "web-litert (`@litertjs/core@2.5.3`)"."""
    name = pick.library or DEFAULT_LIBRARY
    return f"{name} (`{LIBRARIES[name].package.spec}`)"


def runtime_label(runtime: object, threads: object = None, backend: object = None) -> str:
    """A bench row's runtime with its backend and thread count where it records them, e.g.
    "web-litert, wasm, 2 threads"."""
    parts = [str(runtime), backend if isinstance(backend, str) else ""]
    if isinstance(threads, int):
        parts.append(f"{threads} thread{'s' if threads != 1 else ''}")
    return ", ".join(p for p in parts if p)


def row_text(p: Pick) -> str:
    """One candidate's figures: file, runtime and threads, p50, top-1."""
    measured = p.measured_top1
    browser = "" if measured is None else f" ({100 * measured:.2f}% in that row)"
    return (
        f"`{p.file}` in {runtime_label(p.runtime, p.threads)}: p50 {p.p50_ms:.3f} ms, top-1 "
        f"{100 * p.top1:.2f}%{browser}"
    )


def rivals(s: Shipment, pick: Pick) -> list[Pick]:
    """The runner-up (the next fastest pair within the budget), then the fastest pair within
    it of each library not named yet."""
    found, _ = candidates(s.measurements, TARGETS["web"], pick.float_top1)
    inside = sorted((c for c in found if within(c, s.max_drop)), key=lambda c: c.p50_ms)
    others = [c for c in inside if (c.file, c.runtime) != (pick.file, pick.runtime)]
    named = {pick.runtime, *(c.runtime for c in others[:1])}
    best = {c.runtime: c for c in reversed(others) if c.runtime not in named}
    return others[:1] + sorted(best.values(), key=lambda c: c.p50_ms)


def web_choice(s: Shipment) -> list[str]:
    """Markdown lines: the web app's library and file, and the rows that chose them (none
    without a web pick)."""
    pick = s.picks.get("web")
    if pick is None:
        return []
    lines = [
        f"The web app runs `{pick.file}` with {library_name(pick)}: the fastest file and "
        f"library within {s.max_drop:g} top-1 points, {row_text(pick)}."
    ]
    found = rivals(s, pick)
    if found:
        lines.append(f"The runner-up: {row_text(found[0])}.")
    if found[1:]:
        lines.append(f"The fastest in the other libraries: {'; '.join(map(row_text, found[1:]))}.")
    if pick.stand_in:
        lines.append(
            f"No browser figure decided it: {pick.stand_in}. Its p50 is not a browser's: time "
            "the page in one before you rely on it."
        )
    else:
        lines.append(
            "Figures from `toolkit bench` in headless Chromium on the machine below "
            "(WebAssembly; the most threads only where the page is cross-origin isolated)."
        )
    return [" ".join(lines)]
