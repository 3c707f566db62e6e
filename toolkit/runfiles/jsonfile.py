"""The one missing-file policy of the run folder's JSON files: `load` for a caller that needs
the file (missing or unreadable: a one-line UsageError naming the command that writes it),
`find` for one to whom absence is normal (None; unreadable is still a UsageError)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from toolkit.common import atomic
from toolkit.common.errors import UsageError, first_line


def load(path: Path, how: str, missing: str | None = None) -> dict:
    """The JSON object in `path`; missing (message `missing`, default "PATH not found") or
    unreadable, truncated or not an object is a UsageError ending in `how` (the way out)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{missing or f'{path} not found'}: {how}")
    return parse(path, how)


def find(path: Path, how: str) -> dict | None:
    """The JSON object in `path`, or None when there is no such file; an unreadable one is a
    UsageError ending in `how`."""
    path = Path(path)
    return parse(path, how) if path.is_file() else None


def parse(path: Path, how: str) -> dict:
    """The JSON object in the file `path`; anything else is a one-line UsageError."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is unreadable (not valid JSON: {exc.msg}): {how}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is unreadable ({first_line(exc)}): {how}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path} is unreadable (a {type(data).__name__}, not an object): {how}")
    return data


def section(data: Mapping, key: str) -> dict:
    """`data[key]` when it is an object, else {} (a key older versions lacked)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def number(value: object) -> float | None:
    """`value` as a float when it is a number (not a bool), else None."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def numbers(value: object) -> tuple[float, ...]:
    """`value` as floats when it is a list of numbers, else () (a key older versions lacked)."""
    if not isinstance(value, list):
        return ()
    found = [number(v) for v in value]
    return tuple(v for v in found if v is not None) if None not in found else ()


def numeric(value: object) -> int | float | None:
    """`value` as written when it is a number (not a bool), else None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def integer(value: object) -> int | None:
    """`value` when it is an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text(value: object) -> str | None:
    """`value` when it is a string, else None."""
    return value if isinstance(value, str) else None


def write(path: Path, data: dict) -> None:
    """Write `data` as JSON to `path` atomically (the format every stage has written)."""
    atomic.write_json(path, data)
