"""The bundle's web/ folder: a page that classifies the images a user picks or drops with
`@mediapipe/tasks-vision` (copied from the npm package, never fetched from a CDN) and the web
pick's .tflite, whose metadata gives the class names. Any static server can serve it."""

from __future__ import annotations

import html
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from string import Template

from toolkit.common.errors import UsageError
from toolkit.runfiles import EXPORT_DIR
from toolkit.runtimes.web.npm import TASKS_VISION, package_dir
from toolkit.ship.names import WEB_DIR
from toolkit.ship.picks import Pick
from toolkit.ship.shipment import Shipment

LIBRARY_DIR = "mediapipe"  # web/mediapipe/: the npm package's files the page loads
# what the page loads from the package (the loader picks the SIMD build, or nosimd where a
# browser lacks WebAssembly SIMD); package.json records the version and license
LIBRARY_FILES = (
    "package.json",
    "vision_bundle.mjs",
    "vision_bundle.mjs.map",
    "wasm/vision_wasm_internal.js",
    "wasm/vision_wasm_internal.wasm",
    "wasm/vision_wasm_nosimd_internal.js",
    "wasm/vision_wasm_nosimd_internal.wasm",
)
APP_FILES = ("app.js", "app.css")  # copied as they are; the page is filled in
PAGE_FILE = "index.html"
MAX_RESULTS = 3  # classes shown per image
USAGE_LOG_URL = "https://odml.pa.googleapis.com/v1/log"  # where tasks-vision POSTs its metrics
# what the page may load: its own folder; WebAssembly compiled from it; the user's images as
# blob: URLs (the icon: an empty data: URL). connect-src 'self' refuses the library's
# usage-metrics POST (see WEB_NOTES)
CSP = (
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; "
    "img-src 'self' blob: data:; style-src 'self'; base-uri 'none'; form-action 'none'"
)

# the bundle README's paragraph on the web app (SHIP-CORE's README writer includes it)
WEB_NOTES = f"""\
`web/` classifies the images a user picks or drops, in the browser: `index.html`, `app.js`,
the model file and MediaPipe Tasks' JavaScript and WebAssembly (`{TASKS_VISION.spec}`, copied
from npm into `web/{LIBRARY_DIR}/`) all load from that one folder, and no image leaves the page.
Serve it over HTTP (`toolkit ship RUN --serve`, or any static server): browsers refuse module
scripts from `file://`. The library itself sends usage metrics (task, running mode, latency
counts, browser platform; no images) in a POST to `{USAGE_LOG_URL}`, at most
once a minute while a task is in use and when it is closed; `{TASKS_VISION.spec}` has no option
to turn that off, and Google's notice in its README leaves obtaining users' consent to the
app. The page's Content-Security-Policy (`connect-src 'self'`) refuses that request, so the app
works offline and sends nothing; the browser logs the refusal as a CSP violation in the
console. To let the metrics through, add `https://odml.pa.googleapis.com` to `connect-src` in
`web/index.html`.
"""


def web_paths(model_file: str) -> list[str]:
    """The files `write_web_app` writes for a web pick of `model_file`, relative to the bundle."""
    names = [f"{LIBRARY_DIR}/{name}" for name in LIBRARY_FILES]
    return [f"{WEB_DIR}/{name}" for name in (*names, *APP_FILES, PAGE_FILE, model_file)]


def write_web_app(bundle_dir: Path, s: Shipment) -> Path:
    """Write bundle_dir/web/ for the shipment's web pick (a .tflite MediaPipe loads) and return
    it; the folder appears whole (written beside it, then renamed) or not at all."""
    bundle_dir, run_dir, pick = Path(bundle_dir), s.run.path, s.picks["web"]
    if Path(pick.file).suffix != ".tflite":
        raise UsageError(
            f"the web app runs .tflite files in MediaPipe Tasks, not {pick.file}: pick a "
            "tflite format for the web target"
        )
    model = _model_file(bundle_dir, run_dir, pick.file)
    library = package_dir(TASKS_VISION)
    missing = [f for f in LIBRARY_FILES if not (library / f).is_file()]
    if missing:
        raise UsageError(
            f"{library} lacks {', '.join(missing)}: remove that folder so that "
            f"{TASKS_VISION.spec} is installed again"
        )
    target = bundle_dir / WEB_DIR
    temp = Path(tempfile.mkdtemp(prefix=f".{WEB_DIR}.", dir=bundle_dir))
    os.chmod(temp, 0o755)  # mkdtemp makes it 0700; a static server may run as another user
    try:
        for name in LIBRARY_FILES:
            dest = temp / LIBRARY_DIR / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(library / name, dest)
        shutil.copyfile(model, temp / pick.file)
        sources = resources.files("toolkit.ship") / WEB_DIR
        for name in APP_FILES:
            (temp / name).write_text((sources / name).read_text(encoding="utf-8"))
        page = Template((sources / PAGE_FILE).read_text(encoding="utf-8"))
        (temp / PAGE_FILE).write_text(page.substitute(_page_fields(s, pick)))
        if target.exists():
            shutil.rmtree(target)
        temp.rename(target)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return target


def _model_file(bundle_dir: Path, run_dir: Path, name: str) -> Path:
    """The pick's file: the bundle's copy, else the run's export folder's."""
    for path in (bundle_dir / name, run_dir / EXPORT_DIR / name):
        if path.is_file():
            return path
    raise UsageError(
        f"{name} is in neither {bundle_dir} nor {run_dir / EXPORT_DIR}: export it first "
        f"(`toolkit export {run_dir} --format all`)"
    )


def _page_fields(s: Shipment, pick: Pick) -> dict[str, str]:
    """index.html's fields, HTML-escaped."""
    model = f"{s.config.model} ({s.config.preset})"
    about = (
        f"{pick.file} ({pick.format}): top-1 {100 * pick.top1:.1f}% on the run's test split, "
        f"{pick.p50_ms:.2f} ms per image in {pick.runtime} on the machine that shipped it. "
        "Images stay in this browser."
    )
    fields = {
        "csp": CSP,
        "title": f"{model} image classifier",
        "about": about,
        "model": pick.file,
        "max_results": str(MAX_RESULTS),
    }
    return {k: html.escape(v, quote=True) for k, v in fields.items()}
