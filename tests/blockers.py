"""Startup code that makes packages unimportable, as on a machine where they are not installed:
`import X` raises ModuleNotFoundError and `importlib.util.find_spec("X")` reports it missing."""

from __future__ import annotations

import textwrap


def blocker_code(blocked: tuple[str, ...]) -> str:
    """Python source that blocks `blocked` (and their submodules) in the process that runs it."""
    return textwrap.dedent(
        f"""
        import sys

        BLOCKED = {blocked!r}

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        for name in BLOCKED:
            sys.modules[name] = None
        sys.meta_path.insert(0, Blocker())
        """
    )
