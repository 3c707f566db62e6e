"""argparse pieces shared by the command lines (`toolkit`, the studies): the one-line parser,
number types, and the one comma-list parser."""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Iterable
from pathlib import Path

from toolkit.common.durations import parse_duration
from toolkit.common.errors import UsageError

ALL = "all"  # in a comma list of names: every known one


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad arguments as one line and exit code 2 (a UsageError), and
    keeps the long options it was given (`long_options`) for "did you mean" hints."""

    def __init__(self, *args, **kwargs) -> None:
        self.long_options: list[str] = []  # before argparse's own add_argument("--help")
        self.flags: dict[str, str] = {}  # an option's dest -> its first spelling
        super().__init__(*args, **kwargs)

    def add_argument(self, *names: str, **kwargs) -> argparse.Action:
        """argparse's add_argument, recording the `--long` spellings."""
        self.long_options += [n for n in names if n.startswith("--")]
        action = super().add_argument(*names, **kwargs)
        if action.option_strings:
            self.flags.setdefault(action.dest, action.option_strings[0])
        return action

    def check_no_empty(self, args: argparse.Namespace) -> None:
        """The one rule for an empty value, whatever the option (`--runtime ''`, `--data=`):
        refused in one line, never taken as the default. Leaving the option out gives that."""
        for dest, flag in self.flags.items():
            value = getattr(args, dest, None)
            if isinstance(value, str) and not value.strip():
                raise UsageError(
                    f"{flag} is empty: leave {flag} out for its default, or give it a value "
                    f"(see `{self.prog} --help`)"
                )

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


def finite_number(text: str) -> float:
    """`text` as a finite float; ValueError for anything else, nan and inf included: each would
    pass a later range check (nan compares false both ways) and never end a budget."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


def finite_float(text: str) -> float:
    """argparse type of every float option: a finite number (`finite_number`)."""
    try:
        return finite_number(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}") from None


def positive_ints(spec: str, option: str, example: str) -> list[int]:
    """`1,32` -> [1, 32] in the given order; anything but positive integers is a UsageError
    naming `option` and an `example`."""
    try:
        values = [int(s) for s in comma_items(spec, option)]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UsageError(
            f"{option} {spec!r} is not a comma list of positive integers, e.g. {example}"
        )
    return values


def comma_items(spec: str | Iterable[str], option: str = "the comma list") -> list[str]:
    """`a, b,c` (or a list) -> ['a', 'b', 'c']: the one way a comma list is split. An empty
    item (`a,,b`, `a,`, `,`) is a UsageError naming `option`: a typo, not a shorter list."""
    items = spec.split(",") if isinstance(spec, str) else [str(i) for i in spec]
    items = [i.strip() for i in items]
    if isinstance(spec, str) and spec.strip() and "" in items:
        raise UsageError(
            f"{option} {spec!r} has an empty item: separate the items by single commas, "
            "with none at either end"
        )
    return [i for i in items if i]


def choose_names(
    spec: str | Iterable[str], known: Iterable[str], option: str, keep_order: bool = False
) -> list[str]:
    """Names from `known` picked by a comma list (`all` for every one): in `known`'s order, or
    as given with `keep_order`. An unknown name, a name typed twice (`web,web`: a typo, not a
    request) or an empty list is a UsageError naming `option`, with a did-you-mean and the
    choices; `all` beside names is every name."""
    known = list(known)
    choices = f"choose from {', '.join(known)}, or {ALL}"
    picked: list[str] = []
    given: list[str] = []
    for item in comma_items(spec, option):
        name = item if item in known else item.lower()  # `TFLite`, `ALL` read as written
        if name in given and isinstance(spec, str):  # a list from the code may repeat one
            raise UsageError(f"{option} {spec!r} names {name} twice: name each once")
        given.append(name)
        if name != ALL and name not in known:
            close = difflib.get_close_matches(name, [*known, ALL], n=2, cutoff=0.5)
            hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
            raise UsageError(f"unknown {option} '{item}': {hint}{choices}")
        picked += [n for n in (known if name == ALL else [name]) if n not in picked]
    if not picked:
        raise UsageError(f"{option} is empty: {choices}")
    return picked if keep_order else [n for n in known if n in picked]


def duration(text: str) -> float:
    """argparse type of a wall-clock length: `90s`, `15m`, `1h`, `1h30m` (seconds, above 0)."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def path_arg(text: str) -> Path:
    """argparse type of every path option: an empty one is refused, not taken as the current
    folder (`--out ""` would write a run or its files where the command runs)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a path, got an empty one: pass a folder or file")
    return Path(text)
