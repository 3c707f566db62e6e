"""The models' architectures: one frozen dataclass of fields per model, each field a number
`toolkit train --arch KEY=VALUE` may set, and the rule for values that cannot build a model."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from toolkit.common.errors import UsageError

# metadata of an architecture field added after counts were first shipped: at its default the
# field is left out of the architecture's fingerprint (toolkit.models.counts), so presets that
# leave it unchanged keep theirs
ADDED_FIELD = {"fingerprint": "omit at default"}


@dataclass(frozen=True)
class ShiftViTArch:
    """ShiftViT (Wang et al. 2022): patch conv, stages of shift blocks, patch merging, head."""

    image_size: int = 48
    patch_size: int = 4
    dim: int = 96
    depths: tuple[int, ...] = (2, 4, 8, 2)
    num_div: int = 12
    shift_pixel: int = 1
    mlp_ratio: float = 2.0
    epsilon: float = 1e-5
    drop_path: float = 0.2
    dropout: float = 0.2
    # the official code's norm_layer and act_layer (microsoft/SPACH, models/shiftvit.py):
    # "layer" normalises each token over its channels (LayerNorm, the paper's), "batch" each
    # channel over the batch (BatchNorm: a scale and shift at inference); "gelu" or "relu"
    norm: str = field(default="layer", metadata={**ADDED_FIELD, "choices": ("layer", "batch")})
    activation: str = field(default="gelu", metadata={**ADDED_FIELD, "choices": ("gelu", "relu")})


@dataclass(frozen=True)
class ViTArch:
    """ViT for small datasets (Lee et al. 2021); spt/lsa off gives the vanilla ablation.

    The defaults are the keras.io example's; the fields after `lsa` are where the paper's own
    code (aanna0701/SPT_LSA_ViT, models/vit.py) builds otherwise: `head="class_token"` prepends
    a learned class token (before the position embedding) and classifies it with LayerNorm +
    Dense, where the keras.io head flattens every token into an MLP (`head_units`,
    `head_dropout`: the flatten head's only); `drop_path` is stochastic depth on both residual
    branches of every block, the same rate in each (the paper's code; ShiftViT's rises
    linearly); `mlp_activate_last=False` leaves GELU off the block MLP's last Dense; without
    `qkv_bias` the query, key and value projections have no bias; `lsa_temperature="per_head"`
    learns one scale per head multiplying the scores (init key_dim ** -0.5), where "shared" is
    keras.io's one temperature per block dividing them.
    """

    image_size: int = 72
    patch_size: int = 6
    dim: int = 64
    depth: int = 8
    num_heads: int = 4
    key_dim: int = 64
    mlp_units: tuple[int, ...] = (128, 64)
    dropout: float = 0.1
    head_units: tuple[int, ...] = (2048, 1024)
    head_dropout: float = 0.5
    epsilon: float = 1e-6
    spt: bool = True
    lsa: bool = True
    head: str = field(
        default="flatten", metadata={**ADDED_FIELD, "choices": ("flatten", "class_token")}
    )
    drop_path: float = field(default=0.0, metadata=ADDED_FIELD)
    mlp_activate_last: bool = field(default=True, metadata=ADDED_FIELD)
    qkv_bias: bool = field(default=True, metadata=ADDED_FIELD)
    lsa_temperature: str = field(
        default="shared", metadata={**ADDED_FIELD, "choices": ("shared", "per_head")}
    )


# each model's architecture class (config.json's `preset.arch` is rebuilt as one)
ARCH_CLASSES: dict[str, type] = {"shiftvit": ShiftViTArch, "vit-lsa": ViTArch, "vit": ViTArch}
# architecture fields `--arch` may not set: `--model` chooses them (vit-lsa or vit)
MODEL_FIELDS = {"spt", "lsa"}


def check_arch(arch: ShiftViTArch | ViTArch) -> None:
    """UsageError naming the way out when an architecture field cannot build a model: rates
    from 0 to below 1, sizes and counts 1 or more, other numbers above 0."""
    for f in fields(arch):
        value = getattr(arch, f.name)
        if isinstance(value, (bool, str)):
            continue
        if f.name == "drop_path" or f.name.endswith("dropout"):
            if not 0.0 <= value < 1.0:
                raise UsageError(
                    f"{f.name} {value} is a rate: pass --arch {f.name}=0.1, say (0 to below 1)"
                )
        elif isinstance(value, tuple) and not all(v >= 1 for v in value):
            raise UsageError(
                f"{f.name} {':'.join(map(str, value))} needs counts of 1 or more: pass --arch "
                f"{f.name}={':'.join(['2'] * len(value))}, say"
            )
        elif isinstance(value, int) and value < 1:
            raise UsageError(f"{f.name} {value} must be 1 or more: pass --arch {f.name}=2, say")
        elif isinstance(value, float) and value <= 0:
            raise UsageError(f"{f.name} {value} must be above 0: pass --arch {f.name}=2, say")
    if getattr(arch, "num_div", 4) < 4:  # four groups of C // num_div channels shift
        raise UsageError(
            f"num_div {arch.num_div}: 4 groups of channels / num_div shift, so it must be 4 or "
            "more: pass --arch num_div=12, say"
        )
