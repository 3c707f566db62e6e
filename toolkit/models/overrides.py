"""`toolkit train --arch KEY=VALUE,...` and `--recipe KEY=VALUE,...`: the text parsed as values
of the architecture's or the recipe's fields, each converted by its field's type."""

from __future__ import annotations

import typing
from dataclasses import MISSING, Field, fields

from toolkit.common.argtypes import comma_items, finite_number
from toolkit.common.errors import UsageError
from toolkit.data.augment import Augmentation
from toolkit.models.architectures import ARCH_CLASSES, MODEL_FIELDS
from toolkit.models.recipes import OWN_FLAGS, TrainRecipe, recipe_keys

# a numeric or boolean field's value that switches it off, by type: `none` or `off` give it
# (X | None fields: None, which `0` gives too); the type's word and example for messages
OFF_WORDS = ("none", "off")
OFF_VALUES: dict[type, object] = {bool: False, int: 0, float: 0.0}
TYPE_WORDS: dict[type, tuple[str, str]] = {
    int: ("a whole number", "2"),
    float: ("a finite number", "0.1"),
    bool: ("true or false", "true"),
}


def _boolean(text: str) -> bool:
    """`true`/`on`/`1` or `false`/`off`/`0`; ValueError otherwise."""
    if text.lower() not in ("true", "false", "1", "0", "on", "off"):
        raise ValueError(text)
    return text.lower() in ("true", "1", "on")


# field type -> its converter from text (ValueError when the text is not one)
SCALARS: dict[type, typing.Callable[[str], object]] = {
    int: int,
    float: finite_number,
    bool: _boolean,
}


def _convert(text: str, kind: object, choices: tuple[str, ...] | None = None) -> object:
    """`text` as a value of the field type `kind` (None, int, float, bool, str or a tuple of
    them: N:M, or N:N:... for a variable-length tuple); ValueError when it is not one."""
    args = typing.get_args(kind)
    if type(None) in args:  # X | None: "none", "off" or 0 is None (the piece off)
        if text.lower() in (*OFF_WORDS, "0", "0.0"):
            return None
        kind = next(a for a in args if a is not type(None))
    if typing.get_origin(kind) is tuple:  # N:M, or N:N:... for tuple[int, ...]
        parts, types = text.split(":"), typing.get_args(kind)
        if len(types) == 2 and types[1] is Ellipsis:
            types = (types[0],) * len(parts)
        if len(parts) != len(types):
            raise ValueError(text)
        return tuple(SCALARS[t](part) for t, part in zip(types, parts, strict=True))
    if kind in OFF_VALUES and text.lower() in OFF_WORDS:
        return OFF_VALUES[kind]
    if kind is str and choices and text in choices:
        return text
    if kind in SCALARS:
        return SCALARS[kind](text)
    raise ValueError(text)


def _takes(key: str, kind: object, spec: Field) -> str:
    """What field `key` of type `kind` takes, with an example (its default where that is on):
    'mixup takes a finite number, e.g. mixup=0.1, or none (off)'."""
    args = typing.get_args(kind)
    optional = type(None) in args
    base = next(a for a in args if a is not type(None)) if optional else kind
    choices = spec.metadata.get("choices")
    if choices:
        what, example = " or ".join(choices), choices[0]
    elif typing.get_origin(base) is tuple:  # tuple[int, int], tuple[int, float], tuple[int, ...]
        types = typing.get_args(base)
        types = (types[0],) * 3 if types[-1] is Ellipsis else types
        what = "numbers joined by colons"
        example = ":".join(TYPE_WORDS.get(t, ("", "2"))[1] for t in types)
    else:
        what, example = TYPE_WORDS.get(base, (f"a {getattr(base, '__name__', base)}", "..."))
    default = None if spec.default is MISSING else spec.default
    if isinstance(default, tuple) and default:
        example = ":".join(map(str, default))
    elif default not in (None, (), *OFF_VALUES.values()):  # a default that is on
        example = str(default).lower() if isinstance(default, bool) else str(default)
    off = optional or (base in OFF_VALUES and default == OFF_VALUES[base])
    return f"{key} takes {what}, e.g. {key}={example}{', or none (off)' if off else ''}"


def _parse_fields(
    text: str | None, classes: tuple[type, ...], keys: list[str], flag: str
) -> dict[str, object]:
    """`KEY=VALUE[,KEY=VALUE...]` as values of the fields `keys` of the dataclasses `classes`:
    each key once, each value of its field's type (`_convert`). None: {} (the flag not given);
    an empty text is a UsageError."""
    if text is None:
        return {}
    if not text.strip():
        raise UsageError(
            f"{flag} is empty: leave {flag} out to keep the preset's values, or pass "
            "KEY=VALUE[,KEY=VALUE...]"
        )
    hints = {k: v for cls in classes for k, v in typing.get_type_hints(cls).items()}
    specs = {f.name: f for cls in classes for f in fields(cls)}
    values: dict[str, object] = {}
    for item in comma_items(text, flag):
        key, sep, value = (part.strip() for part in item.partition("="))
        if key in OWN_FLAGS:
            raise UsageError(f"{flag} {key}: pass {OWN_FLAGS[key]} instead")
        if not sep or key not in keys:
            raise UsageError(f"{flag} takes KEY=VALUE[,KEY=VALUE...], KEY one of {', '.join(keys)}")
        if key in values:
            raise UsageError(f"{flag} sets {key} twice ({text}): give each key once")
        try:
            values[key] = _convert(value, hints[key], specs[key].metadata.get("choices"))
        except ValueError:
            raise UsageError(
                f"{flag} {key}={value}: {_takes(key, hints[key], specs[key])}"
            ) from None
    return values


def parse_recipe(text: str | None) -> dict[str, object]:
    """`KEY=VALUE[,KEY=VALUE...]` (`toolkit train --recipe`) as TrainRecipe and Augmentation
    field values (`with_recipe` sets them)."""
    return _parse_fields(text, (TrainRecipe, Augmentation), recipe_keys(), "--recipe")


def arch_keys(model: str) -> list[str]:
    """The architecture fields `toolkit train --model MODEL --arch KEY=VALUE` sets."""
    return [f.name for f in fields(ARCH_CLASSES[model]) if f.name not in MODEL_FIELDS]


def parse_arch(model: str, text: str | None) -> dict[str, object]:
    """`KEY=VALUE[,KEY=VALUE...]` (`toolkit train --arch`) as `model`'s architecture fields:
    stochastic depth, dropout, width, depth, ... over the preset's."""
    return _parse_fields(text, (ARCH_CLASSES[model],), arch_keys(model), "--arch")
