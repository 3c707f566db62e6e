"""The GPU accelerator check of the .tflite files: LiteRT's answer, or why it was not made."""

from __future__ import annotations

import os
import sys
import types

import pytest

from toolkit.export.command import gpu_notes
from toolkit.runfiles import Manifest
from toolkit.runtimes import gpu_check


def _fake_litert(monkeypatch, from_file) -> None:
    """ai_edge_litert.compiled_model replaced by one whose CompiledModel.from_file is given."""
    module = types.ModuleType("ai_edge_litert.compiled_model")
    module.HardwareAccelerator = types.SimpleNamespace(GPU="gpu")
    module.CompiledModel = types.SimpleNamespace(from_file=from_file)
    monkeypatch.setitem(sys.modules, "ai_edge_litert.compiled_model", module)


@pytest.mark.parametrize("fully", [True, False])
def test_a_started_accelerator_says_whether_it_took_every_op(monkeypatch, tmp_path, fully):
    calls = []

    def from_file(path, hardware_accel):
        calls.append((path, hardware_accel))
        return types.SimpleNamespace(is_fully_accelerated=lambda: fully)

    _fake_litert(monkeypatch, from_file)
    path = tmp_path / "model.tflite"
    assert gpu_check.check_file(path) == {"checked": True, "fully_accelerated": fully}
    assert calls == [(str(path), "gpu")]


def test_an_accelerator_that_cannot_start_gives_litert_s_reason(monkeypatch, tmp_path):
    """The reason is LiteRT's own log line (written to fd 2, as its C++ does), not the bare
    exception; plugin lines are not the reason."""

    def from_file(path, hardware_accel):
        os.write(2, b"WARNING: [compiler_plugin.cc:312] Failed to load plugin at: x.so\n")
        os.write(2, b"ERROR: [delegate_webgpu.cc:359] Failed to initialize WebGPU: No adapters\n")
        raise RuntimeError("ERROR: [./litert/cc/litert_compiled_model.h:1961]")

    _fake_litert(monkeypatch, from_file)
    result = gpu_check.check_file(tmp_path / "model.tflite")
    why = "Failed to initialize WebGPU: No adapters"
    assert result == {"checked": False, "reason": f"LiteRT's GPU accelerator did not start: {why}"}


def test_the_child_process_answers_for_every_file(tmp_path):
    """A real check in the child process: a file that is no model is not checked, with a
    reason, whatever GPU this machine has; the answer is keyed by each path."""
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model")
    found = gpu_check.gpu_acceleration([bad])
    assert list(found) == [str(bad)]
    assert found[str(bad)]["checked"] is False and found[str(bad)]["reason"]


def test_export_notes_name_partial_files_and_why_nothing_was_checked():
    manifest = Manifest.from_json(
        {
            "artifacts": {
                "tflite": {"gpu_accelerator": {"checked": True, "fully_accelerated": True}},
                "tflite-int8": {"gpu_accelerator": {"checked": True, "fully_accelerated": False}},
                "tflite-fp16": {"gpu_accelerator": {"checked": False, "reason": "no GPU"}},
                "onnx": {},
            }
        }
    )
    assert gpu_notes(manifest, ["onnx", "tflite", "tflite-int8", "tflite-fp16"]) == [
        "tflite-int8: LiteRT's GPU accelerator does not take every op (the rest runs on the CPU)",
        "GPU accelerator: not checked for 1 file(s): no GPU",
    ]
    assert gpu_notes(manifest, ["onnx", "tflite"]) == []
