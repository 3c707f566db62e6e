"""The web app's folder without a browser (tests/test_ship_browser.py runs it in Chromium): the
npm package found in its cache or installed with npm, one-line errors when npm is missing or
fails, and web/ written whole with the pick's file and a CSP that refuses the usage log."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from toolkit.common.errors import UsageError
from toolkit.runfiles.folder import Run
from toolkit.runtimes.web import npm
from toolkit.ship import webapp
from toolkit.ship.measurements import Measurements
from toolkit.ship.picks import Pick
from toolkit.ship.shipment import Shipment

PICK = Pick("web", "tflite-int8", "model_int8.tflite", "mediapipe", 0.3, 0.6, 0.61, 0.96, 9)


def _cached_package(cache: Path, version: str = npm.TASKS_VISION.version) -> Path:
    """A stand-in of the installed package in `cache`: package.json and the files copied."""
    folder = cache / "@mediapipe+tasks-vision@1.1.0" / "node_modules" / "@mediapipe"
    folder = folder / "tasks-vision"
    for name in webapp.LIBRARY_FILES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"stand-in {name}")
    (folder / "package.json").write_text(json.dumps({"version": version}))
    return folder


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "export").mkdir(parents=True)
    (run / "export" / PICK.file).write_bytes(b"TFL3 stand-in")
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
    found = _cached_package(cache)
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


def test_web_folder_holds_the_page_the_library_and_the_model(cache, tmp_path):
    _cached_package(cache)
    run, bundle = _run(tmp_path), tmp_path / "bundle"
    bundle.mkdir()
    web = webapp.write_web_app(bundle, _shipment(run))
    assert web == bundle / webapp.WEB_DIR
    assert (web / PICK.file).read_bytes() == b"TFL3 stand-in"
    for name in webapp.LIBRARY_FILES:
        assert (web / webapp.LIBRARY_DIR / name).is_file(), name
    page = (web / "index.html").read_text()
    assert f'data-model="{PICK.file}"' in page and "$" not in page
    assert "connect-src &#x27;self&#x27;" in page and "odml" not in page  # the log is refused
    assert "shiftvit (tiny)" in page and "60.0%" in page
    assert (web / "app.js").read_text().startswith("// Classifies")
    assert [p.name for p in bundle.iterdir()] == [webapp.WEB_DIR]  # no temp folder left
    assert webapp.USAGE_LOG_URL in webapp.WEB_NOTES and "connect-src 'self'" in webapp.WEB_NOTES


def test_web_pick_must_be_a_tflite_file(cache, tmp_path):
    _cached_package(cache)
    run, bundle = _run(tmp_path), tmp_path / "bundle"
    bundle.mkdir()
    onnx = Pick("web", "onnx", "model.onnx", "ort-cpu", 0.1, 0.6, 0.6, 1.0, 9)
    with pytest.raises(UsageError, match="runs .tflite files"):
        webapp.write_web_app(bundle, _shipment(run, onnx))
    assert list(bundle.iterdir()) == []


def test_incomplete_package_is_one_line(cache, tmp_path):
    folder = _cached_package(cache)
    (folder / "wasm" / "vision_wasm_internal.wasm").unlink()
    run, bundle = _run(tmp_path), tmp_path / "bundle"
    bundle.mkdir()
    with pytest.raises(UsageError, match="lacks wasm/vision_wasm_internal.wasm: remove"):
        webapp.write_web_app(bundle, _shipment(run))
    assert list(bundle.iterdir()) == []
