"""npm packages the web runtimes serve and the bundle copies files from, pinned here, installed
once with npm into a cache folder (TOOLKIT_NPM_CACHE, default ~/.cache/toolkit/npm) and reused
from there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from toolkit.common.errors import UsageError, first_line

CACHE_ENV = "TOOLKIT_NPM_CACHE"
INSTALL_TIMEOUT_S = 600


@dataclass(frozen=True)
class NpmPackage:
    """An npm package at one version."""

    name: str
    version: str

    @property
    def spec(self) -> str:
        """`name@version`, as `npm install` takes it."""
        return f"{self.name}@{self.version}"


# the web app's client: ImageClassifier and its WebAssembly, the same on every browser
TASKS_VISION = NpmPackage("@mediapipe/tasks-vision", "1.1.0")
LITERT_JS = NpmPackage("@litertjs/core", "2.5.3")  # LiteRT.js: .tflite in WebAssembly
ORT_WEB = NpmPackage("onnxruntime-web", "1.30.0")  # .onnx and .ort in WebAssembly
PINNED = (TASKS_VISION, LITERT_JS, ORT_WEB)  # what `make browser` installs into the cache


def npm_cache() -> Path:
    """The folder packages are installed into: $TOOLKIT_NPM_CACHE, else the user's cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "toolkit" / "npm"


def _prefix(package: NpmPackage, cache: Path) -> Path:
    return cache / package.spec.replace("/", "+")  # one folder per name and version


def _installed(package: NpmPackage, prefix: Path) -> Path | None:
    """The package's folder under `prefix` when it holds that version, else None."""
    folder = prefix.joinpath("node_modules", *package.name.split("/"))
    try:
        found = json.loads((folder / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None
    return folder if found == package.version else None


def installed(package: NpmPackage) -> Path | None:
    """The package's folder in the cache when that version is installed there, else None."""
    return _installed(package, _prefix(package, npm_cache()))


def package_dir(package: NpmPackage = TASKS_VISION) -> Path:
    """The installed package's folder, installing it with npm on first use (into a temp
    folder renamed into place); a UsageError naming the way out when npm is missing or fails."""
    cache = npm_cache()
    prefix = _prefix(package, cache)
    if (found := _installed(package, prefix)) is not None:
        return found
    how = f"or install it yourself: npm install --prefix {prefix} {package.spec}"
    npm = shutil.which("npm")
    if npm is None:
        raise UsageError(
            f"npm not found: the web runtimes and app use {package.spec} from npm; install Node.js "
            f"(with npm), set {CACHE_ENV} to a folder holding it, {how}"
        )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=f".{prefix.name}.", dir=cache))
    except OSError as exc:
        raise UsageError(
            f"cannot write the npm cache {cache} ({first_line(exc)}): set {CACHE_ENV} to a "
            "writable folder"
        ) from exc
    try:
        proc = subprocess.run(
            [npm, "install", "--prefix", str(temp), "--no-audit", "--no-fund", package.spec],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        if proc.returncode != 0 or _installed(package, temp) is None:
            lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
            why = lines[0] if lines else f"exit code {proc.returncode}"
            raise UsageError(f"npm could not install {package.spec} ({why}): {how}")
        try:
            temp.rename(prefix)
        except OSError:  # another process installed it meanwhile: use theirs
            if _installed(package, prefix) is None:
                raise
    except subprocess.TimeoutExpired as exc:
        raise UsageError(
            f"npm did not install {package.spec} within {INSTALL_TIMEOUT_S} s (no registry "
            f"reachable?): {how}"
        ) from exc
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return prefix.joinpath("node_modules", *package.name.split("/"))
