"""A Chromium that fails to launch is the web runtime's `unavailable`, never a corrupt model.

Its own module: Playwright's sync API allows one instance per thread, and
tests/test_web_runtimes.py holds one (its module-scoped browser) while its tests run."""

from __future__ import annotations

import json
import shutil

import pytest

from toolkit.runtimes import RuntimeUnavailable, open_artifact

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tiny_runs):
    return tiny_runs.exported("shiftvit")


def test_a_browser_that_fails_to_start_is_unavailable_not_a_corrupt_model(
    run, tmp_path, monkeypatch, capsys
):
    """CHROMIUM set to a program that exits 1: the runtime is `unavailable` with the
    browser's own reason (predict: one line, exit 2; bench: rows unavailable; verify: nothing
    checked, so not passed, and model.json untouched), never "corrupt; export it again"."""
    from toolkit.cli.main import main

    fake = tmp_path / "chromium"
    fake.write_text('#!/bin/sh\necho "cannot open display :0" >&2\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("CHROMIUM", str(fake))
    tflite = run / "export" / "model_fp32.tflite"
    with pytest.raises(RuntimeUnavailable) as caught:
        open_artifact(tflite, "web-litert")
    reason = caught.value.reason
    assert reason.startswith(f"Chromium at {fake} did not start (exit code 1; cannot open ")
    assert "\n" not in reason and "corrupt" not in reason
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    manifest = (copy / "export" / "model.json").read_bytes()
    argv = ["verify", str(copy), "--runtime", "web-litert", "--models-only", "--samples", "4"]
    assert main(argv) == 1
    printed = capsys.readouterr()
    assert "nothing was checked" in printed.out + printed.err
    assert (copy / "export" / "model.json").read_bytes() == manifest
    argv = ["bench", str(copy), "--runtime", "web-litert", "--format", "tflite"]
    assert main([*argv, "--seconds", "0.2", "--warmup", "1", "--batch", "1"]) == 0
    rows = json.loads((copy / "bench.json").read_text())["rows"]
    timed = [r for r in rows if r.get("backend") != "webgpu"]
    assert timed and {(r["status"], r["reason"]) for r in timed} == {("unavailable", reason)}
