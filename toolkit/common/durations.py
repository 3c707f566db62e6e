"""Wall-clock lengths as a person types and reads them (`90s`, `15m`, `1h30m`), and how long
this process has run: what `toolkit train --time` parses, prints and counts from."""

from __future__ import annotations

import os
import re
import time

_IMPORTED = time.monotonic()  # where /proc cannot tell the process's age
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")
_UNITS = (3600.0, 60.0, 1.0)


def parse_duration(text: str) -> float:
    """Seconds of `90s`, `15m`, `1h`, `1h30m`, `2.5m`; ValueError naming the form for anything
    else, a bare number (hours or minutes would be a guess) and zero included."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or match is None:
        unit = ": add its unit (s, m or h)" if _is_number(text) else ""
        raise ValueError(f"must be a duration such as 90s, 15m, 1h or 1h30m, got {text!r}{unit}")
    given = zip(match.groups(), _UNITS, strict=True)
    seconds = sum(float(value) * unit for value, unit in given if value is not None)
    if not seconds > 0:
        raise ValueError(f"must be above 0, got {text!r}: 15m, say")
    return seconds


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def format_seconds(seconds: float) -> str:
    """`1h02m`, `1h`, `14m05s`, `15m`, `42.3s`: a duration as a person reads it."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"


def process_age() -> float:
    """Seconds since this process started, Python's start-up and imports included (Linux reads
    /proc; elsewhere, seconds since this module was imported)."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            up = float(uptime.read().split()[0])
        return max(up - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED
