"""The web app's folder without a browser (tests/test_ship_browser.py runs it in Chromium): the
npm package found in its cache or installed with npm, one-line errors when npm is missing or
fails, and web/ written whole with the pick's file and a CSP that refuses the usage log."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import stat
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from toolkit.common.errors import UsageError
from toolkit.runfiles.folder import LABELS_FILE, Run
from toolkit.runtimes.web import npm
from toolkit.runtimes.web.libraries import LIBRARIES
from toolkit.ship import webapp
from toolkit.ship.measurements import Measurements
from toolkit.ship.picks import Pick
from toolkit.ship.shipment import Shipment

PICK = Pick("web", "tflite-int8", "model_int8.tflite", "mediapipe", 0.3, 0.6, 0.61, 0.96, 9)
LITERT_PICK = Pick(
    "web", "tflite-int8", "model_int8.tflite", "web-litert", 0.3, 0.6, 0.61, 0.96, 9,
    library="web-litert", threads=2, measured_top1=0.6,
)  # fmt: skip
JS = resources.files("toolkit.runtimes.web") / "js"
NAMES = [f"shape{i}" for i in range(10)]


def _cached_package(cache: Path, name: str = "web-mediapipe", version: str | None = None) -> Path:
    """A stand-in of the library's installed package in `cache`: package.json and a file for
    each pattern of the registry (a wildcard matched by one file); its node_modules folder."""
    library = LIBRARIES[name]
    package = library.package
    top = cache / package.spec.replace("/", "+") / "node_modules"
    folder = top.joinpath(*package.name.split("/"))
    for pattern in library.files:
        path = top / pattern.replace("*", "stand-in.wasm")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"stand-in {pattern}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"version": version or package.version}))
    return top


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "export").mkdir(parents=True)
    (run / "export" / PICK.file).write_bytes(b"TFL3 stand-in")
    manifest = {"class_names": NAMES, "artifacts": {PICK.format: {"file": PICK.file}}}
    (run / "export" / "model.json").write_text(json.dumps(manifest))
    options = {"model": "shiftvit", "preset": "tiny", "data": "shapes:300", "seed": 0}
    config = {"options": options, "preset": {"arch": {"image_size": 32}}}
    config["dataset"] = {"image_shape": [32, 32, 3], "num_classes": 10}
    (run / "config.json").write_text(json.dumps(config))
    return run


def _shipment(run: Path, pick: Pick = PICK) -> Shipment:
    """The web pick of the run at `run` as ship hands it to the writers."""
    config = json.loads((run / "config.json").read_text())
    return Shipment(Run(run, config), Measurements.from_json({}, {}, {}), {"web": pick}, 1.0)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "npm-cache"
    monkeypatch.setenv(npm.CACHE_ENV, str(folder))
    return folder


def test_cached_package_is_used_without_npm(cache, monkeypatch):
    found = _cached_package(cache) / "@mediapipe" / "tasks-vision"
    monkeypatch.setattr(npm.shutil, "which", lambda name: None)  # npm would be an error
    assert npm.package_dir() == found


def test_missing_npm_is_one_line_naming_the_way_out(cache, monkeypatch):
    _cached_package(cache, version="0.10.0")  # another version: not the pinned one
    monkeypatch.setattr(npm.shutil, "which", lambda name: None)
    with pytest.raises(UsageError) as error:
        npm.package_dir()
    message = str(error.value)
    assert "\n" not in message and message.startswith("npm not found")
    assert npm.CACHE_ENV in message and "npm install --prefix" in message
    assert "@mediapipe/tasks-vision@1.1.0" in message


def test_failing_npm_is_one_line_and_leaves_no_temp_folder(cache, tmp_path, monkeypatch):
    fake = tmp_path / "npm"
    fake.write_text("#!/bin/sh\necho 'npm error 404 Not Found - GET @mediapipe/tasks-vision' >&2\n"
                    "exit 1\n")  # fmt: skip
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(npm.shutil, "which", lambda name: str(fake))
    with pytest.raises(UsageError) as error:
        npm.package_dir()
    message = str(error.value)
    assert "\n" not in message and "npm error 404 Not Found" in message
    assert list(cache.iterdir()) == []  # the temp prefix is gone


def _page_csp(page: str) -> str:
    return html.unescape(
        re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)[1]
    )


def test_web_folder_holds_the_page_the_library_and_the_model(cache, tmp_path):
    """A pick ranked before the browser ranked (no library named) runs in MediaPipe Tasks:
    its npm files, its module, the model; the names come from the file, so no labels.txt."""
    top = _cached_package(cache)
    run, bundle = _run(tmp_path), tmp_path / "bundle"
    bundle.mkdir()
    web = webapp.write_web_app(bundle, _shipment(run))
    assert web == bundle / webapp.WEB_DIR
    assert (web / PICK.file).read_bytes() == b"TFL3 stand-in"
    shipped = {p.relative_to(web / webapp.LIB_DIR).as_posix() for p in (web / "lib").rglob("*")}
    expected = {p.relative_to(top).as_posix() for p in top.rglob("*")}
    assert expected <= shipped  # every file the registry names, and package.json
    assert (web / "mediapipe.js").read_text() == (JS / "mediapipe.js").read_text()
    assert not (web / LABELS_FILE).exists()
    page = (web / "index.html").read_text()
    assert f'data-model="{PICK.file}"' in page and "$" not in page
    assert 'data-module="mediapipe.js"' in page and 'data-labels=""' in page
    assert 'data-base="lib/@mediapipe/tasks-vision/"' in page
    assert "connect-src 'self'" in _page_csp(page) and "odml" not in page  # the log is refused
    assert "shiftvit (tiny)" in page and "60.0%" in page
    assert (web / "app.js").read_text().startswith("// Classifies")
    assert [p.name for p in bundle.iterdir()] == [webapp.WEB_DIR]  # no temp folder left
    assert webapp.USAGE_LOG_URL in webapp.WEB_NOTES and "connect-src 'self'" in webapp.WEB_NOTES
    assert all(f"`{h}`" in webapp.WEB_NOTES for h in webapp.ISOLATION)  # what threads need


def test_a_litert_pick_gets_litert_js_its_files_its_import_map_and_labels(cache, tmp_path):
    """The web pick made in LiteRT.js: web/ holds @litertjs/core's files and its dependency's,
    litert.js, the run's class names in labels.txt, and the import map the package needs,
    allowed by its hash in a CSP that stays strict."""
    top = _cached_package(cache, "web-litert")
    run, bundle = _run(tmp_path), tmp_path / "bundle"
    bundle.mkdir()
    web = webapp.write_web_app(bundle, _shipment(run, LITERT_PICK))
    for pattern in LIBRARIES["web-litert"].files:
        name = pattern.replace("*", "stand-in.wasm")
        assert (web / webapp.LIB_DIR / name).read_bytes() == (top / name).read_bytes()
    assert not (web / webapp.LIB_DIR / "@mediapipe").exists()
    assert (web / "litert.js").read_text() == (JS / "litert.js").read_text()
    assert (web / LABELS_FILE).read_text().splitlines() == NAMES
    page = (web / "index.html").read_text()
    assert 'data-module="litert.js"' in page and 'data-labels="labels.txt"' in page
    assert 'data-scores="probabilities"' in page and 'data-library="web-litert"' in page
    imports = re.search(r'<script type="importmap">(.*?)</script>', page)[1]
    assert json.loads(imports)["imports"] == {
        "@litertjs/wasm-utils": "./lib/@litertjs/wasm-utils/dist/index.js"
    }
    digest = base64.b64encode(hashlib.sha256(imports.encode()).digest()).decode()
    csp = _page_csp(page)
    assert f"script-src 'self' 'wasm-unsafe-eval' 'sha256-{digest}';" in csp
    assert "unsafe-inline" not in csp and "default-src 'none'" in csp


def test_web_pick_must_be_a_file_its_library_loads(cache, tmp_path):
    _cached_package(cache, "web-litert")
    run, bundle = _run(tmp_path), tmp_path / "bundle"
    bundle.mkdir()
    onnx = replace(LITERT_PICK, format="onnx", file="model.onnx")
    with pytest.raises(UsageError, match="runs .tflite files in web-litert, not model.onnx"):
        webapp.write_web_app(bundle, _shipment(run, onnx))
    assert list(bundle.iterdir()) == []


def test_incomplete_package_is_one_line(cache, tmp_path):
    top = _cached_package(cache)
    (top / "@mediapipe/tasks-vision/wasm/stand-in.wasm").unlink()
    run, bundle = _run(tmp_path), tmp_path / "bundle"
    bundle.mkdir()
    with pytest.raises(UsageError, match="lacks @mediapipe/tasks-vision/wasm/\\*: remove"):
        webapp.write_web_app(bundle, _shipment(run))
    assert list(bundle.iterdir()) == []
