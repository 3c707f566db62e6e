"""Versions of the toolkit and the runtimes it drives, recorded beside every artifact."""

from __future__ import annotations

from importlib import metadata

_PACKAGES = {
    "toolkit": "toolkit",
    "keras": "keras",
    "tensorflow": "tensorflow",
    "numpy": "numpy",
    "onnx": "onnx",
    "tf2onnx": "tf2onnx",
    "onnxruntime": "onnxruntime-gpu",
    "litert": "ai-edge-litert",
}


def versions() -> dict[str, str]:
    """name -> installed version ("missing" when a package is not installed)."""
    found = {}
    for name, dist in _PACKAGES.items():
        try:
            found[name] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            try:
                found[name] = metadata.version(dist.removesuffix("-gpu"))
            except metadata.PackageNotFoundError:
                found[name] = "missing"
    return found
