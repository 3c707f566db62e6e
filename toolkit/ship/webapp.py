"""The bundle's web/ folder: a page that classifies the images a user picks or drops with the web
pick's library (MediaPipe Tasks, LiteRT.js or onnxruntime-web: its npm files copied from the
package, never fetched from a CDN) through that library's JS module of toolkit/runtimes/web/js/,
one code path for the three. Class names: the .tflite's metadata where the library reads it,
else web/labels.txt. Any static server can serve it (threads need cross-origin isolation)."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path, PurePath
from string import Template

from toolkit.common.errors import UsageError
from toolkit.runfiles import EXPORT_DIR
from toolkit.runfiles.classnames import class_names_of
from toolkit.runfiles.folder import LABELS_FILE, labels_text
from toolkit.runtimes.web.libraries import LIBRARIES, WebLibrary
from toolkit.runtimes.web.npm import installed, package_dir
from toolkit.ship.names import WEB_DIR
from toolkit.ship.picks import Pick
from toolkit.ship.serve import ISOLATION_HEADERS
from toolkit.ship.shipment import Shipment
from toolkit.ship.webpick import DEFAULT_LIBRARY

LIB_DIR = "lib"  # web/lib/: the npm files the page loads, as laid out under node_modules/
APP_FILES = ("app.js", "app.css")  # copied as they are; the page is filled in
PAGE_FILE = "index.html"
MAX_RESULTS = 3  # classes shown per image
USAGE_LOG_URL = "https://odml.pa.googleapis.com/v1/log"  # where tasks-vision POSTs its metrics
# the old bundles' layout (MediaPipe alone, under web/mediapipe/): what ship wrote there
LEGACY_FILES = tuple(
    f"mediapipe/{name}"
    for name in (
        "package.json",
        "vision_bundle.mjs",
        "vision_bundle.mjs.map",
        "wasm/vision_wasm_internal.js",
        "wasm/vision_wasm_internal.wasm",
        "wasm/vision_wasm_nosimd_internal.js",
        "wasm/vision_wasm_nosimd_internal.wasm",
    )
)
# what the page may load: its own folder; WebAssembly compiled from it; the user's images as
# blob: URLs (the icon: an empty data: URL); an import map only by its hash. connect-src 'self'
# refuses MediaPipe's usage-metrics POST (see WEB_NOTES)
CSP = Template(
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'$hashes; connect-src 'self'; "
    "img-src 'self' blob: data:; style-src 'self'; worker-src 'self'; base-uri 'none'; "
    "form-action 'none'"
)
# what a static server must send for the libraries' threaded WebAssembly (else one thread)
ISOLATION = tuple(f"{name}: {value}" for name, value in ISOLATION_HEADERS.items())

# the bundle README's paragraph on the web app (SHIP-CORE's README writer includes it)
WEB_NOTES = f"""\
`web/` classifies the images a user picks or drops, in the browser: `index.html`, `app.js`,
the model file, the library's module and its JavaScript and WebAssembly (copied from npm into
`web/{LIB_DIR}/`) all load from that one folder, and no image leaves the page. Serve it over
HTTP (`toolkit ship RUN --serve`, or any static server): browsers refuse module scripts from
`file://`. Threads: LiteRT.js and onnxruntime-web run on every core only where the page is
cross-origin isolated, i.e. the server sends `{ISOLATION[0]}` and `{ISOLATION[1]}`
(`toolkit ship --serve` does); without them they run on one thread.

With MediaPipe Tasks, the library itself sends usage metrics (task, running mode, latency
counts, browser platform; no images) in a POST to `{USAGE_LOG_URL}`, at most
once a minute while a task is in use and when it is closed; it has no option to turn that off,
and Google's notice in its README leaves obtaining users' consent to the app. The page's
Content-Security-Policy (`connect-src 'self'`) refuses that request, so the app works offline
and sends nothing; the browser logs the refusal as a CSP violation in the console. To let the
metrics through, add `https://odml.pa.googleapis.com` to `connect-src` in `web/index.html`.
"""


def library_of(pick: Pick) -> WebLibrary:
    """The web library the app runs the pick's file with."""
    return LIBRARIES[pick.library or DEFAULT_LIBRARY]


def _node_modules(library: WebLibrary, package: Path) -> Path:
    """The node_modules folder above the installed `package` folder of `library`."""
    return package.parents[len(library.package.name.split("/")) - 1]


def _library_paths(library: WebLibrary, package: Path | None) -> list[str]:
    """The library's files the app copies, relative to node_modules/ (its patterns expanded in
    the installed package; without one, the patterns with no wildcard)."""
    names = [f"{library.package.name}/package.json"]
    for pattern in library.files:
        if package is None:
            names += [pattern] if not any(c in pattern for c in "*?[") else []
            continue
        top = _node_modules(library, package)
        names += sorted(p.relative_to(top).as_posix() for p in top.glob(pattern) if p.is_file())
    return names


def web_paths(model_file: str) -> list[str]:
    """Every file `write_web_app` may write for a web pick of `model_file`, relative to the
    bundle, whichever library runs it (the npm files of those installed here), and the files
    of the old MediaPipe-only layout."""
    names = [*APP_FILES, PAGE_FILE, model_file, LABELS_FILE, *LEGACY_FILES]
    for library in LIBRARIES.values():
        names.append(library.module)
        found = _library_paths(library, installed(library.package))
        names += [f"{LIB_DIR}/{name}" for name in found]
    return [f"{WEB_DIR}/{name}" for name in dict.fromkeys(names)]


def _library_files(library: WebLibrary) -> tuple[Path, list[str]]:
    """node_modules/ of the installed library and its files to copy; a UsageError naming the
    way out when a pattern matches nothing there."""
    package = package_dir(library.package)
    top = _node_modules(library, package)
    missing = [p for p in library.files if not any(f.is_file() for f in top.glob(p))]
    if missing:
        raise UsageError(
            f"{top} lacks {', '.join(missing)}: remove {package} so that "
            f"{library.package.spec} is installed again"
        )
    return top, _library_paths(library, package)


def write_web_app(bundle_dir: Path, s: Shipment) -> Path:
    """Write bundle_dir/web/ for the shipment's web pick, run by the library it was picked in,
    and return it; the folder appears whole (written beside it, then renamed) or not at all."""
    bundle_dir, pick = Path(bundle_dir), s.picks["web"]
    library = library_of(pick)
    if PurePath(pick.file).suffix.lower() not in library.suffixes:
        raise UsageError(
            f"the web app runs {' and '.join(library.suffixes)} files in {library.name}, not "
            f"{pick.file}: pick a file that library loads for the web target"
        )
    model = _model_file(bundle_dir, s.run.path, pick.file)
    top, files = _library_files(library)
    target = bundle_dir / WEB_DIR
    temp = Path(tempfile.mkdtemp(prefix=f".{WEB_DIR}.", dir=bundle_dir))
    os.chmod(temp, 0o755)  # mkdtemp makes it 0700; a static server may run as another user
    try:
        for name in files:
            dest = temp / LIB_DIR / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(top / name, dest)
        shutil.copyfile(model, temp / pick.file)
        modules = resources.files("toolkit.runtimes.web") / "js"
        (temp / library.module).write_text((modules / library.module).read_text("utf-8"))
        if not library.reads_labels:
            names = class_names_of(model, s.config.num_classes)
            (temp / LABELS_FILE).write_text(labels_text(names))
        sources = resources.files("toolkit.ship") / WEB_DIR
        for name in APP_FILES:
            (temp / name).write_text((sources / name).read_text(encoding="utf-8"))
        page = Template((sources / PAGE_FILE).read_text(encoding="utf-8"))
        (temp / PAGE_FILE).write_text(page.substitute(page_fields(s, pick, library)))
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


def import_map(library: WebLibrary) -> str:
    """The page's import map of the library's bare names (`{}`: none), as JSON."""
    imports = {name: f"./{LIB_DIR}/{path}" for name, path in library.imports.items()}
    return json.dumps({"imports": imports}, sort_keys=True)


def page_fields(s: Shipment, pick: Pick, library: WebLibrary) -> dict[str, str]:
    """index.html's fields: HTML-escaped, but for the import map (JSON of the registry's paths,
    allowed by its hash in the CSP)."""
    model = f"{s.config.model} ({s.config.preset})"
    where = "in a browser" if pick.runtime in LIBRARIES else f"in {pick.runtime} (Python)"
    about = (
        f"{pick.file} ({pick.format}) in {library.name}: top-1 {100 * pick.top1:.1f}% on the "
        f"run's test split, {pick.p50_ms:.2f} ms per image {where} on the machine that shipped "
        "it. Images stay in this browser."
    )
    imports = import_map(library)
    digest = base64.b64encode(hashlib.sha256(imports.encode()).digest()).decode()
    entry = s.manifest.artifacts.get(pick.format)
    height, width, _ = s.config.image_shape
    fields = {
        "csp": CSP.substitute(hashes=f" 'sha256-{digest}'"),
        "title": f"{model} image classifier",
        "about": about,
        "model": pick.file,
        "module": library.module,
        "base": f"{LIB_DIR}/{library.package.name}/",
        "library": library.name,
        "labels": "" if library.reads_labels else LABELS_FILE,
        "scores": (entry.output if entry is not None else None) or "probabilities",
        "height": str(height),
        "width": str(width),
        "max_results": str(MAX_RESULTS),
    }
    return {k: html.escape(v, quote=True) for k, v in fields.items()} | {"importmap": imports}
