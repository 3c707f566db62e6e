"""Run Python with TensorFlow made unimportable, as on a machine where it is not installed.

    python tests/without_tensorflow.py -c CODE
    python tests/without_tensorflow.py -m MODULE [ARGS...]

A sys.meta_path finder raises ModuleNotFoundError for tensorflow and tf2onnx (and their
submodules), so `import tensorflow` fails and `importlib.util.find_spec` reports it missing.
"""

from __future__ import annotations

import importlib.abc
import runpy
import sys

BLOCKED = ("tensorflow", "tf2onnx", "tf_keras")


class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None


def main() -> None:
    sys.meta_path.insert(0, _Blocker())
    mode, target, *rest = sys.argv[1:]
    if mode == "-c":
        sys.argv = ["-c", *rest]
        exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
    elif mode == "-m":
        sys.argv = [target, *rest]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        raise SystemExit("usage: without_tensorflow.py -c CODE | -m MODULE [ARGS...]")


if __name__ == "__main__":
    main()
