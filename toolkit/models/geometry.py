"""The geometry of an architecture at its image size, counted without building it (no Keras):
its feature maps or tokens, the checks that refuse one that cannot train, and a lower bound
on what one training batch holds in memory.

`check_geometry` runs when `toolkit train` builds its preset, before the run folder is made:
a patch that does not divide the image (larger ones included), ShiftViT stages that halve a
1x1 map, a shift past every edge of the first stage's maps, and an image size whose first
batch cannot fit in the machine's memory are each one line (UsageError).

The memory bound counts, per image, the values a backward pass must keep (each layer's input
to a matrix product or normalisation: no recomputation assumed, nothing else counted), at the
precision's bytes per value, times the batch, plus 16 bytes per weight (the weight, its
gradient and AdamW's two moments in float32).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

from toolkit.common.errors import UsageError
from toolkit.models.architectures import ShiftViTArch, ViTArch

# bytes per activation value under each `--precision` (toolkit.training.strategies.PRECISIONS)
VALUE_BYTES = {"float32": 4, "mixed_float16": 2, "mixed_bfloat16": 2}
WEIGHT_BYTES = 16  # float32 weight + gradient + AdamW's two moments
CHANNELS = 3  # RGB: the models' input


@dataclass(frozen=True)
class Footprint:
    """One image through an architecture in training: the values its backward pass keeps
    (`activations`) and its weights without the classifier (`parameters`)."""

    activations: int
    parameters: int


def patch_grid(arch: ShiftViTArch | ViTArch) -> int:
    """Patches per side of the model's image (image_size / patch_size); UsageError when the
    patch does not divide the image (a patch larger than the image included)."""
    size, patch = arch.image_size, arch.patch_size
    if size % patch == 0:
        return size // patch
    fits = max(d for d in range(1, min(patch, size // 2) + 1) if size % d == 0)
    raise UsageError(
        f"patch_size {patch} does not divide image_size {size} (the size the model resizes "
        f"its input to){' and exceeds it' if patch > size else ''}: pass --arch "
        f"patch_size={fits}, say, or image_size={math.ceil(size / patch) * patch}"
    )


def shiftvit_maps(arch: ShiftViTArch) -> list[int]:
    """Each stage's map side: the patch grid, halved (rounded up) by each patch merging;
    UsageError when a stage's map is 1x1 before a merge or the shift passes every edge."""
    maps = [patch_grid(arch)]
    for _ in arch.depths[1:]:
        if maps[-1] < 2:
            raise UsageError(
                f"depths {':'.join(map(str, arch.depths))}: stage {len(maps)}'s map is already "
                f"1x1 (image_size {arch.image_size} / patch_size {arch.patch_size}, halved "
                f"{len(maps) - 1} times), so no merge can halve it: pass fewer stages, a smaller "
                "--arch patch_size or a larger image_size"
            )
        maps.append(math.ceil(maps[-1] / 2))
    if arch.shift_pixel >= maps[0]:
        raise UsageError(
            f"shift_pixel {arch.shift_pixel} moves the shifted channels past every edge of the "
            f"first stage's {maps[0]}x{maps[0]} maps (image_size {arch.image_size} / patch_size "
            f"{arch.patch_size}), leaving zeros: pass --arch shift_pixel=1, say (below "
            f"{maps[0]})"
        )
    return maps


def shiftvit_footprint(arch: ShiftViTArch) -> Footprint:
    """ShiftViT's footprint (toolkit.models.shiftvit): patch embedding, shift blocks (norm,
    MLP), patch merging (norm, 2x2 convolution doubling the width), head norm."""
    maps = shiftvit_maps(arch)
    size, patch, width = arch.image_size, arch.patch_size, arch.dim
    activations = size * size * CHANNELS  # the patch embedding's input
    parameters = patch * patch * CHANNELS * width + width
    for stage, (side, depth) in enumerate(zip(maps, arch.depths, strict=True)):
        hidden = int(arch.mlp_ratio * width)
        # per block: the norm's input and output, the hidden Dense's output and its GELU's
        activations += depth * side * side * (2 * width + 2 * hidden)
        parameters += depth * (2 * width + width * hidden + hidden + hidden * width + width)
        if stage < len(maps) - 1:  # the merge: its norm's input and output
            activations += 2 * side * side * width
            parameters += 2 * width + 4 * width * 2 * width
            width *= 2
    activations += 2 * maps[-1] * maps[-1] * width  # the head norm's input and output
    return Footprint(activations, parameters + 2 * width)


def vit_footprint(arch: ViTArch) -> Footprint:
    """The ViT's footprint (toolkit.models.vit): tokenizer (SPT: five views, norm), class
    token, position table, transformer blocks, the flatten head's MLP or the token's norm."""
    grid, dim, inner = patch_grid(arch), arch.dim, arch.num_heads * arch.key_dim
    flat = arch.patch_size**2 * CHANNELS * (5 if arch.spt else 1)
    tokens = grid * grid + (arch.head == "class_token")
    activations = arch.image_size**2 * CHANNELS + grid * grid * flat * (2 if arch.spt else 1)
    parameters = flat * dim + dim + (2 * flat if arch.spt else 0) + tokens * dim
    parameters += dim if arch.head == "class_token" else 0
    # per block: both norms' inputs and outputs, q, k, v, the softmax, the context, the MLP
    block = 4 * tokens * dim + 4 * tokens * inner + arch.num_heads * tokens * tokens
    block_weights = 4 * dim + 3 * dim * inner + 3 * inner * arch.qkv_bias + inner * dim + dim
    block_weights += {"shared": 1, "per_head": arch.num_heads}[arch.lsa_temperature] * arch.lsa
    activations += arch.depth * (block + 2 * tokens * sum(arch.mlp_units))
    parameters += arch.depth * (block_weights + _mlp_weights(dim, arch.mlp_units))
    if arch.head == "class_token":
        return Footprint(activations + 2 * dim, parameters + 2 * dim)
    activations += 2 * tokens * dim + 2 * sum(arch.head_units)
    return Footprint(
        activations, parameters + 2 * dim + _mlp_weights(tokens * dim, arch.head_units)
    )


def _mlp_weights(width: int, units: tuple[int, ...]) -> int:
    """Weights and biases of Dense layers of `units` after an input `width` wide."""
    total = 0
    for unit in units:
        total, width = total + width * unit + unit, unit
    return total


# architecture class -> its footprint (and geometry checks)
FOOTPRINTS: dict[type, Callable[..., Footprint]] = {
    ShiftViTArch: shiftvit_footprint,
    ViTArch: vit_footprint,
}


def footprint(arch: ShiftViTArch | ViTArch) -> Footprint:
    """`arch`'s footprint per image; UsageError when its geometry cannot build a model."""
    return FOOTPRINTS[type(arch)](arch)


def machine_memory() -> int | None:
    """The machine's total physical memory in bytes; None where the OS does not say."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows) or no such name
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


def batch_bytes(arch: ShiftViTArch | ViTArch, batch: int, precision: str = "float32") -> int:
    """The lower bound (see the module doc) on the memory one training batch of `batch`
    images holds."""
    cost = footprint(arch)
    return batch * cost.activations * VALUE_BYTES[precision] + cost.parameters * WEIGHT_BYTES


def check_geometry(
    arch: ShiftViTArch | ViTArch,
    batch: int,
    precision: str = "float32",
    memory: int | None = None,
) -> None:
    """UsageError naming the way out when `arch` cannot train on batches of `batch` images:
    its geometry (`footprint`), or a first batch larger than `memory` (default: the machine's)."""
    need = batch_bytes(arch, batch, precision)
    memory = machine_memory() if memory is None else memory
    if memory is None or need <= memory:
        return
    fits = [
        b
        for b in (2**i for i in range(batch.bit_length()))
        if batch_bytes(arch, b, precision) * 2 <= memory
    ]
    way_out = f"pass --batch-size {fits[-1]}" if fits else "pass a smaller --arch image_size"
    raise UsageError(
        f"a training batch of {batch} images at image_size {arch.image_size} needs at least "
        f"{_size(need)} of memory, more than this machine's {_size(memory)}: {way_out}, say"
        f"{' or a smaller --arch image_size' if fits else ''}"
    )


def _size(count: int) -> str:
    """Bytes as a short figure: '7.7 TB', '23.4 GB'."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
