"""argparse pieces shared by the command lines (`toolkit`, the bench studies)."""

from __future__ import annotations

import argparse

from toolkit.errors import UsageError


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one line and exit code 2 (a UsageError)."""

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
