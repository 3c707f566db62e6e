"""argparse pieces shared by the command lines (`toolkit`, the bench studies)."""

from __future__ import annotations

import argparse
import math

from toolkit.errors import UsageError


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one line and exit code 2 (a UsageError), and
    keeps the long options it was given (`long_options`) for "did you mean" hints."""

    def __init__(self, *args, **kwargs) -> None:
        self.long_options: list[str] = []  # before argparse's own add_argument("--help")
        super().__init__(*args, **kwargs)

    def add_argument(self, *names: str, **kwargs) -> argparse.Action:
        """argparse's add_argument, recording the `--long` spellings."""
        self.long_options += [n for n in names if n.startswith("--")]
        return super().add_argument(*names, **kwargs)

    def error(self, message: str):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """argparse type of every float option: a finite number; nan and inf are refused here, as
    each would pass a later range check (nan compares false both ways) and never end a budget."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def positive_ints(spec: str, option: str, example: str) -> list[int]:
    """`1,32` -> [1, 32] in the given order; anything but positive integers is a UsageError
    naming `option` and an `example`."""
    try:
        values = [int(s) for s in spec.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UsageError(
            f"{option} {spec!r} is not a comma list of positive integers, e.g. {example}"
        )
    return values
