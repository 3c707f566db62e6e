"""Whether LiteRT's GPU accelerator takes a whole `.tflite` file, as an app's GPU path would.

LiteRT's `CompiledModel` with `HardwareAccelerator.GPU` (WebGPU: Vulkan, Metal or Direct3D)
compiles the file for the GPU and says whether every op went there (`is_fully_accelerated`).
That needs a GPU adapter; without one the check says it was not made, and why, never a guess.
TensorFlow's `Analyzer(gpu_compatibility=True)` is no substitute: since 2.19 it checks nothing
and calls every model compatible (tensorflow#77042; TOPK_V2 and CUMSUM pass in 2.21).

The check runs in a child process (`python -m toolkit.runtimes.gpu_check FILE...`, one JSON
line out): LiteRT logs when its accelerators are torn down at exit, past any capture here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from toolkit.common.errors import first_line
from toolkit.common.native_logs import captured_native_stderr

MODULE = "toolkit.runtimes.gpu_check"
TIMEOUT_S = 120
# words of LiteRT's log lines that say why the GPU accelerator did not start, most telling first
_WHY_WORDS = ("adapter", "WebGPU", "GPU", "delegate")


def check_file(path: Path) -> dict:
    """{"checked": True, "fully_accelerated": bool}, or {"checked": False, "reason": ...}."""
    try:
        from ai_edge_litert.compiled_model import CompiledModel, HardwareAccelerator
    except ImportError as exc:
        return {"checked": False, "reason": f"ai-edge-litert has no CompiledModel ({exc})"}
    lines: list[str] = []
    try:
        with captured_native_stderr() as lines:
            model = CompiledModel.from_file(str(path), hardware_accel=HardwareAccelerator.GPU)
            fully = bool(model.is_fully_accelerated())
    except Exception as exc:  # noqa: BLE001  (no adapter, no driver: the check was not made)
        said = [line for w in _WHY_WORDS for line in lines if w in line and "plugin" not in line]
        why = said[0].split("] ", 1)[-1].strip() if said else first_line(exc)
        return {"checked": False, "reason": f"LiteRT's GPU accelerator did not start: {why}"}
    return {"checked": True, "fully_accelerated": fully}


def gpu_acceleration(paths: list[Path]) -> dict[str, dict]:
    """`check_file` of each path (by its str), in one child process."""
    env = dict(os.environ)  # the child imports numpy and LiteRT only
    command = [sys.executable, "-m", MODULE, *map(str, paths)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=TIMEOUT_S, check=False
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, IndexError, json.JSONDecodeError) as exc:
        why = f"the check did not answer ({first_line(exc)})"
        return {str(p): {"checked": False, "reason": why} for p in paths}
    return {str(p): found[str(p)] for p in paths}


def main(argv: list[str] | None = None) -> int:
    paths = argv if argv is not None else sys.argv[1:]
    print(json.dumps({p: check_file(Path(p)) for p in paths}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
