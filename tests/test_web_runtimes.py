"""The browser runtimes (toolkit/runtimes/web/): every file each web library opens loads in
headless Chromium and agrees with the Python adapter of the same file on 100 test images; the
local server's isolation headers; in-page timing; a `toolkit bench` row; one-line refusals.

One browser serves the module (a module fixture); `toolkit bench` starts its own."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfiles.data import load_split
from toolkit.runfiles.folder import open_run
from toolkit.runtimes import (
    DEFAULT_RUNTIME,
    RUNTIMES,
    RuntimeOptions,
    RuntimeUnavailable,
    open_artifact,
)
from toolkit.runtimes.base import close_session
from toolkit.runtimes.timing import Protocol
from toolkit.runtimes.web import npm, runtimes
from toolkit.runtimes.web.host import WebHost
from toolkit.runtimes.web.libraries import LIBRARIES
from toolkit.runtimes.web.server import ISOLATION_HEADERS
from toolkit.runtimes.web.session import WebSession

pytestmark = pytest.mark.slow

IMAGES = 100
# the tiny run's data is shapes:300 (30 test images); the same generator at 1000 gives 100
TEST_DATA = "shapes:1000"
# the Python adapter each web runtime is held against: the file's default runtime, but MediaPipe
# against MediaPipe (uint8 frames in, probabilities out)
REFERENCE = {"web-mediapipe": "mediapipe"}
# fp32/fp16 files, measured on the tiny run: max |diff| 3.8e-6 (web-ort, logits), 7.8e-7
# (.tflite, probabilities); 1e-4 leaves room for other kernels (wasm SIMD vs AVX) without
# letting a wrong preprocessing through (that moves scores by 1e-2 and more)
FLOAT_TOLERANCE = 1e-4
# int8 files: wasm's int8 kernels round differently from x86's; measured top-1 agreement 100 %
# on the 100 images (max |diff| 9.4e-3: one or two quantization steps of the output)
INT8_AGREEMENT = 0.97
BY_FILENAME = {f.filename: f for f in FORMATS.values()}
CASES = [
    (library.name, f.filename)
    for library in LIBRARIES.values()
    for f in FORMATS.values()
    if Path(f.filename).suffix in library.suffixes
]


@pytest.fixture(scope="module")
def run(tiny_runs) -> Path:
    return tiny_runs.exported("shiftvit")


@pytest.fixture(scope="module")
def host():
    """One server and Chromium for the module (`make browser` installs what they need)."""
    for library in LIBRARIES.values():
        if (reason := RUNTIMES[library.name].unavailable()) is not None:
            pytest.fail(f"{library.name}: {reason}")
    host = WebHost()
    yield host
    host.close()


@pytest.fixture(scope="module")
def images(run) -> np.ndarray:
    x, _, _ = load_split(open_run(run), "test", TEST_DATA)
    return x[:IMAGES]


@pytest.mark.parametrize("runtime, filename", CASES)
def test_each_file_loads_and_agrees_with_python(host, run, images, runtime, filename):
    library, path = LIBRARIES[runtime], run / "export" / filename
    session = WebSession(library, host, path, RuntimeOptions(), owned=False)
    try:
        web = session.run(images)
    finally:
        session.close()
    reference = open_artifact(path, REFERENCE.get(runtime, DEFAULT_RUNTIME[path.suffix]))
    try:
        python = reference.run(images)
    finally:
        close_session(reference)
    assert web.dtype == np.float32 and web.shape == python.shape == (IMAGES, 10)
    if BY_FILENAME[filename].precision == "int8":
        agreement = float(np.mean(web.argmax(1) == python.argmax(1)))
        assert agreement >= INT8_AGREEMENT, agreement
    else:
        assert float(np.abs(web - python).max()) <= FLOAT_TOLERANCE
    (provider,) = session.providers  # e.g. "onnxruntime-web 1.30.0 wasm, 2 threads, Chromium 1xx"
    assert f"{library.package.name} {library.package.version} wasm" in provider
    assert "Chromium" in provider


def test_threads_follow_the_option_and_default_to_every_core(host, run, images):
    """A page served with the isolation headers may use threads: the default is every core
    (navigator.hardwareConcurrency), --threads 1 is one; the scores do not change."""
    path, library = run / "export" / "model.onnx", LIBRARIES["web-ort"]
    scores = {}
    for threads in (None, 1):
        session = WebSession(library, host, path, RuntimeOptions(threads), owned=False)
        try:
            assert session.settings["cross_origin_isolated"] is True
            assert session.threads == (threads or os.cpu_count())
            scores[threads] = session.run(images[:8])
        finally:
            session.close()
    np.testing.assert_allclose(scores[None], scores[1], atol=FLOAT_TOLERANCE)


def test_bound_run_and_in_page_timing(host, run, images):
    """bind() holds the batch in the page: run() then logits() give run()'s scores; time_calls
    times the calls in the page and returns one time per call, in nanoseconds."""
    path = run / "export" / "model_fp32.tflite"
    session = WebSession(LIBRARIES["web-litert"], host, path, RuntimeOptions(1), owned=False)
    try:
        bound = session.bind(images[:3])
        bound.run()
        np.testing.assert_array_equal(bound.logits(), session.run(images[:3]))
        times = session.time_calls(images[:1], Protocol(warmup=2, runs=5, seconds=None))
    finally:
        session.close()
    assert times.dtype == np.int64 and len(times) == 5 and (times > 0).all()
    assert times.max() < 5e9  # per-call ns, not ms or s


def test_server_sends_isolation_headers_and_nothing_unregistered(host):
    """Every response carries COOP/COEP (WebAssembly threads need them); a path outside the
    registered files is a 404, so the page can load nothing the registry does not name."""
    origin = host.server.origin
    with urllib.request.urlopen(f"{origin}/js/harness.js") as response:
        for name, value in ISOLATION_HEADERS.items():
            assert response.headers[name] == value
        assert response.headers["Content-Type"] == "text/javascript"
    for bad in ("/lib/web-ort/onnxruntime-web/package.json", "/js/../session.py", "/etc/passwd"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(origin + bad)
        assert caught.value.code == 404, bad


def test_registry_files_are_in_the_cache():
    """Each library's served patterns match files of its pinned package (a version bump that
    moves a file fails here, not in a browser)."""
    for library in LIBRARIES.values():
        folder = npm.package_dir(library.package)
        modules = folder.parents[len(library.package.name.split("/")) - 1]
        for pattern in library.files:
            assert list(modules.glob(pattern)), (library.name, pattern)
        assert (Path(__file__).parents[1] / "toolkit/runtimes/web/js" / library.module).is_file()


def test_webgpu_says_why_not(host, monkeypatch):
    """None where the browser has a WebGPU adapter, else one line saying why not; without
    Chromium, the browser's reason."""
    reason = host.webgpu_unavailable()
    assert reason is None or (reason and "\n" not in reason and "WebGPU" in reason)
    monkeypatch.setenv("CHROMIUM", "/no/chromium")
    assert "apt-get install chromium" in runtimes.webgpu_unavailable()


def test_unavailable_names_what_is_missing_and_the_way_out(run, tmp_path, monkeypatch):
    """No Chromium, or the npm package neither cached nor installable: one line each, naming
    the way out; open_artifact refuses with it (exit 2 from the CLI)."""
    monkeypatch.setenv("CHROMIUM", str(tmp_path / "no-chromium"))
    for library in LIBRARIES.values():
        reason = RUNTIMES[library.name].unavailable()
        assert "\n" not in reason and "apt-get install chromium" in reason
    monkeypatch.delenv("CHROMIUM")
    monkeypatch.setenv(npm.CACHE_ENV, str(tmp_path / "empty-cache"))
    monkeypatch.setattr(runtimes.shutil, "which", lambda name: None)
    reason = RUNTIMES["web-ort"].unavailable()
    assert "\n" not in reason and "onnxruntime-web@" in reason and npm.CACHE_ENV in reason
    with pytest.raises(RuntimeUnavailable) as caught:
        open_artifact(run / "export" / "model.onnx", "web-ort")
    assert caught.value.reason == reason


def test_bad_input_is_refused_in_one_line(run, tmp_path):
    """A .onnx to web-litert: the runtimes that open it named; a .tflite without TFLite Model
    Metadata to web-mediapipe: refused before any browser starts."""
    with pytest.raises(UsageError) as caught:
        open_artifact(run / "export" / "model.onnx", "web-litert")
    message = str(caught.value)
    assert "\n" not in message and "opens .tflite files" in message and "web-ort" in message
    bare = tmp_path / "bare.tflite"
    bare.write_bytes(_without_metadata((run / "export" / "model_fp32.tflite").read_bytes()))
    assert "has no TFLite Model Metadata" in RUNTIMES["web-mediapipe"].refuses(bare)
    with pytest.raises(UsageError) as caught:
        open_artifact(bare, "web-mediapipe")
    message = str(caught.value)
    assert "\n" not in message and "has no TFLite Model Metadata" in message


def _without_metadata(data: bytes) -> bytes:
    """The .tflite's bytes with its metadata entry renamed (as another program's file)."""
    assert data.count(b"TFLITE_METADATA") == 1
    return data.replace(b"TFLITE_METADATA", b"OTHER_METADATA_")
