"""`--data` specs: KIND or KIND:ARG, with KIND looked up in the DATA_KINDS registry."""

from __future__ import annotations

from collections.abc import Callable

from toolkit.common.errors import UsageError
from toolkit.data.cifar import load_cifar10, load_cifar100
from toolkit.data.dataset import Dataset
from toolkit.data.folder import load_folder
from toolkit.data.npz import load_npz
from toolkit.data.shapes import load_shapes

# A loader takes the text after "KIND:" (None without a colon), the split seed and the share of
# the non-test images held out for validation (None: the data's own split).
Loader = Callable[[str | None, int, float | None], Dataset]

DATA_KINDS: dict[str, Loader] = {
    "cifar10": load_cifar10,
    "cifar100": load_cifar100,
    "npz": load_npz,
    "folder": load_folder,
    "shapes": load_shapes,
}

USAGE = "cifar10, cifar100, npz:PATH, folder:PATH[@SIZE][,MODE], shapes[:N]"


def load_data(spec: str, seed: int = 0, val_fraction: float | None = None) -> Dataset:
    """Parse `spec` and run the registered loader of its kind; `val_fraction` (a preset's):
    the share of the non-test images held out for validation, None for the data's own split."""
    kind, sep, arg = spec.strip().partition(":")
    loader = DATA_KINDS.get(kind.strip().lower())
    if loader is None:
        raise UsageError(f"unknown data kind '{kind}' in --data {spec}: use one of {USAGE}")
    return loader(arg.strip() if sep else None, seed, val_fraction)
