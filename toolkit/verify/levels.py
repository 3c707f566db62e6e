"""Which runtimes each level of `toolkit verify` checks (`Runtime.levels`: the browser runtimes
the model level alone), and the user's `--runtime` list split by level."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolkit.common.argtypes import ALL, choose_names
from toolkit.common.errors import UsageError
from toolkit.runtimes import VERIFIED_RUNTIMES, Runtime

LEVEL_NAMES = {"ops": "op", "models": "model", "layers": "layer"}  # for messages
LEVEL_FLAGS = {"ops": "--ops-only", "models": "--models-only", "layers": "--layers"}


def runtimes_at(level: str) -> dict[str, Runtime]:
    """The runtimes `level` (ops, models, layers) checks files in, in registry order."""
    return {name: r for name, r in VERIFIED_RUNTIMES.items() if level in r.levels}


def choose_at(level: str, runtimes: str | Iterable[str] = ALL) -> list[str]:
    """`runtimes` (a comma list, names, or all) that `level` checks; a verified runtime the
    level does not check is a UsageError naming the levels that do."""
    chosen = choose_names(runtimes, VERIFIED_RUNTIMES, "runtime")
    if runtimes == ALL:
        return [r for r in chosen if level in VERIFIED_RUNTIMES[r].levels]
    for name in chosen:
        if level not in VERIFIED_RUNTIMES[name].levels:
            raise UsageError(not_checked(name, level))
    return chosen


def not_checked(runtime: str, level: str) -> str:
    """Why `level` does not take `runtime`, and the way out (one line)."""
    levels = VERIFIED_RUNTIMES[runtime].levels
    at = " and ".join(LEVEL_NAMES[x] for x in levels)
    flags = " or ".join(LEVEL_FLAGS[x] for x in levels)
    return (
        f"runtime {runtime} is verified at the {at} level only, not the {LEVEL_NAMES[level]} "
        f"level (checked in {', '.join(runtimes_at(level))}): use {flags}, or choose those"
    )


def split_levels(levels: Sequence[str], runtimes: str | Iterable[str] = ALL) -> dict:
    """The chosen runtimes each of `levels` checks, a level none of them is checked at left
    out; a UsageError when that leaves no level (nothing to verify)."""
    chosen = choose_names(runtimes, VERIFIED_RUNTIMES, "runtime")
    split = {level: [r for r in chosen if level in VERIFIED_RUNTIMES[r].levels] for level in levels}
    split = {level: names for level, names in split.items() if names}
    if not split:
        raise UsageError(not_checked(chosen[0], levels[0]))
    return split
