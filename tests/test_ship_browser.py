"""`toolkit ship`'s pages in a real headless Chromium (Debian's, driven by Playwright for
Python; `make test` installs both): report.html renders offline with its charts drawn, and the
web app classifies test images as Python does, with MediaPipe Tasks' web client (class names from
the file's metadata) and with the other libraries a web pick may name (LiteRT.js, onnxruntime-web:
class names from the bundle's labels.txt). A missing browser fails here: it is an install step.
"""

from __future__ import annotations

import base64
import functools
import io
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import sync_playwright

from toolkit.export import export_run
from toolkit.runfiles import read_bench, read_verify
from toolkit.runfiles.data import load_split
from toolkit.runfiles.folder import LABELS_FILE, open_run
from toolkit.runtimes import open_artifact
from toolkit.runtimes.web.libraries import LIBRARIES
from toolkit.ship import serve
from toolkit.ship.measurements import read_measurements
from toolkit.ship.picks import Pick
from toolkit.ship.report_html import REPORT_FILE, write_report
from toolkit.ship.shipment import Shipment
from toolkit.ship.webapp import USAGE_LOG_URL, WEB_DIR, WEB_NOTES, write_web_app
from toolkit.training.options import TrainOptions
from toolkit.training.train import train

pytestmark = pytest.mark.slow

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
DATA = "shapes:2000"  # 200 test images, no download; 3 epochs learn every class (~60% top-1)
EPOCHS = 3
WEB_IMAGES = 100
WAIT_MS = 180_000  # the longest a page may take to load or classify (a busy 2-core machine)
LOCAL_HOSTS = ("127.0.0.1",)
LOCAL_SCHEMES = ("file", "data", "blob")
# in the web app's page: a second ImageClassifier on the page's model classifies one image and
# is closed, which flushes the library's usage log; returns its top class and the URLs the
# page's CSP blocked meanwhile
CLOSE_A_CLASSIFIER = """async () => {
    const blocked = [];
    document.addEventListener("securitypolicyviolation", (e) => blocked.push(e.blockedURI));
    const lib = await import("./lib/@mediapipe/tasks-vision/vision_bundle.mjs");
    const wasm = await lib.FilesetResolver.forVisionTasks(
        new URL("./lib/@mediapipe/tasks-vision/wasm", location.href).href);
    const classifier = await lib.ImageClassifier.createFromOptions(wasm, {
        baseOptions: {modelAssetPath: document.querySelector("main").dataset.model,
                      delegate: "CPU"},
        runningMode: "IMAGE"});
    const canvas = new OffscreenCanvas(32, 32).getContext("2d");
    canvas.fillStyle = "#c03020";
    canvas.fillRect(0, 0, 32, 32);
    const top = classifier.classify(canvas.getImageData(0, 0, 32, 32))
        .classifications[0].categories[0].categoryName;
    classifier.close();
    for (let i = 0; i < 100 && !blocked.length; i++) await new Promise((r) => setTimeout(r, 20));
    return {top, blocked};
}"""


def _picks(run: Path) -> dict[str, Pick]:
    """android: the fastest file in LiteRT; web: the full-int8 file in MediaPipe (uint8 pixels
    in, the file an app meets most trouble with). Which file is picked is `choose`'s business
    (tests/test_ship.py); these pages must show whichever they are given."""
    bench = read_bench(run).to_json()
    verify = read_verify(run).to_json()["models"]
    float_top1 = verify["reference"]["top1_accuracy"]
    agreement = {c["file"]: c["metrics"]["top1_agreement"] for c in verify["cells"]}
    ok = [r for r in bench["rows"] if r["status"] == "ok"]
    rows = {
        "web": next(r for r in ok if r["runtime"] == "mediapipe" and r["format"] == "tflite-int8"),
        "android": min((r for r in ok if r["runtime"] == "litert"), key=lambda r: r["p50_ms"]),
    }
    return {
        target: Pick(
            target,
            r["format"],
            r["file"],
            r["runtime"],
            r["p50_ms"],
            r["top1"],
            float_top1,
            agreement.get(r["file"]),
            r["size_bytes"],
        )  # fmt: skip
        for target, r in rows.items()
    }


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> tuple[Path, Path, dict[str, Pick]]:
    """(run, bundle, picks): a tiny run trained, exported (.tflite fp32 and int8), verified and
    benched as `toolkit ship` benches (no roofline: the report shows none); the bundle holding
    the picked files, report.html and web/."""
    from toolkit import bench_run, verify_run
    from toolkit.ship.stages import NO_ROOFLINE

    root = tmp_path_factory.mktemp("ship")
    run = Path(train(TrainOptions("shiftvit", "tiny", DATA, epochs=EPOCHS), out=root / "run"))
    export_run(run, "tflite,tflite-int8,onnx", calib_samples=64)
    verify_run(run, level="models", runtimes="litert,ort-cpu")  # saves verify.json
    bench_run(
        run, runtime="litert,mediapipe,web-litert", format="tflite,tflite-int8", seconds=0.05,
        warmup=1, no_roofline=NO_ROOFLINE,
    )  # fmt: skip
    picks = _picks(run)
    bundle = root / "bundle"
    bundle.mkdir()
    for pick in picks.values():
        shutil.copyfile(run / "export" / pick.file, bundle / pick.file)
    shipment = Shipment(open_run(run), read_measurements(run), picks, 100.0)
    write_report(bundle, shipment)
    write_web_app(bundle, shipment)
    return run, bundle, picks


@pytest.fixture(scope="module")
def browser() -> Iterator:
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} not found: `make test` installs Debian's chromium")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield chromium
        chromium.close()


class Watched:
    """A page with every request, console error and uncaught exception recorded; requests
    off the machine are aborted (and recorded)."""

    def __init__(self, browser):
        self.page = browser.new_page(viewport={"width": 1100, "height": 900})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.route("**/*", lambda r: r.continue_() if _local(r.request.url) else r.abort())

    def off_machine(self) -> list[str]:
        return [u for u in self.requests if not _local(u)]


def _local(url: str) -> bool:
    parsed = urlparse(url)
    return parsed.scheme in LOCAL_SCHEMES or parsed.hostname in LOCAL_HOSTS


def _classified(page, paths: list[str]) -> list[list]:
    """The web app's results for `paths` uploaded at once: per image [file, error, top class
    index, its name, its score] (-1 and None where there is none)."""
    page.set_input_files("#files", paths)
    page.locator(f"#results > li:nth-child({len(paths)})").wait_for(timeout=WAIT_MS)
    page.locator("#status[data-state=ready]").wait_for(timeout=WAIT_MS)
    return page.locator("#results > li").evaluate_all(
        "items => items.map(i => { const top = i.querySelector('ol > li');"
        " return [i.dataset.file, i.dataset.error ?? null,"
        " top ? Number(top.dataset.index) : -1, top ? top.dataset.name : null,"
        " top ? Number(top.dataset.score) : -1]; })"
    )


def _coloured_share(png: bytes) -> float:
    """The share of a screenshot's pixels in colour (not white, grey or black): the marks of
    every chart are coloured, their axes, grid and text are not."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return float(np.mean(pixels.max(axis=2) - pixels.min(axis=2) > 48))


def test_report_renders_offline_with_its_charts(shipped, browser):
    """report.html opens from disk with no console error and no request but its own file;
    each chart has its marks and draws more than a background; the thumbnails decode to
    images; the figures are the run's (float top-1 as verify found it, each pick named)."""
    run, bundle, picks = shipped
    watched = Watched(browser)
    page = watched.page
    page.goto((bundle / REPORT_FILE).as_uri())
    page.wait_for_load_state("load")
    assert watched.errors == []
    assert watched.off_machine() == []
    assert {urlparse(u).scheme for u in watched.requests} <= {"file", "data"}

    charts = {"confusion": 100, "per-class": 10, "scatter": 4, "layers": 20}  # at least n marks
    for chart, least in charts.items():
        figure = page.locator(f"figure#{chart}")
        assert figure.locator("svg .mark").count() >= least, chart
        assert _coloured_share(figure.screenshot()) > 0.001, f"{chart} looks blank"  # blank: 0
    rings = page.locator("figure#scatter svg .pick")
    assert rings.count() == len({(p.file, p.runtime) for p in picks.values()})

    sources = page.locator(".example img").evaluate_all(
        "imgs => imgs.map(i => [i.src, i.complete && i.naturalWidth > 0])"
    )
    assert len(sources) >= 20 and all(decoded for _, decoded in sources)
    for src, _ in sources[:5]:
        png = base64.b64decode(src.split(",", 1)[1])
        assert np.asarray(Image.open(io.BytesIO(png))).std() > 0

    verify = read_verify(run).to_json()["models"]
    float_top1 = verify["reference"]["top1_accuracy"]  # Keras; the page's comes from the .tflite
    assert f"{100 * float_top1:.2f}%" in page.locator("#float .big").inner_text()
    legend = page.locator("figure#per-class").inner_text()  # each file's top-1, computed here
    for cell in verify["cells"]:
        if cell["file"] in {p.file for p in picks.values()}:
            top1 = cell["metrics"]["top1_accuracy"]
            assert f"{cell['file']} (top-1 {100 * top1:.2f}%)" in legend
    # the browser rows beside the native ones, each named by its library and thread count
    table = page.locator("#tradeoff table").inner_text()
    web_rows = [r for r in read_bench(run).rows if r.runtime == "web-litert" and r.ok]
    assert web_rows and all(r.raw.get("threads") for r in web_rows)
    for r in web_rows:
        threads = r.raw["threads"]
        assert f"web-litert, wasm, {threads} thread{'s' if threads > 1 else ''}" in table
    titles = page.locator("figure#scatter svg .mark title").evaluate_all(
        "ts => ts.map(t => t.textContent)"
    )
    assert sum("in web-litert" in t for t in titles) == len(web_rows)
    picks_text = page.locator("#picks").inner_text()
    for target, pick in picks.items():
        assert target in picks_text and pick.file in picks_text
    page.close()


def _test_images(run: Path, folder: Path) -> tuple[list[str], np.ndarray]:
    """WEB_IMAGES test images of the run written as PNG files, and the images."""
    images = load_split(open_run(run), "test")[0][:WEB_IMAGES]
    folder.mkdir(exist_ok=True)
    paths = []
    for i, image in enumerate(images):
        path = folder / f"test_{i:03d}.png"
        Image.fromarray(image.astype(np.uint8)).save(path)
        paths.append(str(path))
    return paths, images


@pytest.fixture(scope="module")
def server(shipped) -> Iterator[str]:
    """The bundle served on 127.0.0.1 (as `toolkit ship --serve` does); its base URL."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(shipped[1]))
    handler.log_message = lambda *args: None
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_web_app_classifies_as_litert_does(shipped, browser, server, tmp_path):
    """The web app, served on 127.0.0.1, classifies WEB_IMAGES test images picked in its file
    input: top-1 agrees with LiteRT in Python on the same file for >= 99% of them, and the
    class names are the run's, which the page can only have read from the file's metadata.
    Nothing leaves the machine, and the page's CSP refuses the library's usage-log POST."""
    run, bundle, picks = shipped
    web = bundle / WEB_DIR
    model = web / picks["web"].file
    paths, images = _test_images(run, tmp_path / "images")
    session = open_artifact(model, "litert")
    expected = session.run(images.astype(np.float32)).argmax(axis=1)
    names = (run / LABELS_FILE).read_text().splitlines()

    watched = Watched(browser)
    page = watched.page
    page.goto(f"{server}/{WEB_DIR}/index.html")
    page.locator("#status[data-state=ready]").wait_for(timeout=WAIT_MS)
    shown = _classified(page, paths)
    assert [s[1] for s in shown] == [None] * WEB_IMAGES  # every image decoded and classified
    assert [s[0] for s in shown] == [Path(p).name for p in paths]
    got = np.array([s[2] for s in shown])
    agreement = float(np.mean(got == expected))
    assert agreement >= 0.99, f"top-1 agreement {agreement:.1%} with LiteRT"
    assert len(set(got.tolist())) > 1  # a model with one answer would agree trivially
    assert all(name == names[index] for _, _, index, name, _ in shown)
    page_text = (web / "index.html").read_text() + (web / "app.js").read_text()
    assert not any(name in page_text for name in ("horizontal_bar", "vertical_bar", "dot_grid"))

    refused = page.evaluate(CLOSE_A_CLASSIFIER)  # the library's own usage-log POST
    assert refused["top"] in names and refused["blocked"] == [USAGE_LOG_URL]
    assert USAGE_LOG_URL in WEB_NOTES  # the bundle README says what the CSP refuses
    assert watched.off_machine() == []
    assert any(u.endswith(picks["web"].file) for u in watched.requests)
    uncaught = [e for e in watched.errors if e.startswith("uncaught")]
    assert uncaught == []
    page.close()


def test_the_library_posts_its_usage_log_where_the_csp_allows_it(shipped, browser, server):
    """What WEB_NOTES says the CSP guards against is real: with the page's CSP bypassed, the
    same classifier closed sends a POST to USAGE_LOG_URL (aborted here, off the machine)."""
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    page.route("**/*", lambda r: r.continue_() if _local(r.request.url) else r.abort())
    page.goto(f"{server}/{WEB_DIR}/index.html")
    page.locator("#status[data-state=ready]").wait_for(timeout=WAIT_MS)
    usage_log = lambda r: r.url == USAGE_LOG_URL and r.method == "POST"  # noqa: E731
    with page.expect_request(usage_log, timeout=WAIT_MS):
        assert page.evaluate(CLOSE_A_CLASSIFIER)["blocked"] == []
    context.close()


# library -> (format, the Python runtime the page must agree with)
LIBRARY_PICKS = {"web-litert": ("tflite-int8", "litert"), "web-ort": ("onnx", "ort-cpu")}


def _library_pick(run: Path, library: str) -> Pick:
    """A web pick of the run's file in `library`, as `choose` makes one from browser rows."""
    fmt, _ = LIBRARY_PICKS[library]
    verify = read_verify(run).to_json()["models"]
    cell = next(c for c in verify["cells"] if c["format"] == fmt)
    file = cell["file"]
    top1 = cell["metrics"]["top1_accuracy"]
    float_top1 = verify["reference"]["top1_accuracy"]
    size = (run / "export" / file).stat().st_size
    return Pick("web", fmt, file, library, 1.0, top1, float_top1, None, size, library=library,
                threads=2, measured_top1=top1)  # fmt: skip


@pytest.fixture
def isolated(tmp_path) -> Iterator:
    """A factory: the folder served as `toolkit ship --serve` serves it (cross-origin isolation
    headers included); its base URL."""
    servers = []

    def start(folder: Path) -> str:
        httpd = serve.bind(folder, 0)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return serve.url(httpd).rstrip("/")

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("library", LIBRARY_PICKS)
def test_web_app_classifies_with_the_picked_library(shipped, browser, isolated, library, tmp_path):
    """A bundle whose web pick was made in LiteRT.js (uint8 input) or onnxruntime-web (float32
    input, logits out): the page loads that library alone, from the bundle, on every core
    (served with --serve's isolation headers), and its top-1 on WEB_IMAGES uploaded test images
    agrees with the same file in Python for >= 99% of them, named from labels.txt."""
    run = shipped[0]
    pick = _library_pick(run, library)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    shutil.copyfile(run / "export" / pick.file, bundle / pick.file)
    write_web_app(bundle, Shipment(open_run(run), read_measurements(run), {"web": pick}, 100.0))
    paths, images = _test_images(run, tmp_path / "images")
    session = open_artifact(bundle / WEB_DIR / pick.file, LIBRARY_PICKS[library][1])
    expected = session.run(images.astype(np.float32))
    names = (run / LABELS_FILE).read_text().splitlines()

    watched = Watched(browser)
    page = watched.page
    page.goto(f"{isolated(bundle)}/{WEB_DIR}/index.html")
    page.locator("#status[data-state=ready]").wait_for(timeout=WAIT_MS)
    assert page.evaluate("() => crossOriginIsolated")
    cores = page.evaluate("() => navigator.hardwareConcurrency")
    assert page.locator("main").get_attribute("data-threads") == str(cores)
    shown = [s[1:] for s in _classified(page, paths)]
    assert [s[0] for s in shown] == [None] * WEB_IMAGES
    got = np.array([s[1] for s in shown])
    agreement = float(np.mean(got == expected.argmax(axis=1)))
    assert agreement >= 0.99, f"top-1 agreement {agreement:.1%} with {LIBRARY_PICKS[library][1]}"
    assert len(set(got.tolist())) > 1
    assert all(name == names[index] for _, index, name, _ in shown)
    assert all(0 < score <= 1 for *_, score in shown)  # probabilities (ORT's logits softmaxed)
    package = LIBRARIES[library].package.name
    assert any(f"/{WEB_DIR}/lib/{package}/" in u for u in watched.requests)
    assert not any("mediapipe" in u for u in watched.requests)
    assert watched.off_machine() == []
    assert [e for e in watched.errors if e.startswith("uncaught")] == []  # LiteRT logs as errors
    page.close()
